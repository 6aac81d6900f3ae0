package kvstate

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

func cmp(key, end string, target pb.Compare_CompareTarget, result pb.Compare_CompareResult, v any) *pb.Compare {
	c := &pb.Compare{Key: []byte(key), Target: target, Result: result}
	if end != "" {
		c.RangeEnd = []byte(end)
	}
	switch target {
	case pb.Compare_VALUE:
		c.TargetUnion = &pb.Compare_Value{Value: []byte(v.(string))}
	case pb.Compare_VERSION:
		c.TargetUnion = &pb.Compare_Version{Version: int64(v.(int))}
	case pb.Compare_CREATE:
		c.TargetUnion = &pb.Compare_CreateRevision{CreateRevision: int64(v.(int))}
	case pb.Compare_MOD:
		c.TargetUnion = &pb.Compare_ModRevision{ModRevision: int64(v.(int))}
	case pb.Compare_LEASE:
		c.TargetUnion = &pb.Compare_Lease{Lease: int64(v.(int))}
	}
	return c
}

// TestCompares checks each compare target and result, on a key, on a
// range and on keys that do not exist, against etcd's rules.
func TestCompares(t *testing.T) {
	h := newHarness(t)
	h.put("a", "1")                                                                     // rev 2
	h.put("b", "2")                                                                     // rev 3
	h.ok(&Request{Put: &pb.PutRequest{Key: []byte("b"), Value: []byte("3"), Lease: 5}}) // rev 4, version 2
	E, N, G, L := pb.Compare_EQUAL, pb.Compare_NOT_EQUAL, pb.Compare_GREATER, pb.Compare_LESS
	cases := []struct {
		c    *pb.Compare
		want bool
	}{
		{cmp("a", "", pb.Compare_VALUE, E, "1"), true},
		{cmp("a", "", pb.Compare_VALUE, N, "1"), false},
		{cmp("a", "", pb.Compare_VALUE, G, "0"), true},
		{cmp("a", "", pb.Compare_VALUE, L, "0"), false},
		{cmp("x", "", pb.Compare_VALUE, N, "1"), false}, // a VALUE compare on no key fails
		{cmp("x", "", pb.Compare_VALUE, E, ""), false},
		{cmp("b", "", pb.Compare_VERSION, E, 2), true},
		{cmp("x", "", pb.Compare_VERSION, E, 0), true}, // a missing key compares as zero
		{cmp("x", "", pb.Compare_CREATE, E, 0), true},
		{cmp("b", "", pb.Compare_CREATE, E, 3), true},
		{cmp("b", "", pb.Compare_MOD, G, 3), true},
		{cmp("b", "", pb.Compare_MOD, L, 4), false},
		{cmp("b", "", pb.Compare_LEASE, E, 5), true},
		{cmp("a", "", pb.Compare_LEASE, E, 0), true},
		// Over a range: every key must satisfy the compare.
		{cmp("a", "c", pb.Compare_VERSION, G, 0), true},
		{cmp("a", "c", pb.Compare_VERSION, E, 1), false},
		{cmp("a", "c", pb.Compare_MOD, L, 5), true},
		{cmp("a", "\x00", pb.Compare_CREATE, G, 1), true},
		{cmp("c", "z", pb.Compare_VERSION, E, 0), true}, // an empty range compares a zero pair
		{cmp("c", "z", pb.Compare_VALUE, E, ""), false},
	}
	for i, c := range cases {
		res := h.ok(&Request{Txn: &pb.TxnRequest{Compare: []*pb.Compare{c.c}}})
		assert.Equal(t, c.want, res.Txn.Succeeded, "case %d: %v", i, c.c)
		assert.Equal(t, int64(4), res.Rev, "a txn of compares makes no revision")
		assert.Equal(t, int64(4), res.Txn.Header.Revision)
	}
	// All compares must hold.
	res := h.ok(&Request{Txn: &pb.TxnRequest{Compare: []*pb.Compare{cases[0].c, cases[1].c}}})
	assert.False(t, res.Txn.Succeeded)
}

