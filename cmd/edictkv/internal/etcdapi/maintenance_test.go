package etcdapi

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/edictlog/edictlog/cmd/edictkv/internal/kvservice"
	"github.com/edictlog/edictlog/edict"
)

// Status reports this process's log indexes, the state's sizes and the
// quota, and lists "no leader" and every active alarm in errors, as
// etcd's.
func TestStatus(t *testing.T) {
	p := startProcessQuota(t, 1, 1, nil, 1<<30)
	ctx := ctxT(t)
	m, kv := pb.NewMaintenanceClient(p.conn), pb.NewKVClient(p.conn)
	for i := range 5 {
		_, err := kv.Put(ctx, &pb.PutRequest{Key: fmt.Appendf(nil, "k%d", i), Value: []byte("v")})
		require.NoError(t, err)
	}
	p.node.mu.Lock()
	p.node.st.Commit, p.node.st.Applied = 12, 11
	p.node.mu.Unlock()
	st, err := m.Status(ctx, &pb.StatusRequest{})
	require.NoError(t, err)
	assert.Equal(t, uint64(12), st.RaftIndex, "the commit index")
	assert.Equal(t, uint64(11), st.RaftAppliedIndex, "the applied index")
	assert.Equal(t, uint64(17), st.RaftTerm, "the reign index")
	assert.Equal(t, uint64(1), st.Leader)
	assert.Equal(t, int64(6), st.Header.Revision)
	assert.Equal(t, uint64(1), st.Header.MemberId)
	assert.Equal(t, int64(1<<30), st.DbSizeQuota)
	assert.Positive(t, st.DbSizeInUse)
	assert.GreaterOrEqual(t, st.DbSize, st.DbSizeInUse)
	assert.Empty(t, st.Errors)

	_, err = m.Alarm(ctx, &pb.AlarmRequest{Action: pb.AlarmRequest_ACTIVATE, MemberID: 3, Alarm: pb.AlarmType_NOSPACE})
	require.NoError(t, err)
	_, err = m.Alarm(ctx, &pb.AlarmRequest{Action: pb.AlarmRequest_ACTIVATE, MemberID: 1, Alarm: pb.AlarmType_CORRUPT})
	require.NoError(t, err)
	p.node.mu.Lock()
	p.node.st.Leader, p.node.st.IsLeader = edict.None, false
	p.node.mu.Unlock()
	st, err = m.Status(ctx, &pb.StatusRequest{})
	require.NoError(t, err)
	assert.Equal(t, []string{rpctypes.ErrGRPCNoLeader.Error(),
		(&pb.AlarmMember{MemberID: 1, Alarm: pb.AlarmType_CORRUPT}).String(),
		(&pb.AlarmMember{MemberID: 3, Alarm: pb.AlarmType_NOSPACE}).String()}, st.Errors)
	assert.Contains(t, st.Errors[2], "NOSPACE")

	other := startProcess(t, 2, 2, nil)
	st, err = pb.NewMaintenanceClient(other.conn).Status(ctx, &pb.StatusRequest{})
	require.NoError(t, err)
	assert.Equal(t, kvservice.DefaultQuotaBytes, st.DbSizeQuota, "0 is etcd's default quota")
}

// Over the quota a put is refused with etcd's "database space exceeded"
// and the NOSPACE alarm names this member; what puts nothing goes on.
func TestQuotaRefusal(t *testing.T) {
	p := startProcessQuota(t, 1, 1, nil, 1)
	ctx := ctxT(t)
	m, kv := pb.NewMaintenanceClient(p.conn), pb.NewKVClient(p.conn)
	_, err := kv.Put(ctx, &pb.PutRequest{Key: []byte("a"), Value: []byte("1")})
	assert.Equal(t, rpctypes.ErrGRPCNoSpace.Error(), err.Error())
	_, err = kv.Txn(ctx, &pb.TxnRequest{Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("a")}}}}})
	assert.Equal(t, rpctypes.ErrNoSpace, rpctypes.Error(err))
	_, err = kv.Txn(ctx, &pb.TxnRequest{Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: &pb.DeleteRangeRequest{Key: []byte("a")}}}}})
	assert.NoError(t, err, "a txn that puts nothing")
	list, err := m.Alarm(ctx, &pb.AlarmRequest{Action: pb.AlarmRequest_GET})
	require.NoError(t, err)
	assert.Equal(t, []*pb.AlarmMember{{MemberID: 1, Alarm: pb.AlarmType_NOSPACE}}, list.Alarms)
	st, err := m.Status(ctx, &pb.StatusRequest{})
	require.NoError(t, err)
	assert.Equal(t, []string{list.Alarms[0].String()}, st.Errors)
}

