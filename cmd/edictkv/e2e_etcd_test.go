package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
)

// etcdCluster is a 3-process edictkv cluster serving the etcd v3 API, and
// a clientv3 client that knows every process.
type etcdCluster struct {
	*cluster
	grpc map[int]string // process id → etcd API address
	cli  *clientv3.Client
}

func newEtcdCluster(t *testing.T) *etcdCluster {
	grpcAddrs := map[int]string{}
	c := newClusterWith(t, 3, false, func(c *cluster, p *proc) []string {
		if grpcAddrs[p.id] == "" {
			grpcAddrs[p.id] = freePort(t)
		}
		return []string{"--grpc-addr", grpcAddrs[p.id]}
	})
	for _, p := range c.procs {
		c.ready(p)
	}
	ec := &etcdCluster{cluster: c, grpc: grpcAddrs}
	ec.cli = ec.client(ec.endpoints()...)
	return ec
}

func (ec *etcdCluster) endpoints() []string {
	var out []string
	for _, p := range ec.procs {
		out = append(out, ec.grpc[p.id])
	}
	return out
}

func (ec *etcdCluster) client(endpoints ...string) *clientv3.Client {
	ec.t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	require.NoError(ec.t, err)
	ec.t.Cleanup(func() { cli.Close() })
	return cli
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// put writes key through cli, retrying the answers that say nothing was
// written (no leader known yet, a process unreachable before sending).
func putRetry(t *testing.T, cli *clientv3.Client, key, value string) *clientv3.PutResponse {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := cli.Put(ctx, key, value)
		cancel()
		if err == nil {
			return resp
		}
		if time.Now().After(deadline) || !errors.Is(rpctypes.Error(err), rpctypes.ErrNoLeader) && grpcstatus.Code(err) != codes.Unavailable {
			t.Fatalf("put %s: %v", key, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// The etcd client works against edictkv: puts, gets, deletes, prefix
// ranges with their options, transactions both ways, prev_kv, the
// cluster's members and status, and etcd's errors.
func TestEtcdClientAPI(t *testing.T) {
	ec := newEtcdCluster(t)
	cli, ctx := ec.cli, ctxT(t)

	first := putRetry(t, cli, "a", "1")
	require.Positive(t, first.Header.Revision)
	get, err := cli.Get(ctx, "a")
	require.NoError(t, err)
	require.Len(t, get.Kvs, 1)
	kv := get.Kvs[0]
	assert.Equal(t, "1", string(kv.Value))
	assert.Equal(t, first.Header.Revision, kv.ModRevision)
	assert.Equal(t, first.Header.Revision, kv.CreateRevision)
	assert.Equal(t, int64(1), kv.Version)
	assert.GreaterOrEqual(t, get.Header.Revision, first.Header.Revision)

	second, err := cli.Put(ctx, "a", "2", clientv3.WithPrevKV())
	require.NoError(t, err)
	require.NotNil(t, second.PrevKv)
	assert.Equal(t, "1", string(second.PrevKv.Value))
	assert.Greater(t, second.Header.Revision, first.Header.Revision, "every write gets a larger revision")

	for _, k := range []string{"p/3", "p/1", "p/2", "q"} {
		_, err := cli.Put(ctx, k, "v"+k)
		require.NoError(t, err)
	}
	pre, err := cli.Get(ctx, "p/", clientv3.WithPrefix())
	require.NoError(t, err)
	assert.Equal(t, []string{"p/1", "p/2", "p/3"}, keys(pre))
	assert.Equal(t, int64(3), pre.Count)
	lim, err := cli.Get(ctx, "p/", clientv3.WithPrefix(), clientv3.WithLimit(2))
	require.NoError(t, err)
	assert.Equal(t, []string{"p/1", "p/2"}, keys(lim))
	assert.True(t, lim.More)
	assert.Equal(t, int64(3), lim.Count)
	desc, err := cli.Get(ctx, "p/", clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend), clientv3.WithLimit(2))
	require.NoError(t, err)
	assert.Equal(t, []string{"p/3", "p/2"}, keys(desc))
	cnt, err := cli.Get(ctx, "p/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	require.NoError(t, err)
	assert.Empty(t, cnt.Kvs)
	assert.Equal(t, int64(3), cnt.Count)
	ko, err := cli.Get(ctx, "p/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	require.NoError(t, err)
	require.Len(t, ko.Kvs, 3)
	assert.Empty(t, ko.Kvs[0].Value)
	rng, err := cli.Get(ctx, "p/2", clientv3.WithRange("q\x00"))
	require.NoError(t, err)
	assert.Equal(t, []string{"p/2", "p/3", "q"}, keys(rng))
	// A serializable read is the stale level: served by whichever process
	// is asked, it catches up.
	for _, ep := range ec.endpoints() {
		one := ec.client(ep)
		require.Eventually(t, func() bool {
			r, err := one.Get(ctx, "q", clientv3.WithSerializable())
			return err == nil && len(r.Kvs) == 1 && string(r.Kvs[0].Value) == "vq"
		}, 10*time.Second, 20*time.Millisecond, "serializable read of q at %s", ep)
	}

	del, err := cli.Delete(ctx, "p/1", clientv3.WithPrevKV())
	require.NoError(t, err)
	assert.Equal(t, int64(1), del.Deleted)
	require.Len(t, del.PrevKvs, 1)
	assert.Equal(t, "vp/1", string(del.PrevKvs[0].Value))
	delp, err := cli.Delete(ctx, "p/", clientv3.WithPrefix())
	require.NoError(t, err)
	assert.Equal(t, int64(2), delp.Deleted)
	gone, err := cli.Get(ctx, "p/", clientv3.WithPrefix())
	require.NoError(t, err)
	assert.Zero(t, gone.Count)

	// Compare-and-swap: success, then failure with the failure branch's
	// read; compares on version and revisions with each relation.
	ok, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.Value("a"), "=", "2")).
		Then(clientv3.OpPut("a", "3")).Else(clientv3.OpGet("a")).Commit()
	require.NoError(t, err)
	assert.True(t, ok.Succeeded)
	failed, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.Value("a"), "=", "2")).
		Then(clientv3.OpPut("a", "never")).Else(clientv3.OpGet("a")).Commit()
	require.NoError(t, err)
	assert.False(t, failed.Succeeded)
	require.Len(t, failed.Responses, 1)
	cur := failed.Responses[0].GetResponseRange().Kvs
	require.Len(t, cur, 1)
	assert.Equal(t, "3", string(cur[0].Value))
	assert.Equal(t, ok.Header.Revision, cur[0].ModRevision, "the txn's writes carry its revision")
	for _, c := range []struct {
		cmp  clientv3.Cmp
		want bool
	}{
		{clientv3.Compare(clientv3.Version("a"), "=", 3), true},
		{clientv3.Compare(clientv3.Version("a"), "!=", 3), false},
		{clientv3.Compare(clientv3.CreateRevision("a"), "=", first.Header.Revision), true},
		{clientv3.Compare(clientv3.ModRevision("a"), "<", ok.Header.Revision), false},
		{clientv3.Compare(clientv3.ModRevision("a"), ">", first.Header.Revision), true},
		{clientv3.Compare(clientv3.CreateRevision("missing"), "=", 0), true},
		{clientv3.Compare(clientv3.Value("missing"), "!=", "x"), false},
	} {
		// A txn of compares alone is serializable (etcd's
		// isTxnSerializable: no range in it asks otherwise), answered from
		// the state of whichever member the client picked, which may not
		// have applied the CAS yet. A linearizable range in a branch makes
		// the txn linearizable, as in etcd.
		r, err := cli.Txn(ctx).If(c.cmp).Then(clientv3.OpGet("a")).Commit()
		require.NoError(t, err)
		assert.Equal(t, c.want, r.Succeeded, "compare %v", c.cmp)
	}
	multi, err := cli.Txn(ctx).Then(clientv3.OpPut("m1", "x"), clientv3.OpPut("m2", "y"), clientv3.OpGet("m", clientv3.WithPrefix())).Commit()
	require.NoError(t, err)
	assert.Equal(t, []string{"m1", "m2"}, keys((*clientv3.GetResponse)(multi.Responses[2].GetResponseRange())),
		"a range in a branch sees the branch's earlier writes")

	// etcd's errors.
	_, err = cli.Txn(ctx).Then(clientv3.OpPut("d", "1"), clientv3.OpPut("d", "2")).Commit()
	assert.ErrorIs(t, rpctypes.Error(err), rpctypes.ErrDuplicateKey)
	_, err = cli.Put(ctx, "", "x")
	assert.ErrorIs(t, rpctypes.Error(err), rpctypes.ErrEmptyKey)
	// Any key is the user's, a NUL first included: the member directory
	// lives in a namespace of its own, which no range lists.
	_, err = cli.Put(ctx, "\x00edictkv/http/1", "mine")
	require.NoError(t, err)
	all, err := cli.Get(ctx, "\x00", clientv3.WithFromKey())
	require.NoError(t, err)
	assert.Contains(t, keys(all), "\x00edictkv/http/1")
	for _, k := range keys(all) {
		assert.False(t, strings.HasPrefix(k, "\x00") && k != "\x00edictkv/http/1", "a key nobody wrote: %q", k)
	}

	// History: a read at a past revision, a compaction, then etcd's
	// compacted error below it.
	past, err := cli.Get(ctx, "a", clientv3.WithRev(first.Header.Revision))
	require.NoError(t, err)
	require.Len(t, past.Kvs, 1)
	assert.Equal(t, "1", string(past.Kvs[0].Value), "the value at the first write's revision")
	latest, err := cli.Get(ctx, "a")
	require.NoError(t, err)
	_, err = cli.Compact(ctx, latest.Header.Revision, clientv3.WithCompactPhysical())
	require.NoError(t, err)
	_, err = cli.Get(ctx, "a", clientv3.WithRev(first.Header.Revision))
	assert.ErrorIs(t, rpctypes.Error(err), rpctypes.ErrCompacted)
	_, err = cli.Compact(ctx, latest.Header.Revision)
	assert.ErrorIs(t, rpctypes.Error(err), rpctypes.ErrCompacted)
	_, err = cli.Compact(ctx, latest.Header.Revision+1000)
	assert.ErrorIs(t, rpctypes.Error(err), rpctypes.ErrFutureRev)
	now, err := cli.Get(ctx, "a", clientv3.WithRev(latest.Header.Revision))
	require.NoError(t, err)
	assert.Equal(t, latest.Kvs[0].Value, now.Kvs[0].Value, "a read at the compaction revision")

	// Calls edictkv does not implement say so, naming the call.
	_, err = cli.Grant(ctx, 10)
	assert.Equal(t, codes.Unimplemented, grpcstatus.Code(err), "%v", err)
	assert.Contains(t, err.Error(), "LeaseGrant")
	_, err = cli.Put(ctx, "l", "x", clientv3.WithLease(7))
	assert.Equal(t, codes.Unimplemented, grpcstatus.Code(err), "%v", err)

	// A watch from the revision of a put is sent that put.
	watched, err := cli.Put(ctx, "a", "watched")
	require.NoError(t, err)
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	w := <-cli.Watch(wctx, "a", clientv3.WithRev(watched.Header.Revision))
	require.NoError(t, w.Err())
	require.Len(t, w.Events, 1)
	assert.Equal(t, "watched", string(w.Events[0].Kv.Value))
	assert.Equal(t, watched.Header.Revision, w.Events[0].Kv.ModRevision)

	// The cluster as etcdctl's member list and endpoint status see it.
	ml, err := cli.MemberList(ctx)
	require.NoError(t, err)
	require.Len(t, ml.Members, 3)
	for _, m := range ml.Members {
		assert.Equal(t, []string{"http://" + ec.grpc[int(m.ID)]}, m.ClientURLs, "member %d", m.ID)
		assert.Len(t, m.PeerURLs, 1)
	}
	leaders := 0
	for _, ep := range ec.endpoints() {
		st, err := cli.Status(ctx, ep)
		require.NoError(t, err)
		assert.NotZero(t, st.Leader)
		assert.Positive(t, st.RaftTerm)
		if st.Leader == st.Header.MemberId {
			leaders++
		}
	}
	assert.Equal(t, 1, leaders)
}

// Revisions keep increasing across a leader's death, and raft_term
// grows with the new reign.
func TestEtcdRevisionsAcrossLeaderKill(t *testing.T) {
	ec := newEtcdCluster(t)
	before := putRetry(t, ec.cli, "k", "before")
	leader := ec.leader()
	ec.killLeader(leader)
	after := putRetry(t, ec.cli, "k", "after")
	assert.Greater(t, after.Header.Revision, before.Header.Revision)
	assert.Greater(t, after.Header.RaftTerm, before.Header.RaftTerm, "a new reign has a larger raft_term")
	get, err := ec.cli.Get(ctxT(t), "k")
	require.NoError(t, err)
	require.Len(t, get.Kvs, 1)
	assert.Equal(t, "after", string(get.Kvs[0].Value))
	assert.Equal(t, after.Header.Revision, get.Kvs[0].ModRevision)
	assert.Equal(t, before.Header.Revision, get.Kvs[0].CreateRevision)
	assert.Equal(t, int64(2), get.Kvs[0].Version)
}

func keys(r *clientv3.GetResponse) []string {
	var out []string
	for _, kv := range r.Kvs {
		out = append(out, string(kv.Key))
	}
	return out
}

// etcdctl, built from its published module, works against edictkv. It
// needs the binary: set EDICTKV_ETCDCTL to its path (.ci/run builds it with
// bench/etcd/install.sh); without it the test skips.
func TestEtcdctl(t *testing.T) {
	bin := os.Getenv("EDICTKV_ETCDCTL")
	if bin == "" {
		t.Skip("EDICTKV_ETCDCTL is not set: build etcdctl with bench/etcd/install.sh and point it there")
	}
	ec := newEtcdCluster(t)
	eps := strings.Join(ec.endpoints(), ",")
	ctl := func(stdin string, args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"--endpoints=" + eps, "--dial-timeout=5s", "--command-timeout=10s"}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "etcdctl %s:\n%s", strings.Join(args, " "), out)
		return string(out)
	}
	putRetry(t, ec.cli, "warmup", "x") // a leader is known
	assert.Equal(t, "OK\n", ctl("", "put", "fruit/apple", "red"))
	assert.Equal(t, "OK\n", ctl("", "put", "fruit/banana", "yellow"))
	assert.Equal(t, "fruit/apple\nred\nfruit/banana\nyellow\n", ctl("", "get", "--prefix", "fruit/"))
	assert.Equal(t, "1\n", ctl("", "del", "fruit/banana"))
	assert.Equal(t, "fruit/apple\nred\n", ctl("", "get", "--prefix", "fruit/"))
	// txn reads compares, then success ops, then failure ops from stdin.
	assert.Equal(t, "SUCCESS\n\nOK\n", ctl("value(\"fruit/apple\") = \"red\"\n\nput fruit/apple green\n\nput fruit/apple never\n\n", "txn"))
	assert.Equal(t, "FAILURE\n\nfruit/apple\ngreen\n", ctl("value(\"fruit/apple\") = \"red\"\n\nput fruit/apple never\n\nget fruit/apple\n\n", "txn"))

	members := ctl("", "member", "list")
	for _, p := range ec.procs {
		assert.Contains(t, members, fmt.Sprintf("edictkv-%d, tcp://%s, http://%s, false", p.id, p.raft, ec.grpc[p.id]))
	}
	status := ctl("", "endpoint", "status")
	lines := strings.Split(strings.TrimSpace(status), "\n")
	require.Len(t, lines, 3, status)
	leaders := 0
	for _, l := range lines {
		if strings.Contains(l, ", true, false, ") { // is leader, is learner
			leaders++
		}
	}
	assert.Equal(t, 1, leaders, status)
	assert.Contains(t, ctl("", "endpoint", "health"), "is healthy")
}

// A paper's weak leader election runs in real processes: the cluster
// elects a leader, and another after the leader is killed.
func TestPaperDetectorEndToEnd(t *testing.T) {
	for _, det := range []string{"omega-6stable", "fetzer"} {
		t.Run(det, func(t *testing.T) {
			c := newClusterWith(t, 3, false, func(c *cluster, p *proc) []string { return []string{"--detector", det} })
			leader := c.leader()
			c.put(c.other(leader), "k", "1")
			next := c.killLeader(leader)
			c.put(next, "k", "2")
			if v, code := c.get(c.other(next), "k", "lease"); v != "2" {
				t.Fatalf("read k: %q (%d), want 2", v, code)
			}
		})
	}
}
