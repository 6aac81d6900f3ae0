package etcdapi

import (
	"context"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/metadata"

	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/directory"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/kvservice"
	"github.com/edictlog/edictlog/edict"
)

// levelLog records the levels the KV service reads at.
type levelLog struct {
	kvservice.Log
	mu     sync.Mutex
	levels []edictlog.ReadLevel
}

func (l *levelLog) Read(ctx context.Context, level edictlog.ReadLevel, q []byte) (edictlog.ReadResult, error) {
	l.mu.Lock()
	l.levels = append(l.levels, level)
	l.mu.Unlock()
	return l.Log.Read(ctx, level, q)
}

func (l *levelLog) take() []edictlog.ReadLevel {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.levels
	l.levels = nil
	return out
}

// A linearizable Range asked of a follower, or a txn that only reads, is
// a follower read answered by the follower, from its own state, with its
// own header: never forwarded. With no leader known it is etcd's "no
// leader", and with WithRequireLeader that comes at once, before anything
// is read.
func TestReadsAtAFollower(t *testing.T) {
	var leaderLog, followerLog *levelLog
	leader := startProcessWith(t, 1, 1, nil, func(kc *kvservice.Config, _ *Config) {
		leaderLog = &levelLog{Log: kc.Log}
		kc.Log = leaderLog
	})
	// The follower's service reads the leader's state: replicated, as far
	// as the fake log goes, so that the answer shows what it read.
	follower := startProcessWith(t, 2, 1, map[edict.ProcessID]directory.Addresses{1: {GRPC: leader.addr}}, func(kc *kvservice.Config, _ *Config) {
		followerLog = &levelLog{Log: kc.Log}
		kc.Log, kc.State = followerLog, leader.log.State
	})
	kv, ctx := pb.NewKVClient(follower.conn), ctxT(t)
	forwarded := func(method string) float64 {
		return testutil.ToFloat64(follower.api.metrics.forwarded.WithLabelValues(method))
	}

	_, err := kv.Put(ctx, &pb.PutRequest{Key: []byte("a"), Value: []byte("1")})
	require.NoError(t, err)
	require.Equal(t, 1.0, forwarded("Put"), "a write goes to the leader")
	assert.Equal(t, []edict.ProcessID{2}, leader.log.Forwarders(), "which tells the follower of its commit at once")

	got, err := kv.Range(ctx, &pb.RangeRequest{Key: []byte("a")})
	require.NoError(t, err)
	require.Len(t, got.Kvs, 1)
	assert.Equal(t, "1", string(got.Kvs[0].Value))
	assert.Equal(t, int64(2), got.Header.Revision)
	assert.Equal(t, uint64(2), got.Header.MemberId, "the follower answers")
	assert.Equal(t, uint64(17), got.Header.RaftTerm)
	assert.NotZero(t, got.Header.ClusterId)
	assert.Equal(t, []edictlog.ReadLevel{edictlog.ReadFollower}, followerLog.take())
	assert.Empty(t, leaderLog.take(), "the leader read nothing")
	assert.Zero(t, forwarded("Range"), "not forwarded")

	ser, err := kv.Range(ctx, &pb.RangeRequest{Key: []byte("a"), Serializable: true})
	require.NoError(t, err)
	require.Len(t, ser.Kvs, 1)
	assert.Empty(t, followerLog.take(), "a serializable read reads the state, asking the log nothing, as etcd's")

	// A txn that only reads is a read too, as in etcd: linearizable
	// unless every range is serializable. One that writes goes to the
	// leader.
	get := func(serializable bool) *pb.RequestOp {
		return &pb.RequestOp{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: []byte("a"), Serializable: serializable}}}
	}
	txn, err := kv.Txn(ctx, &pb.TxnRequest{
		Compare: []*pb.Compare{{Key: []byte("a"), Target: pb.Compare_VALUE, Result: pb.Compare_EQUAL, TargetUnion: &pb.Compare_Value{Value: []byte("1")}}},
		Success: []*pb.RequestOp{get(true), get(false)}})
	require.NoError(t, err)
	require.True(t, txn.Succeeded)
	assert.Equal(t, "1", string(txn.Responses[1].GetResponseRange().Kvs[0].Value))
	assert.Equal(t, uint64(2), txn.Header.MemberId)
	assert.Equal(t, int64(2), txn.Header.Revision)
	assert.Equal(t, []edictlog.ReadLevel{edictlog.ReadFollower}, followerLog.take())
	_, err = kv.Txn(ctx, &pb.TxnRequest{Success: []*pb.RequestOp{get(true)}, Failure: []*pb.RequestOp{get(true)}})
	require.NoError(t, err)
	assert.Empty(t, followerLog.take(), "nor does a serializable txn")
	assert.Zero(t, forwarded("Txn"))
	_, err = kv.Txn(ctx, &pb.TxnRequest{Success: []*pb.RequestOp{get(false)},
		Failure: []*pb.RequestOp{{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("a")}}}}})
	require.NoError(t, err)
	assert.Equal(t, 1.0, forwarded("Txn"), "a txn that may write goes to the leader")
	assert.Empty(t, followerLog.take())
	assert.Empty(t, leaderLog.take(), "a txn that may write is a write: no read barrier")

	// A Range another process forwarded is answered here too: it needs
	// no leader here.
	fctx := metadata.AppendToOutgoingContext(ctx, "edictkv-forwarded-by", "3")
	_, err = kv.Range(fctx, &pb.RangeRequest{Key: []byte("a")})
	require.NoError(t, err)
	assert.Equal(t, []edictlog.ReadLevel{edictlog.ReadFollower}, followerLog.take())

	// At the leader, the same read is the log's follower level, which
	// the leader serves as a lease read.
	_, err = pb.NewKVClient(leader.conn).Range(ctx, &pb.RangeRequest{Key: []byte("a")})
	require.NoError(t, err)
	assert.Equal(t, []edictlog.ReadLevel{edictlog.ReadFollower}, leaderLog.take())

	// No leader known: the log refuses the read, and the router gives up.
	follower.router.leader = edict.None
	follower.log.Follow(edict.None)
	_, err = kv.Range(ctx, &pb.RangeRequest{Key: []byte("a")})
	assert.Equal(t, rpctypes.ErrNoLeader, rpctypes.Error(err))
	assert.Equal(t, []edictlog.ReadLevel{edictlog.ReadFollower}, followerLog.take())

	// WithRequireLeader: refused before the call is served, as etcd's
	// interceptor refuses it.
	follower.node.mu.Lock()
	follower.node.st.Leader = edict.None
	follower.node.mu.Unlock()
	rctx := metadata.AppendToOutgoingContext(ctx, rpctypes.MetadataRequireLeaderKey, rpctypes.MetadataHasLeader)
	_, err = kv.Range(rctx, &pb.RangeRequest{Key: []byte("a"), Serializable: true})
	assert.Equal(t, rpctypes.ErrNoLeader, rpctypes.Error(err))
	assert.Empty(t, followerLog.take(), "nothing read")
	got, err = kv.Range(ctx, &pb.RangeRequest{Key: []byte("a"), Serializable: true})
	require.NoError(t, err, "without it, a serializable read needs no leader")
	assert.Len(t, got.Kvs, 1)
}