// HashKV hashes a process's history up to a revision: two processes that
// applied the same history hash alike, at every revision they keep, and
// unlike a third whose history differs; a revision compacted away or not
// yet made is etcd's error.
func TestHashKV(t *testing.T) {
	ctx := ctxT(t)
	ps := []*process{startProcess(t, 1, 1, nil), startProcess(t, 1, 1, nil), startProcess(t, 1, 1, nil)}
	for i, p := range ps {
		kv := pb.NewKVClient(p.conn)
		for j := range 6 {
			v := "v"
			if i == 2 && j == 4 {
				v = "other"
			}
			_, err := kv.Put(ctx, &pb.PutRequest{Key: fmt.Appendf(nil, "k%d", j%3), Value: []byte(v)})
			require.NoError(t, err)
		}
		_, err := kv.Compact(ctx, &pb.CompactionRequest{Revision: 3, Physical: i == 0})
		require.NoError(t, err)
	}
	hash := func(p *process, rev int64) *pb.HashKVResponse {
		t.Helper()
		h, err := pb.NewMaintenanceClient(p.conn).HashKV(ctx, &pb.HashKVRequest{Revision: rev})
		require.NoError(t, err)
		return h
	}
	for _, rev := range []int64{0, 3, 5, 7} {
		a, b, c := hash(ps[0], rev), hash(ps[1], rev), hash(ps[2], rev)
		assert.Equal(t, a.Hash, b.Hash, "revision %d: the same history, physically compacted or not", rev)
		assert.Equal(t, int64(3), a.CompactRevision)
		assert.Equal(t, int64(7), a.Header.Revision)
		assert.Equal(t, uint64(1), a.Header.MemberId)
		want := rev
		if rev == 0 {
			want = 7
		}
		assert.Equal(t, want, a.HashRevision)
		if rev >= 6 || rev == 0 {
			assert.NotEqual(t, a.Hash, c.Hash, "revision %d: another history", rev)
		} else {
			assert.Equal(t, a.Hash, c.Hash, "revision %d: the histories differ only later", rev)
		}
	}
	m := pb.NewMaintenanceClient(ps[0].conn)
	_, err := m.HashKV(ctx, &pb.HashKVRequest{Revision: 2})
	assert.Equal(t, rpctypes.ErrCompacted, rpctypes.Error(err))
	_, err = m.HashKV(ctx, &pb.HashKVRequest{Revision: 8})
	assert.Equal(t, rpctypes.ErrFutureRev, rpctypes.Error(err))
}

// Defragment gives back what compaction freed, in this process's state,
// which reads the same after it.
func TestDefragment(t *testing.T) {
	p := startProcess(t, 1, 1, nil)
	ctx := ctxT(t)
	m, kv := pb.NewMaintenanceClient(p.conn), pb.NewKVClient(p.conn)
	var rev int64
	for i := range 200 {
		resp, err := kv.Put(ctx, &pb.PutRequest{Key: []byte("k"), Value: fmt.Appendf(nil, "%032d", i)})
		require.NoError(t, err)
		rev = resp.Header.Revision
	}
	// The history reaches the file before the compaction removes it.
	_, err := p.log.State.Sync()
	require.NoError(t, err)
	_, err = kv.Compact(ctx, &pb.CompactionRequest{Revision: rev, Physical: true})
	require.NoError(t, err)
	before, err := m.Status(ctx, &pb.StatusRequest{})
	require.NoError(t, err)
	require.Greater(t, before.DbSize, before.DbSizeInUse, "the compaction freed the history")
	_, err = m.Defragment(ctx, &pb.DefragmentRequest{})
	require.NoError(t, err)
	after, err := m.Status(ctx, &pb.StatusRequest{})
	require.NoError(t, err)
	assert.Equal(t, after.DbSizeInUse, after.DbSize)
	assert.Less(t, after.DbSize, before.DbSize)
	got, err := kv.Range(ctx, &pb.RangeRequest{Key: []byte("k")})
	require.NoError(t, err)
	require.Len(t, got.Kvs, 1)
	assert.Equal(t, fmt.Sprintf("%032d", 199), string(got.Kvs[0].Value))
	assert.Equal(t, rev, got.Kvs[0].ModRevision)
	assert.Equal(t, int64(200), got.Kvs[0].Version)
}

// The version Status reports passes the check by which Kubernetes'
// apiserver enables RequestWatchProgress (k8s.io/apiserver
// pkg/storage/feature: not below 3.4.31, nor in 3.5.0 to 3.5.12).
func TestStatusVersion(t *testing.T) {
	p := startProcess(t, 1, 1, nil)
	st, err := pb.NewMaintenanceClient(p.conn).Status(ctxT(t), &pb.StatusRequest{})
	require.NoError(t, err)
	assert.Equal(t, Version, st.Version)
	var v [3]int
	n, err := fmt.Sscanf(st.Version, "%d.%d.%d", &v[0], &v[1], &v[2])
	require.NoError(t, err)
	require.Equal(t, 3, n)
	less := func(a, b [3]int) bool { return slices.Compare(a[:], b[:]) < 0 }
	assert.False(t, less(v, [3]int{3, 4, 31}), "below 3.4.31")
	assert.False(t, !less(v, [3]int{3, 5, 0}) && less(v, [3]int{3, 5, 13}), "within 3.5.0 to 3.5.12")
}
