package kvstate

import (
	"io"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/edictlog/edictlog/fsm"
)

func fsmEntry(index uint64, data []byte) fsm.Entry {
	return fsm.Entry{Index: index, Stamp: stampAt(index), Data: data}
}

func pipe() (*io.PipeReader, *io.PipeWriter) { return io.Pipe() }

// seedRequests is one request of each kind, and some with every option.
func seedRequests() []*Request {
	return []*Request{
		{ID: 1, Put: &pb.PutRequest{Key: []byte("a"), Value: []byte("v"), PrevKv: true, Lease: 3}},
		{ID: 2, User: "root", Put: &pb.PutRequest{Key: []byte("a"), IgnoreValue: true, IgnoreLease: true}},
		{ID: 3, DeleteRange: &pb.DeleteRangeRequest{Key: []byte("a"), RangeEnd: []byte{0}, PrevKv: true}},
		{ID: 4, Txn: &pb.TxnRequest{
			Compare: []*pb.Compare{cmp("a", "b", pb.Compare_VALUE, pb.Compare_EQUAL, "v"), cmp("a", "", pb.Compare_LEASE, pb.Compare_GREATER, 1)},
			Success: []*pb.RequestOp{putOp("a", "w"), rangeOp(&pb.RangeRequest{Key: []byte("a"), Revision: 2, Limit: 3}), delOp("b", "c"),
				txnOp(&pb.TxnRequest{Failure: []*pb.RequestOp{putOp("c", "d")}})},
			Failure: []*pb.RequestOp{rangeOp(&pb.RangeRequest{Key: []byte("a"), SortOrder: pb.RangeRequest_DESCEND, SortTarget: pb.RangeRequest_VALUE})},
		}},
		{ID: 5, Compaction: &pb.CompactionRequest{Revision: 7, Physical: true}},
		{ID: 6, MemberPut: &MemberPut{ID: 2, Attrs: []Attr{{Name: "http", Value: "127.0.0.1:80"}, {Name: "grpc", Value: ""}}}},
		{ID: 7, MemberDelete: &MemberDelete{ID: 2}},
		{ID: 1 << 60, Alarm: &pb.AlarmRequest{Action: pb.AlarmRequest_ACTIVATE, MemberID: 9, Alarm: pb.AlarmType_NOSPACE}},
	}
}

// FuzzDecodeRequest: the decoder refuses or accepts any input without
// panicking, and what it accepts encodes back to a request that decodes
// alike; applying it changes the state deterministically or refuses it.
func FuzzDecodeRequest(f *testing.F) {
	for _, r := range seedRequests() {
		data, err := r.Encode()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
		f.Add(data[:len(data)/2])
	}
	f.Add([]byte{})
	f.Add([]byte{EnvelopeVersion, 0x80})
	f.Add([]byte{EnvelopeVersion, 0, 0, byte(KindMemberPut), 1, 1, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := DecodeRequest(data)
		if err != nil {
			return
		}
		again, err := r.Encode()
		if err != nil {
			t.Fatalf("a decoded request does not encode: %v", err)
		}
		r2, err := DecodeRequest(again)
		if err != nil {
			t.Fatalf("a re-encoded request does not decode: %v", err)
		}
		if r2.Kind() != r.Kind() || r2.ID != r.ID || r2.User != r.User {
			t.Fatalf("round trip changed the request")
		}
		var revs [2]int64
		for i := range revs {
			h := newHarness(t)
			h.put("a", "1")
			h.put("b", "2")
			h.entry(data)
			revs[i] = h.s.Rev()
		}
		if revs[0] != revs[1] {
			t.Fatalf("two states applying the same entry are at revisions %d and %d", revs[0], revs[1])
		}
	})
}
