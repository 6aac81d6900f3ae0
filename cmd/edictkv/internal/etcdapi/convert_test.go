package etcdapi

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/edictlog/edictlog/fsm/kvfsm"
)

var testLimits = limits{maxKey: 16, maxValue: 32, maxTxnOps: 3}

func kv(key string, create, mod, version uint64, value string) kvfsm.KeyValue {
	return kvfsm.KeyValue{Key: key, Value: value, CreateRevision: create, ModRevision: mod, Version: version}
}

func names(kvs []kvfsm.KeyValue) []string {
	var out []string
	for _, kv := range kvs {
		out = append(out, kv.Key)
	}
	return out
}

// Sorting, revision filters and limits follow etcd's order: filter, sort,
// then cut; count stays the whole range's.
func TestRangePostProcessing(t *testing.T) {
	rr := &kvfsm.RangeResult{Count: 4, KVs: []kvfsm.KeyValue{
		kv("a", 5, 9, 3, "z"), kv("b", 2, 2, 1, "y"), kv("c", 7, 7, 1, "x"), kv("d", 1, 8, 4, "w"),
	}}
	for _, c := range []struct {
		name string
		req  pb.RangeRequest
		want []string
		more bool
	}{
		{"key ascend is the state machine's order", pb.RangeRequest{SortOrder: pb.RangeRequest_ASCEND}, []string{"a", "b", "c", "d"}, false},
		{"key descend", pb.RangeRequest{SortOrder: pb.RangeRequest_DESCEND, Limit: 2}, []string{"d", "c"}, true},
		{"another target defaults to ascend", pb.RangeRequest{SortTarget: pb.RangeRequest_MOD}, []string{"b", "c", "d", "a"}, false},
		{"by value descend", pb.RangeRequest{SortTarget: pb.RangeRequest_VALUE, SortOrder: pb.RangeRequest_DESCEND}, []string{"a", "b", "c", "d"}, false},
		{"by version, ties keep key order", pb.RangeRequest{SortTarget: pb.RangeRequest_VERSION}, []string{"b", "c", "a", "d"}, false},
		{"by create", pb.RangeRequest{SortTarget: pb.RangeRequest_CREATE, Limit: 3}, []string{"d", "b", "a"}, true},
		{"min mod", pb.RangeRequest{MinModRevision: 8}, []string{"a", "d"}, false},
		{"max create then limit", pb.RangeRequest{MaxCreateRevision: 5, Limit: 2}, []string{"a", "b"}, true},
		{"min create and max mod", pb.RangeRequest{MinCreateRevision: 2, MaxModRevision: 8}, []string{"b", "c"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.req.Key = []byte("a")
			c.req.RangeEnd = []byte("z")
			q, post, err := testLimits.rangeOf(&c.req)
			require.NoError(t, err)
			if post.needed() {
				assert.Zero(t, q.Limit, "post-processing needs the whole range")
			}
			in := *rr
			if !post.needed() && c.req.Limit > 0 {
				in.KVs, in.More = in.KVs[:c.req.Limit], true // what the state machine would do
			}
			kvs, more := post.apply(&in)
			assert.Equal(t, c.want, names(kvs))
			assert.Equal(t, c.more, more)
			resp := rangeResponse(&pb.ResponseHeader{}, &in, post)
			assert.Equal(t, int64(4), resp.Count)
		})
	}
	// The result the state machine shares is not reordered in place.
	assert.Equal(t, []string{"a", "b", "c", "d"}, names(rr.KVs))
}

func code(err error) codes.Code { return status.Code(err) }

