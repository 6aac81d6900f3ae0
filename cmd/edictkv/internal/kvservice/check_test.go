package kvservice

import (
	"errors"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/edictlog/edictlog/cmd/edictkv/internal/kvstate"
)

var testLimits = Limits{MaxKeyBytes: 16, MaxValueBytes: 32, MaxTxnOps: 3}.withDefaults()

func put(k string) *pb.RequestOp {
	return &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte(k)}}}
}

func nested(t *pb.TxnRequest) *pb.RequestOp {
	return &pb.RequestOp{Request: &pb.RequestOp_RequestTxn{RequestTxn: t}}
}

// TestChecks: each refusal before the log, with the sentinel it wraps and
// what it says.
func TestChecks(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want error
		says string
	}{
		{"range without a key", testLimits.checkRange(&pb.RangeRequest{}), ErrEmptyKey, "key"},
		{"oversized key", testLimits.checkRange(&pb.RangeRequest{Key: make([]byte, 17)}), ErrKeyTooLarge, "key of 17 bytes"},
		{"oversized range end", testLimits.checkRange(&pb.RangeRequest{Key: []byte("a"), RangeEnd: make([]byte, 17)}), ErrKeyTooLarge, "range_end"},
		{"negative limit", testLimits.checkRange(&pb.RangeRequest{Key: []byte("a"), Limit: -1}), ErrInvalid, "negative limit"},
		{"negative revision", testLimits.checkRange(&pb.RangeRequest{Key: []byte("a"), Revision: -2}), ErrInvalid, "negative revision -2"},
		{"unknown sort order", testLimits.checkRange(&pb.RangeRequest{Key: []byte("a"), SortOrder: 9}), ErrInvalid, "sort order"},
		{"unknown sort target", testLimits.checkRange(&pb.RangeRequest{Key: []byte("a"), SortTarget: 9}), ErrInvalid, "sort target"},
		{"oversized value", testLimits.checkPut(&pb.PutRequest{Key: []byte("a"), Value: make([]byte, 33)}), ErrValueTooLarge, "value of 33 bytes"},
		{"put with a lease", testLimits.checkPut(&pb.PutRequest{Key: []byte("a"), Lease: 5}), ErrUnsupported, "lease 5"},
		{"value with ignore_value", testLimits.checkPut(&pb.PutRequest{Key: []byte("a"), Value: []byte("v"), IgnoreValue: true}), ErrInvalid, "value is provided"},
		{"put without a key", testLimits.checkPut(&pb.PutRequest{}), ErrEmptyKey, "key"},
		{"delete without a key", testLimits.checkDelete(&pb.DeleteRangeRequest{}), ErrEmptyKey, "key"},
		{"too many ops", testLimits.checkTxn(&pb.TxnRequest{Success: []*pb.RequestOp{put("a"), put("b"), put("c"), put("d")}}), ErrTooManyOps, "4 operations"},
		{"too many compares", testLimits.checkTxn(&pb.TxnRequest{Compare: []*pb.Compare{{Key: []byte("a")}, {Key: []byte("a")}, {Key: []byte("a")}, {Key: []byte("a")}}}),
			ErrTooManyOps, "4 operations"},
		{"a nested txn shares the budget", testLimits.checkTxn(&pb.TxnRequest{Success: []*pb.RequestOp{put("a"), nested(&pb.TxnRequest{Success: []*pb.RequestOp{put("b"), put("c")}})}}),
			ErrTooManyOps, "over the limit of 1"},
		{"duplicate key", testLimits.checkTxn(&pb.TxnRequest{Failure: []*pb.RequestOp{put("a"), put("a")}}), ErrDuplicateKey, "duplicate key"},
		{"duplicate key through a nested txn", testLimits.checkTxn(&pb.TxnRequest{Success: []*pb.RequestOp{put("a"), nested(&pb.TxnRequest{Success: []*pb.RequestOp{put("a")}})}}),
			ErrDuplicateKey, "\"a\""},
		{"empty op", testLimits.checkTxn(&pb.TxnRequest{Success: []*pb.RequestOp{{}}}), ErrInvalid, "success: op 0: invalid request: empty request op"},
		{"empty op in a nested txn", testLimits.checkTxn(&pb.TxnRequest{Success: []*pb.RequestOp{nested(&pb.TxnRequest{Failure: []*pb.RequestOp{{}}})}}), ErrInvalid, "failure: op 0"},
		{"compare without a key", testLimits.checkTxn(&pb.TxnRequest{Compare: []*pb.Compare{{}}}), ErrEmptyKey, "compare 0: compare key"},
		{"unknown compare result", testLimits.checkTxn(&pb.TxnRequest{Compare: []*pb.Compare{{Key: []byte("a"), Result: 7}}}), ErrInvalid, "compare result 7"},
		{"unknown compare target", testLimits.checkTxn(&pb.TxnRequest{Compare: []*pb.Compare{{Key: []byte("a"), Target: 7}}}), ErrInvalid, "compare target 7"},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.ErrorIs(t, c.err, c.want)
			assert.Contains(t, c.err.Error(), c.says)
		})
	}
	for _, ok := range []error{
		testLimits.checkPut(&pb.PutRequest{Key: []byte("\x00edictkv/http/1"), Value: []byte("mine")}),
		testLimits.checkRange(&pb.RangeRequest{Key: []byte{0}, RangeEnd: []byte{0}}),
		testLimits.checkTxn(&pb.TxnRequest{
			Compare: []*pb.Compare{{Key: []byte("a"), RangeEnd: []byte("b"), Target: pb.Compare_LEASE}},
			Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: []byte("a"), Revision: 3}}},
				nested(&pb.TxnRequest{Success: []*pb.RequestOp{put("b")}, Failure: []*pb.RequestOp{put("b")}})},
		}),
	} {
		assert.NoError(t, ok, "any key, a compare over a range or a lease, a range at a revision, nested txns")
	}
}

// taxonomy are the package's sentinels: every refusal wraps one.
var taxonomy = []error{ErrEmptyKey, ErrKeyTooLarge, ErrValueTooLarge, ErrRequestTooLarge, ErrTooManyOps,
	ErrDuplicateKey, ErrInvalid, ErrUnsupported}

// FuzzTxnRequest: whatever a client sends, the checks either refuse it
// with an error of the taxonomy or pass a request the state's own checks
// accept and that encodes into a log entry.
func FuzzTxnRequest(f *testing.F) {
	seed := &pb.TxnRequest{
		Compare: []*pb.Compare{{Key: []byte("a"), Target: pb.Compare_VALUE, TargetUnion: &pb.Compare_Value{Value: []byte("x")}}},
		Success: []*pb.RequestOp{put("a"), nested(&pb.TxnRequest{Failure: []*pb.RequestOp{put("b")}})},
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
		if err := testLimits.checkTxn(&r); err != nil {
			if !slices.ContainsFunc(taxonomy, func(e error) bool { return errors.Is(err, e) }) {
				t.Fatalf("refusal %v wraps no error of the taxonomy", err)
			}
			return
		}
		if err := kvstate.CheckTxn(&r); err != nil {
			t.Fatalf("accepted a txn the state refuses: %v", err)
		}
		if _, err := (&kvstate.Request{Txn: &r}).Encode(); err != nil {
			t.Fatalf("accepted request does not encode: %v", err)
		}
	})
}
