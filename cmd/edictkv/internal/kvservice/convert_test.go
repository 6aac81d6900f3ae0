package kvservice

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/edictlog/edictlog/fsm/kvfsm"
)

var testLimits = Limits{MaxKeyBytes: 16, MaxValueBytes: 32, MaxTxnOps: 3, MaxRequestBytes: 1 << 10}

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
			var a answer
			resp := a.rangeResponse(&pb.ResponseHeader{}, &in, post)
			assert.Equal(t, int64(4), resp.Count)
		})
	}
	// The result the state machine shares is not reordered in place.
	assert.Equal(t, []string{"a", "b", "c", "d"}, names(rr.KVs))
}

// Requests are checked before anything reaches the log; each refusal
// wraps the error of the taxonomy that says what was wrong, and names it.
func TestRequestChecks(t *testing.T) {
	big := []byte(strings.Repeat("k", 17))
	put := func(k string) *pb.RequestOp {
		return &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte(k)}}}
	}
	for _, c := range []struct {
		name string
		err  func() error
		want error
		says string
	}{
		{"range without a key", func() error { _, _, err := testLimits.rangeOf(&pb.RangeRequest{}); return err }, ErrEmptyKey, "key"},
		{"oversized key", func() error { _, _, err := testLimits.rangeOf(&pb.RangeRequest{Key: big}); return err }, ErrKeyTooLarge, "key of 17 bytes exceeds the limit of 16"},
		{"oversized range end", func() error {
			_, _, err := testLimits.rangeOf(&pb.RangeRequest{Key: []byte("a"), RangeEnd: big})
			return err
		}, ErrKeyTooLarge, "range_end of 17 bytes"},
		{"negative limit", func() error {
			_, _, err := testLimits.rangeOf(&pb.RangeRequest{Key: []byte("a"), Limit: -1})
			return err
		}, ErrInvalid, "negative limit"},
		{"negative revision", func() error {
			_, _, err := testLimits.rangeOf(&pb.RangeRequest{Key: []byte("a"), Revision: -2})
			return err
		}, ErrInvalid, "negative revision -2"},
		{"unknown sort order", func() error {
			_, _, err := testLimits.rangeOf(&pb.RangeRequest{Key: []byte("a"), SortOrder: 9})
			return err
		}, ErrInvalid, "sort order"},
		{"unknown sort target", func() error {
			_, _, err := testLimits.rangeOf(&pb.RangeRequest{Key: []byte("a"), SortTarget: 9})
			return err
		}, ErrInvalid, "sort target"},
		{"edictkv's own key", func() error {
			_, _, err := testLimits.rangeOf(&pb.RangeRequest{Key: []byte(kvfsm.SystemPrefix + "x")})
			return err
		}, ErrInvalid, "keeps for itself"},
		{"oversized value", func() error {
			_, err := testLimits.putOf(&pb.PutRequest{Key: []byte("a"), Value: make([]byte, 33)})
			return err
		}, ErrValueTooLarge, "value of 33 bytes"},
		{"put with a lease", func() error { _, err := testLimits.putOf(&pb.PutRequest{Key: []byte("a"), Lease: 5}); return err }, ErrUnsupported, "lease 5"},
		{"put with ignore_value", func() error {
			_, err := testLimits.putOf(&pb.PutRequest{Key: []byte("a"), IgnoreValue: true})
			return err
		}, ErrUnsupported, "ignore_value"},
		{"put with ignore_lease", func() error {
			_, err := testLimits.putOf(&pb.PutRequest{Key: []byte("a"), IgnoreLease: true})
			return err
		}, ErrUnsupported, "ignore_lease"},
		{"put without a key", func() error { _, err := testLimits.putOf(&pb.PutRequest{}); return err }, ErrEmptyKey, "key"},
		{"delete without a key", func() error { _, err := testLimits.deleteOf(&pb.DeleteRangeRequest{}); return err }, ErrEmptyKey, "key"},
		{"too many ops", func() error {
			_, _, err := testLimits.txnOf(&pb.TxnRequest{Success: []*pb.RequestOp{put("a"), put("b"), put("c"), put("d")}})
			return err
		}, ErrTooManyOps, "4 operations"},
		{"too many compares", func() error {
			cmp := &pb.Compare{Key: []byte("a")}
			_, _, err := testLimits.txnOf(&pb.TxnRequest{Compare: []*pb.Compare{cmp, cmp, cmp, cmp}})
			return err
		}, ErrTooManyOps, "4 operations"},
		{"duplicate key", func() error {
			_, _, err := testLimits.txnOf(&pb.TxnRequest{Failure: []*pb.RequestOp{put("a"), put("a")}})
			return err
		}, ErrDuplicateKey, "written twice"},
		{"empty op", func() error { _, _, err := testLimits.txnOf(&pb.TxnRequest{Success: []*pb.RequestOp{{}}}); return err }, ErrInvalid, "success: op 0: invalid request: empty request op"},
		{"nested txn", func() error {
			_, _, err := testLimits.txnOf(&pb.TxnRequest{Success: []*pb.RequestOp{put("a"), {Request: &pb.RequestOp_RequestTxn{RequestTxn: &pb.TxnRequest{}}}}})
			return err
		}, ErrUnsupported, "op 1"},
		{"range at a revision in a txn", func() error {
			_, _, err := testLimits.txnOf(&pb.TxnRequest{Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: []byte("a"), Revision: 3}}}}})
			return err
		}, ErrUnsupported, "past revision"},
		{"lease compare", func() error {
			_, _, err := testLimits.txnOf(&pb.TxnRequest{Compare: []*pb.Compare{{Key: []byte("a"), Target: pb.Compare_LEASE}}})
			return err
		}, ErrUnsupported, "compare 0"},
		{"negative compare operand", func() error {
			_, _, err := testLimits.txnOf(&pb.TxnRequest{Compare: []*pb.Compare{{Key: []byte("a"), Target: pb.Compare_MOD,
				TargetUnion: &pb.Compare_ModRevision{ModRevision: -1}}}})
			return err
		}, ErrInvalid, "negative operand"},
		{"compare over a range", func() error {
			_, _, err := testLimits.txnOf(&pb.TxnRequest{Compare: []*pb.Compare{{Key: []byte("a"), RangeEnd: []byte("b")}}})
			return err
		}, ErrUnsupported, "range_end"},
		{"compare without a key", func() error {
			_, _, err := testLimits.txnOf(&pb.TxnRequest{Compare: []*pb.Compare{{}}})
			return err
		}, ErrEmptyKey, "compare 0: compare key"},
		{"unknown compare result", func() error {
			_, _, err := testLimits.txnOf(&pb.TxnRequest{Compare: []*pb.Compare{{Key: []byte("a"), Result: 7}}})
			return err
		}, ErrInvalid, "compare result 7"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.err()
			require.ErrorIs(t, err, c.want)
			assert.Contains(t, err.Error(), c.says)
		})
	}

	p, err := testLimits.putOf(&pb.PutRequest{Key: []byte("a"), Value: []byte("v"), PrevKv: true})
	require.NoError(t, err)
	assert.Equal(t, kvfsm.Put{Key: "a", Value: "v", PrevKV: true}, *p)
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

// taxonomy are the package's sentinels: every refusal wraps one.
var taxonomy = []error{ErrEmptyKey, ErrKeyTooLarge, ErrValueTooLarge, ErrRequestTooLarge, ErrTooManyOps,
	ErrDuplicateKey, ErrInvalid, ErrUnsupported}

// FuzzTxnRequest: whatever a client sends, the conversion either refuses
// it with an error of the taxonomy or yields a command the state machine
// accepts.
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
			if !slices.ContainsFunc(taxonomy, func(e error) bool { return errors.Is(err, e) }) {
				t.Fatalf("refusal %v wraps no error of the taxonomy", err)
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
