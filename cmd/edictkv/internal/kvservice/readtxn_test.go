package kvservice_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/fakelog"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/kvservice"
	"github.com/edictlog/edictlog/edict"
)

func rangeOp(key string, serializable bool) *pb.RequestOp {
	return &pb.RequestOp{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: []byte(key), Serializable: serializable}}}
}

// A txn that only reads is answered at the level asked, as a Range, with
// no log entry: its compares and ranges at the state's revision, the
// stamps of what it names, and how it was served. At a follower a
// follower read, and with no leader known, the log's refusal.
func TestReadTxn(t *testing.T) {
	s, fl, _ := newService(t, kvservice.Limits{MaxTxnOps: 2})
	ctx := context.Background()
	put(t, s, "a", "1") // entry 1, revision 2
	put(t, s, "b", "2") // entry 2, revision 3
	applied := len(fl.Applied())

	txn := &pb.TxnRequest{
		Compare: []*pb.Compare{{Key: []byte("a"), Target: pb.Compare_VALUE, Result: pb.Compare_EQUAL, TargetUnion: &pb.Compare_Value{Value: []byte("1")}}},
		Success: []*pb.RequestOp{rangeOp("a", false), rangeOp("b", false)},
		Failure: []*pb.RequestOp{rangeOp("missing", false)}}
	require.True(t, kvservice.ReadOnlyTxn(txn))
	require.False(t, kvservice.SerializableTxn(txn))
	resp, info, err := s.ReadTxn(ctx, edictlog.ReadFollower, txn)
	require.NoError(t, err)
	assert.True(t, resp.Succeeded)
	assert.Equal(t, int64(3), resp.Header.Revision)
	require.Len(t, resp.Responses, 2)
	assert.Equal(t, "2", string(resp.Responses[1].GetResponseRange().Kvs[0].Value))
	assert.Equal(t, edictlog.ReadLease, info.Level, "a follower read at the leader is a lease read")
	assert.Equal(t, fakelog.StampAt(1), info.Stamp(2))
	assert.Equal(t, fakelog.StampAt(2), info.Stamp(3))
	bare, err := s.ReadTxnUnstamped(ctx, edictlog.ReadFollower, txn)
	require.NoError(t, err)
	assert.Equal(t, resp, bare, "the etcd API's read answers the same")
	assert.Len(t, fl.Applied(), applied, "nothing went through the log")

	fl.Follow(2)
	fl.SetStaleness(40 * time.Millisecond)
	_, info, err = s.ReadTxn(ctx, edictlog.ReadFollower, txn)
	require.NoError(t, err)
	assert.Equal(t, edictlog.ReadFollower, info.Level)
	_, info, err = s.ReadTxn(ctx, edictlog.ReadStale, &pb.TxnRequest{Success: []*pb.RequestOp{rangeOp("a", true)}})
	require.NoError(t, err)
	assert.Equal(t, edictlog.ReadStale, info.Level)
	assert.Equal(t, 40*time.Millisecond, info.Staleness)
	fl.Follow(edict.None)
	_, _, err = s.ReadTxn(ctx, edictlog.ReadFollower, txn)
	var nle *edictlog.NotLeaderError
	require.ErrorAs(t, err, &nle, "no leader known: the router looks again")
	fl.Follow(1)

	for _, c := range []struct {
		name string
		txn  *pb.TxnRequest
		want error
	}{
		{"a txn that writes", &pb.TxnRequest{Success: []*pb.RequestOp{rangeOp("a", false)},
			Failure: []*pb.RequestOp{{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("a")}}}}}, kvservice.ErrInvalid},
		{"too many ops", &pb.TxnRequest{Success: []*pb.RequestOp{rangeOp("a", false), rangeOp("a", false), rangeOp("a", false)}}, kvservice.ErrTooManyOps},
		{"a range of no key", &pb.TxnRequest{Success: []*pb.RequestOp{rangeOp("", false)}}, kvservice.ErrEmptyKey},
		{"a future revision", &pb.TxnRequest{Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestRange{
			RequestRange: &pb.RangeRequest{Key: []byte("a"), Revision: 9}}}}}, kvservice.ErrFutureRev},
	} {
		_, _, err := s.ReadTxn(ctx, edictlog.ReadFollower, c.txn)
		assert.ErrorIs(t, err, c.want, c.name)
		_, err = s.ReadTxnUnstamped(ctx, edictlog.ReadFollower, c.txn)
		assert.ErrorIs(t, err, c.want, c.name+", unstamped")
	}
	assert.Len(t, fl.Applied(), applied, "nothing went through the log")
}
