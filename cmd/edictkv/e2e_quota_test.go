package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/edictlog/edictlog/cmd/edictkv/kvjson"
)

// upkeepCluster is a 3-process edictkv serving the etcd API, started with
// flags.
func upkeepCluster(t *testing.T, flags ...string) *etcdCluster {
	grpcAddrs := map[int]string{}
	c := newClusterWith(t, 3, false, func(c *cluster, p *proc) []string {
		if grpcAddrs[p.id] == "" {
			grpcAddrs[p.id] = freePort(t)
		}
		return append([]string{"--grpc-addr", grpcAddrs[p.id]}, flags...)
	})
	for _, p := range c.procs {
		c.ready(p)
	}
	ec := &etcdCluster{cluster: c, grpc: grpcAddrs}
	ec.cli = ec.client(ec.endpoints()...)
	return ec
}

// quotaCtl runs etcdctl against every endpoint, if EDICTKV_ETCDCTL names
// it (ok false otherwise: the caller checks the same through clientv3).
func quotaCtl(t *testing.T, ec *etcdCluster, args ...string) (out string, ok bool, err error) {
	t.Helper()
	bin := os.Getenv("EDICTKV_ETCDCTL")
	if bin == "" {
		return "", false, nil
	}
	cmd := exec.Command(bin, append([]string{"--endpoints=" + strings.Join(ec.endpoints(), ","),
		"--dial-timeout=5s", "--command-timeout=30s"}, args...)...)
	b, err := cmd.CombinedOutput()
	return string(b), true, err
}

// mustCtl is quotaCtl that must succeed.
func mustCtl(t *testing.T, ec *etcdCluster, args ...string) (string, bool) {
	t.Helper()
	out, ok, err := quotaCtl(t, ec, args...)
	require.NoError(t, err, "etcdctl %s:\n%s", strings.Join(args, " "), out)
	return out, ok
}

