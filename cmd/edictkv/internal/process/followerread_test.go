package process

import (
	"context"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/edictlog/edictlog/cmd/edictkv/kvjson"
	"github.com/edictlog/edictlog/edict"
)

// A linearizable read asked of a follower is answered by the follower —
// its header names it, and it forwards nothing — and sees every write the
// leader acknowledged before it began, though the follower may not yet
// have heard that the write committed: it waits for the leader's commit
// index. A txn that only reads is answered so too, as etcd answers it,
// and the HTTP API's default read.
func TestFollowerAnswersLinearizableReads(t *testing.T) {
	c := startCluster(t, 3, func(cfg *Config) { cfg.GRPCAddr = "127.0.0.1:0" })
	leader := c.leader()
	f := c.follower(leader)
	client := func(id edict.ProcessID) *clientv3.Client {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{c.procs[id].GRPCAddr()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		require.NoError(t, err)
		t.Cleanup(func() { cli.Close() })
		return cli
	}
	atLeader, atFollower := client(leader), client(f)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	eventually(t, "the follower knows the leader", func() bool {
		_, err := atFollower.Get(ctx, "warm-up")
		return err == nil
	})
	forwarded := func(method string) int {
		m := regexp.MustCompile(`edictkv_grpc_forwarded_total\{method="` + method + `"\} (\d+)`).
			FindStringSubmatch(string(do(t, http.MethodGet, c.url(f, "/metrics"), "").body))
		if m == nil {
			return 0
		}
		n, err := strconv.Atoi(m[1])
		require.NoError(t, err)
		return n
	}
	before := forwarded("Range")

	for i := range 50 {
		v := strconv.Itoa(i)
		put, err := atLeader.Put(ctx, "k", v)
		require.NoError(t, err)
		got, err := atFollower.Get(ctx, "k")
		require.NoError(t, err, "read %d", i)
		require.Len(t, got.Kvs, 1)
		require.Equal(t, v, string(got.Kvs[0].Value), "read %d began after the write was acknowledged", i)
		require.GreaterOrEqual(t, got.Header.Revision, put.Header.Revision)
		require.Equal(t, uint64(f), got.Header.MemberId, "the follower answers")
		txn, err := atFollower.Txn(ctx).If(clientv3.Compare(clientv3.Value("k"), "=", v)).Then(clientv3.OpGet("k")).Commit()
		require.NoError(t, err)
		require.True(t, txn.Succeeded, "a txn that only reads, %d", i)
		require.Equal(t, uint64(f), txn.Header.MemberId)

		a := do(t, http.MethodPut, c.url(leader, "/v1/kv/h"), v)
		mustStatus(t, a, http.StatusOK)
		a = do(t, http.MethodGet, c.url(f, "/v1/kv/h"), "")
		mustStatus(t, a, http.StatusOK)
		var g kvjson.GetResponse
		a.json(t, &g)
		require.NotNil(t, g.Value)
		require.Equal(t, v, *g.Value, "HTTP read %d", i)
		// f answers itself: at the follower level, or at the lease level
		// should it have taken the lease meanwhile (a busy host can move
		// it); a read sent on to the leader would name the leader.
		require.Contains(t, []string{"follower", "lease"}, g.Consistency)
		require.Equal(t, strconv.FormatUint(uint64(f), 10), a.header.Get(kvjson.HeaderServedBy))
	}
	assert.Equal(t, before, forwarded("Range"), "no Range forwarded")
	assert.Zero(t, forwarded("Txn"), "no txn that only reads forwarded")
	_, err := atFollower.Put(ctx, "k", "last")
	require.NoError(t, err)
	assert.Equal(t, 1, forwarded("Put"), "a write is, and the metric shows it")
}
