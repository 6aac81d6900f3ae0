package kvstate

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// A read-only txn answered from the state (ReadTxn) answers what the same
// txn applied through the log answers: the same branch, ranges, header
// revision and stamps.
func TestReadTxnAnswersAsApplied(t *testing.T) {
	h := newHarness(t)
	h.put("a", "1")                                                       // rev 2
	h.put("b", "2")                                                       // rev 3
	h.put("a", "3")                                                       // rev 4
	h.ok(&Request{DeleteRange: &pb.DeleteRangeRequest{Key: []byte("b")}}) // rev 5
	h.put("c", "4")                                                       // rev 6
	h.ok(&Request{Compaction: &pb.CompactionRequest{Revision: 3}})
	for _, c := range []struct {
		name string
		txn  *pb.TxnRequest
	}{
		{"empty", &pb.TxnRequest{}},
		{"compares hold", &pb.TxnRequest{
			Compare: []*pb.Compare{cmp("a", "", pb.Compare_VALUE, pb.Compare_EQUAL, "3"), cmp("b", "", pb.Compare_VERSION, pb.Compare_EQUAL, 0)},
			Success: []*pb.RequestOp{rangeOp(&pb.RangeRequest{Key: []byte("b")}), rangeOp(&pb.RangeRequest{Key: []byte("a"), RangeEnd: []byte("d")})},
			Failure: []*pb.RequestOp{rangeOp(&pb.RangeRequest{Key: []byte("c")})}}},
		{"a compare fails", &pb.TxnRequest{
			Compare: []*pb.Compare{cmp("a", "d", pb.Compare_MOD, pb.Compare_GREATER, 4)},
			Success: []*pb.RequestOp{rangeOp(&pb.RangeRequest{Key: []byte("a")})},
			Failure: []*pb.RequestOp{rangeOp(&pb.RangeRequest{Key: []byte("c"), KeysOnly: true}),
				rangeOp(&pb.RangeRequest{Key: []byte("a"), RangeEnd: []byte("z"), Limit: 1, SortOrder: pb.RangeRequest_DESCEND, SortTarget: pb.RangeRequest_MOD})}}},
		{"a range at a past revision, and a count", &pb.TxnRequest{
			Success: []*pb.RequestOp{rangeOp(&pb.RangeRequest{Key: []byte("a"), Revision: 3}), rangeOp(&pb.RangeRequest{Key: []byte{0}, RangeEnd: []byte{0}, CountOnly: true})}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.True(t, ReadOnlyTxn(c.txn))
			rev := h.s.Rev()
			got, stamps, err := h.s.ReadTxn(context.Background(), c.txn)
			require.NoError(t, err)
			applied := h.ok(&Request{Txn: c.txn})
			assert.Equal(t, rev, h.s.Rev(), "a txn that only reads makes no revision")
			assert.Equal(t, applied.Txn, got)
			want := applied.Stamps
			if len(want) == 0 {
				want = nil
			}
			if len(stamps) == 0 {
				stamps = nil
			}
			assert.Equal(t, want, stamps)
			bare, err := h.s.ReadTxnUnstamped(context.Background(), c.txn)
			require.NoError(t, err)
			assert.Equal(t, got, bare, "the same answer without the stamps")
		})
	}
}

// ReadTxn refuses what it cannot answer as a read, and what the state
// cannot read, as Range does.
func TestReadTxnRefusals(t *testing.T) {
	h := newHarness(t)
	h.put("a", "1") // rev 2
	h.put("a", "2") // rev 3
	h.ok(&Request{Compaction: &pb.CompactionRequest{Revision: 3}})
	read := func(txn *pb.TxnRequest) error {
		_, _, err := h.s.ReadTxn(context.Background(), txn)
		_, bareErr := h.s.ReadTxnUnstamped(context.Background(), txn)
		assert.Equal(t, err, bareErr, "the same refusal without the stamps")
		return err
	}
	get := rangeOp(&pb.RangeRequest{Key: []byte("a")})
	assert.ErrorIs(t, read(&pb.TxnRequest{Success: []*pb.RequestOp{get}, Failure: []*pb.RequestOp{putOp("a", "x")}}), ErrInvalid,
		"a write in the branch not taken")
	assert.ErrorIs(t, read(&pb.TxnRequest{Success: []*pb.RequestOp{txnOp(&pb.TxnRequest{Success: []*pb.RequestOp{get}})}}), ErrInvalid,
		"a nested txn")
	assert.ErrorIs(t, read(&pb.TxnRequest{Success: []*pb.RequestOp{rangeOp(&pb.RangeRequest{})}}), ErrInvalid, "a range of no key")
	assert.ErrorIs(t, read(&pb.TxnRequest{Success: []*pb.RequestOp{rangeOp(&pb.RangeRequest{Key: []byte("a"), Revision: 2})}}), ErrCompacted)
	assert.ErrorIs(t, read(&pb.TxnRequest{Success: []*pb.RequestOp{rangeOp(&pb.RangeRequest{Key: []byte("a"), Revision: 9})}}), ErrFutureRev)
	h.ok(&Request{Alarm: &pb.AlarmRequest{Action: pb.AlarmRequest_ACTIVATE, MemberID: 1, Alarm: pb.AlarmType_CORRUPT}})
	assert.ErrorIs(t, read(&pb.TxnRequest{Success: []*pb.RequestOp{get}}), ErrCorrupt)
}

// Which txns are reads, and which serializable ones, as etcd decides.
func TestReadOnlyTxn(t *testing.T) {
	ser := rangeOp(&pb.RangeRequest{Key: []byte("a"), Serializable: true})
	lin := rangeOp(&pb.RangeRequest{Key: []byte("a")})
	for _, c := range []struct {
		name               string
		txn                *pb.TxnRequest
		readOnly, serialzd bool
	}{
		{"empty", &pb.TxnRequest{}, true, true},
		{"compares only", &pb.TxnRequest{Compare: []*pb.Compare{cmp("a", "", pb.Compare_VERSION, pb.Compare_EQUAL, 0)}}, true, true},
		{"serializable ranges", &pb.TxnRequest{Success: []*pb.RequestOp{ser}, Failure: []*pb.RequestOp{ser}}, true, true},
		{"one linearizable range", &pb.TxnRequest{Success: []*pb.RequestOp{ser}, Failure: []*pb.RequestOp{lin}}, true, false},
		{"a put", &pb.TxnRequest{Success: []*pb.RequestOp{ser}, Failure: []*pb.RequestOp{putOp("a", "1")}}, false, false},
		{"a delete", &pb.TxnRequest{Success: []*pb.RequestOp{delOp("a", "")}}, false, false},
		{"a nested txn", &pb.TxnRequest{Success: []*pb.RequestOp{txnOp(&pb.TxnRequest{})}}, false, false},
	} {
		assert.Equal(t, c.readOnly, ReadOnlyTxn(c.txn), "%s: read-only", c.name)
		assert.Equal(t, c.serialzd, SerializableTxn(c.txn), "%s: serializable", c.name)
	}
}