// The space quota end to end, as an etcd operator meets it: puts grow
// the state until one is refused with "database space exceeded" (and the
// HTTP API's no_space), the leader raises NOSPACE, which `alarm list`
// and every `endpoint status` show; deletes still go; `compaction
// --physical`, `defrag` and `alarm disarm` make room, and writes succeed
// again; `endpoint hashkv` agrees across the members. etcdctl runs where
// EDICTKV_ETCDCTL names it (bench/etcd/install.sh builds it); otherwise
// clientv3 makes the same calls.
func TestQuotaEndToEnd(t *testing.T) {
	const quota = 2 << 20
	ec := upkeepCluster(t, "--quota-backend-bytes", fmt.Sprint(quota))
	cli, ctx := ec.cli, ctxT(t)
	putRetry(t, cli, "small", "x")

	// Fill: one key's history, 128 KiB a revision, until the leader's
	// file (which grows as its batches commit) is at the quota.
	value := strings.Repeat("v", 128<<10)
	var last int64
	refused := false
	for i := range 400 {
		resp, err := cli.Put(ctx, "big", fmt.Sprint(i, value))
		if err != nil {
			require.Equal(t, rpctypes.ErrNoSpace, rpctypes.Error(err), "the refusal is etcd's: %v", err)
			refused = true
			break
		}
		last = resp.Header.Revision
	}
	require.True(t, refused, "400 puts of 128 KiB under a quota of 2 MiB")
	st := ec.statuses(ctx)
	leader := st[0].Leader
	nospace := &pb.AlarmMember{MemberID: leader, Alarm: pb.AlarmType_NOSPACE}

	// The alarm, as every member sees it.
	alarms, err := cli.AlarmList(ctx)
	require.NoError(t, err)
	assert.Equal(t, []*pb.AlarmMember{nospace}, alarms.Alarms, "NOSPACE for the leader, which checked the quota")
	if out, ok := mustCtl(t, ec, "alarm", "list"); ok {
		assert.Equal(t, fmt.Sprintf("memberID:%d alarm:NOSPACE \n", leader), out)
	}
	waitFor(t, "every member lists the alarm", 30*time.Second, func() error {
		for _, s := range ec.statuses(ctx) {
			if !slices.Contains(s.Errors, nospace.String()) {
				return fmt.Errorf("member %d: errors %q", s.Header.MemberId, s.Errors)
			}
		}
		return nil
	})
	if out, ok := mustCtl(t, ec, "endpoint", "status", "-w", "table"); ok {
		t.Logf("etcdctl endpoint status -w table, NOSPACE raised:\n%s", out)
		assert.Equal(t, 3, strings.Count(out, "alarm:NOSPACE"), out)
		assert.Contains(t, out, "RAFT APPLIED INDEX")
	}

	// Every put is refused now, through either API; a delete is not.
	if out, ok, err := quotaCtl(t, ec, "put", "small", "y"); ok {
		require.Error(t, err)
		assert.Contains(t, out, "etcdserver: mvcc: database space exceeded")
	}
	code, body, err := call("PUT", "http://"+ec.procs[0].api+"/v1/kv/small", "y")
	require.NoError(t, err)
	require.Equal(t, 507, code, "%s", body)
	var e kvjson.ErrorJSON
	require.NoError(t, json.Unmarshal(body, &e))
	assert.Equal(t, kvjson.CodeNoSpace, e.Code)
	_, err = cli.Delete(ctx, "small")
	require.NoError(t, err, "deletes go on")

	// Compaction, defragmentation, disarm.
	if out, ok := mustCtl(t, ec, "compaction", "--physical", fmt.Sprint(last)); ok {
		assert.Equal(t, fmt.Sprintf("compacted revision %d\n", last), out)
	} else {
		_, err := cli.Compact(ctx, last, clientv3.WithCompactPhysical())
		require.NoError(t, err)
	}
	before := ec.statuses(ctx)
	// The followers compact in the background; defragmenting before they
	// are done gives back less there, and the leader alone decides.
	if out, ok := mustCtl(t, ec, "defrag"); ok {
		assert.Equal(t, 3, strings.Count(out, "Finished defragmenting etcd member"), out)
	} else {
		for _, ep := range ec.endpoints() {
			_, err := cli.Defragment(ctx, ep)
			require.NoError(t, err)
		}
	}
	after := ec.statuses(ctx)
	for i := range after {
		if after[i].Header.MemberId == leader {
			assert.Less(t, after[i].DbSize, int64(quota/2), "the leader's file after defragmenting")
			assert.Less(t, after[i].DbSize, before[i].DbSize)
		}
	}
	if out, ok := mustCtl(t, ec, "alarm", "disarm"); ok {
		assert.Equal(t, fmt.Sprintf("memberID:%d alarm:NOSPACE \n", leader), out)
	} else {
		_, err := cli.AlarmDisarm(ctx, &clientv3.AlarmMember{})
		require.NoError(t, err)
	}
	alarms, err = cli.AlarmList(ctx)
	require.NoError(t, err)
	assert.Empty(t, alarms.Alarms)
	if out, ok := mustCtl(t, ec, "put", "small", "again"); ok {
		assert.Equal(t, "OK\n", out)
	} else {
		_, err := cli.Put(ctx, "small", "again")
		require.NoError(t, err)
	}
	put, err := cli.Put(ctx, "big", "smaller")
	require.NoError(t, err, "writes succeed again")

	// Every member hashes the same history up to the last write.
	rev := put.Header.Revision
	waitFor(t, "the members agree on the hash", 30*time.Second, func() error {
		var hashes []uint32
		for _, ep := range ec.endpoints() {
			h, err := cli.HashKV(ctx, ep, rev)
			if err != nil {
				return fmt.Errorf("%s: %w", ep, err)
			}
			if h.CompactRevision != last || h.HashRevision != rev {
				return fmt.Errorf("%s: compaction %d, hashed to %d", ep, h.CompactRevision, h.HashRevision)
			}
			hashes = append(hashes, h.Hash)
		}
		if hashes[0] != hashes[1] || hashes[0] != hashes[2] {
			return fmt.Errorf("hashes %v", hashes)
		}
		return nil
	})
	if out, ok := mustCtl(t, ec, "endpoint", "hashkv", fmt.Sprintf("--rev=%d", rev)); ok {
		lines := strings.Split(strings.TrimSpace(out), "\n")
		require.Len(t, lines, 3, out)
		_, first, _ := strings.Cut(lines[0], ", ")
		for _, l := range lines {
			_, h, _ := strings.Cut(l, ", ")
			assert.Equal(t, first, h, out)
			assert.True(t, strings.HasSuffix(l, fmt.Sprintf(", %d", rev)), l)
		}
	}
	if out, ok := mustCtl(t, ec, "endpoint", "status", "-w", "table"); ok {
		t.Logf("etcdctl endpoint status -w table, after compaction, defrag and disarm:\n%s", out)
		assert.NotContains(t, out, "NOSPACE")
	}
}

// Auto-compaction through the flags: the leader compacts the history it
// no longer keeps, and reads below the compaction are etcd's
// "compacted".
func TestAutoCompactionEndToEnd(t *testing.T) {
	ec := upkeepCluster(t, "--auto-compaction-mode", "periodic", "--auto-compaction-retention", "1s")
	cli, ctx := ec.cli, ctxT(t)
	first := putRetry(t, ec.cli, "k", "0").Header.Revision
	waitFor(t, "an automatic compaction past the first write", 30*time.Second, func() error {
		if _, err := cli.Put(ctx, "k", "more"); err != nil {
			return err
		}
		st := ec.statuses(ctx)[0]
		_, err := cli.Get(ctx, "k", clientv3.WithRev(first))
		if rpctypes.Error(err) != rpctypes.ErrCompacted {
			return fmt.Errorf("a read at revision %d (current %d): %v", first, st.Header.Revision, err)
		}
		return nil
	})
}

// statuses asks every endpoint for its Status.
func (ec *etcdCluster) statuses(ctx context.Context) []*clientv3.StatusResponse {
	ec.t.Helper()
	var out []*clientv3.StatusResponse
	for _, ep := range ec.endpoints() {
		st, err := ec.cli.Status(ctx, ep)
		require.NoError(ec.t, err, ep)
		out = append(out, st)
	}
	return out
}