// Requests are checked before anything reaches the log; each refusal
// names what was wrong, with etcd's error where etcd has one.
func TestRequestChecks(t *testing.T) {
	big := make([]byte, 17)
	for i := range big {
		big[i] = 'k'
	}
	_, _, err := testLimits.rangeOf(&pb.RangeRequest{})
	assert.Equal(t, rpctypes.ErrGRPCEmptyKey, err)
	_, _, err = testLimits.rangeOf(&pb.RangeRequest{Key: big})
	assert.Equal(t, codes.InvalidArgument, code(err))
	assert.Contains(t, err.Error(), "17 bytes")
	_, _, err = testLimits.rangeOf(&pb.RangeRequest{Key: []byte("a"), Limit: -1})
	assert.Contains(t, err.Error(), "negative limit")
	_, _, err = testLimits.rangeOf(&pb.RangeRequest{Key: []byte("a"), SortOrder: 9})
	assert.Contains(t, err.Error(), "sort order")
	_, _, err = testLimits.rangeOf(&pb.RangeRequest{Key: []byte(kvfsm.SystemPrefix + "x")})
	assert.Contains(t, err.Error(), "keeps for itself")

	_, err = testLimits.putOf(&pb.PutRequest{Key: []byte("a"), Value: make([]byte, 33)})
	assert.Contains(t, err.Error(), "value of 33 bytes")
	_, err = testLimits.putOf(&pb.PutRequest{Key: []byte("a"), Lease: 5})
	assert.Equal(t, codes.Unimplemented, code(err))
	_, err = testLimits.putOf(&pb.PutRequest{Key: []byte("a"), IgnoreValue: true})
	assert.Equal(t, codes.Unimplemented, code(err))
	p, err := testLimits.putOf(&pb.PutRequest{Key: []byte("a"), Value: []byte("v"), PrevKv: true})
	require.NoError(t, err)
	assert.Equal(t, kvfsm.Put{Key: "a", Value: "v", PrevKV: true}, *p)

	put := func(k string) *pb.RequestOp {
		return &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte(k)}}}
	}
	_, _, err = testLimits.txnOf(&pb.TxnRequest{Success: []*pb.RequestOp{put("a"), put("b"), put("c"), put("d")}})
	assert.Equal(t, rpctypes.ErrGRPCTooManyOps, err)
	_, _, err = testLimits.txnOf(&pb.TxnRequest{Failure: []*pb.RequestOp{put("a"), put("a")}})
	assert.Equal(t, rpctypes.ErrGRPCDuplicateKey, err)
	_, _, err = testLimits.txnOf(&pb.TxnRequest{Success: []*pb.RequestOp{{}}})
	assert.Contains(t, err.Error(), "op 0: etcdserver: empty request op")
	_, _, err = testLimits.txnOf(&pb.TxnRequest{Success: []*pb.RequestOp{put("a"), {Request: &pb.RequestOp_RequestTxn{RequestTxn: &pb.TxnRequest{}}}}})
	assert.Equal(t, codes.Unimplemented, code(err))
	assert.Contains(t, err.Error(), "op 1")
	_, _, err = testLimits.txnOf(&pb.TxnRequest{Compare: []*pb.Compare{{Key: []byte("a"), Target: pb.Compare_LEASE}}})
	assert.Equal(t, codes.Unimplemented, code(err))
	_, _, err = testLimits.txnOf(&pb.TxnRequest{Compare: []*pb.Compare{{Key: []byte("a"), Target: pb.Compare_MOD,
		TargetUnion: &pb.Compare_ModRevision{ModRevision: -1}}}})
	assert.Contains(t, err.Error(), "negative operand")
	_, _, err = testLimits.txnOf(&pb.TxnRequest{Compare: []*pb.Compare{{Key: []byte("a"), RangeEnd: []byte("b")}}})
	assert.Equal(t, codes.Unimplemented, code(err))

	txn, post, err := testLimits.txnOf(&pb.TxnRequest{
		Compare: []*pb.Compare{{Key: []byte("a"), Target: pb.Compare_VERSION, Result: pb.Compare_GREATER,
			TargetUnion: &pb.Compare_Version{Version: 2}}},
		Success: []*pb.RequestOp{put("a"), {Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{
			Key: []byte("a"), RangeEnd: []byte("b"), SortOrder: pb.RangeRequest_DESCEND, Limit: 1}}}},
	})
	require.NoError(t, err)
	assert.Equal(t, []kvfsm.Compare{{Key: "a", Target: kvfsm.TargetVersion, Op: kvfsm.Greater, Number: 2}}, txn.Compares)
	require.Len(t, txn.Success, 2)
	assert.Zero(t, txn.Success[1].Range.Limit, "the sort needs the whole range")
	assert.True(t, post.success[1].needed())
	assert.Empty(t, post.failure)
}

// FuzzTxnRequest: whatever a client sends, the conversion either refuses
// it with a gRPC status or yields a command the state machine accepts.
func FuzzTxnRequest(f *testing.F) {
	seed := &pb.TxnRequest{
		Compare: []*pb.Compare{{Key: []byte("a"), Target: pb.Compare_VALUE, TargetUnion: &pb.Compare_Value{Value: []byte("x")}}},
		Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("a"), Value: []byte("y")}}}},
		Failure: []*pb.RequestOp{{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: []byte("a"), SortTarget: pb.RangeRequest_VALUE}}}},
	}
	b, err := seed.Marshal()
	require.NoError(f, err)
	f.Add(b)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		var r pb.TxnRequest
		if r.Unmarshal(b) != nil {
			return
		}
		txn, post, err := testLimits.txnOf(&r)
		if err != nil {
			if _, ok := status.FromError(err); !ok {
				t.Fatalf("refusal %v is not a gRPC status", err)
			}
			return
		}
		if len(post.success) != len(txn.Success) || len(post.failure) != len(txn.Failure) {
			t.Fatalf("post-processing for %d/%d ops of %d/%d", len(post.success), len(post.failure), len(txn.Success), len(txn.Failure))
		}
		if _, err := kvfsm.EncodeCommand(kvfsm.Command{Txn: txn}); err != nil {
			t.Fatalf("accepted request does not encode: %v", err)
		}
	})
}