func TestTxn(t *testing.T) {
	h := newHarness(t)
	h.put("a", "1") // rev 2
	res := h.ok(&Request{Txn: &pb.TxnRequest{
		Compare: []*pb.Compare{cmp("a", "", pb.Compare_VALUE, pb.Compare_EQUAL, "1")},
		Success: []*pb.RequestOp{
			putOp("b", "x"),
			rangeOp(&pb.RangeRequest{Key: []byte("a"), RangeEnd: []byte("c")}),
			delOp("a", ""),
			rangeOp(&pb.RangeRequest{Key: []byte("a"), RangeEnd: []byte("c"), Revision: 2}),
			txnOp(&pb.TxnRequest{
				Compare: []*pb.Compare{cmp("b", "", pb.Compare_VERSION, pb.Compare_EQUAL, 0)},
				Success: []*pb.RequestOp{putOp("never", "x")},
				Failure: []*pb.RequestOp{putOp("c", "y"), rangeOp(&pb.RangeRequest{Key: []byte("c")})},
			}),
		},
		Failure: []*pb.RequestOp{putOp("z", "z")},
	}})
	require.True(t, res.Txn.Succeeded)
	assert.Equal(t, int64(3), res.Rev, "one revision for the whole txn")
	assert.Equal(t, int64(3), res.Txn.Header.Revision)
	rs := res.Txn.Responses
	require.Len(t, rs, 5)
	assert.Equal(t, int64(3), rs[0].GetResponsePut().Header.Revision)
	r1 := rs[1].GetResponseRange()
	require.Len(t, r1.Kvs, 2, "a range sees the txn's earlier put")
	assert.Equal(t, "b", string(r1.Kvs[1].Key))
	assert.Equal(t, int64(3), r1.Header.Revision)
	assert.Equal(t, int64(1), rs[2].GetResponseDeleteRange().Deleted)
	r3 := rs[3].GetResponseRange()
	require.Len(t, r3.Kvs, 1, "a range at a past revision inside a txn")
	assert.Equal(t, "a", string(r3.Kvs[0].Key))
	nested := rs[4].GetResponseTxn()
	require.NotNil(t, nested)
	assert.True(t, nested.Succeeded, "every compare on the path is evaluated before the txn writes: b did not exist")
	require.Len(t, nested.Responses, 1)
	assert.Zero(t, nested.Header.Revision, "etcd leaves a nested txn's header empty")
	all := h.all()
	var ks []string
	for _, kv := range all.Kvs {
		ks = append(ks, string(kv.Key))
		assert.Equal(t, int64(3), kv.ModRevision)
	}
	assert.Equal(t, []string{"b", "never"}, ks)
}

func TestTxnRefusals(t *testing.T) {
	h := newHarness(t)
	h.put("a", "1")
	for _, c := range []struct {
		name string
		t    *pb.TxnRequest
		err  error
	}{
		{"a range at a future revision", &pb.TxnRequest{Success: []*pb.RequestOp{putOp("b", "1"), rangeOp(&pb.RangeRequest{Key: []byte("a"), Revision: 3})}}, ErrFutureRev},
		{"ignore_value of a missing key", &pb.TxnRequest{Success: []*pb.RequestOp{putOp("b", "1"),
			{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("m"), IgnoreValue: true}}}}}, ErrKeyNotFound},
		{"in a nested txn", &pb.TxnRequest{Success: []*pb.RequestOp{putOp("b", "1"), txnOp(&pb.TxnRequest{Success: []*pb.RequestOp{
			{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("m"), IgnoreLease: true}}}}})}}, ErrKeyNotFound},
		{"a key put twice", &pb.TxnRequest{Success: []*pb.RequestOp{putOp("b", "1"), putOp("b", "2")}}, ErrDuplicateKey},
		{"a key put and deleted", &pb.TxnRequest{Success: []*pb.RequestOp{putOp("b", "1"), delOp("a", "c")}}, ErrDuplicateKey},
		{"a key put in a nested txn and deleted", &pb.TxnRequest{Success: []*pb.RequestOp{delOp("a", "\x00"), txnOp(&pb.TxnRequest{Failure: []*pb.RequestOp{putOp("q", "1")}})}}, ErrDuplicateKey},
		{"put twice on one path through nested txns", &pb.TxnRequest{Success: []*pb.RequestOp{putOp("b", "1"), txnOp(&pb.TxnRequest{Success: []*pb.RequestOp{putOp("b", "1")}})}}, ErrDuplicateKey},
		{"an empty op", &pb.TxnRequest{Success: []*pb.RequestOp{{}}}, ErrInvalid},
		{"a compare of no key", &pb.TxnRequest{Compare: []*pb.Compare{{}}}, ErrInvalid},
	} {
		res := h.apply(&Request{Txn: c.t})
		assert.ErrorIs(t, res.Err, c.err, c.name)
		assert.Nil(t, res.Txn)
		assert.Equal(t, int64(2), h.s.Rev(), "%s: nothing changed", c.name)
	}
	// The same key in both branches of a nested txn is fine.
	res := h.ok(&Request{Txn: &pb.TxnRequest{Success: []*pb.RequestOp{txnOp(&pb.TxnRequest{
		Success: []*pb.RequestOp{putOp("b", "1")}, Failure: []*pb.RequestOp{putOp("b", "2")}})}}})
	assert.Equal(t, int64(3), res.Rev)
	// A read-only txn with a range at a compacted revision is refused too.
	h.ok(&Request{Compaction: &pb.CompactionRequest{Revision: 3}})
	res = h.apply(&Request{Txn: &pb.TxnRequest{Success: []*pb.RequestOp{rangeOp(&pb.RangeRequest{Key: []byte("a"), Revision: 2})}}})
	assert.ErrorIs(t, res.Err, ErrCompacted)
}
