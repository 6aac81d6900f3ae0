package kvstate

import (
	"context"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/edictlog/edictlog/cmd/edictkv/internal/mvcc/backend"
	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/fsm"
)

// harness applies requests to a State on a memory backend, at increasing
// indexes with stamps of their own.
type harness struct {
	t     testing.TB
	mem   *backend.Memory
	s     *State
	index uint64
}

func newHarness(t testing.TB) *harness {
	t.Helper()
	h := &harness{t: t, mem: backend.NewMemory()}
	s, err := Open(h.mem, Options{})
	if err != nil {
		t.Fatal(err)
	}
	h.s = s
	t.Cleanup(func() { h.s.Close() })
	return h
}

func stampAt(i uint64) edict.Stamp {
	return edict.Stamp{Epoch: 1, Counter: i,
		QT: edict.QT{{Process: 1, T: edict.Time{Incarnation: 1, Nanos: int64(i)}}, {Process: 2, T: edict.Time{Incarnation: 1, Nanos: int64(i) + 1}}}}
}

func (h *harness) entry(data []byte) *Result {
	h.t.Helper()
	h.index++
	res, ok := h.s.Apply(fsm.Entry{Index: h.index, Stamp: stampAt(h.index), Data: data}).(*Result)
	if !ok {
		h.t.Fatalf("Apply answered something other than a *Result")
	}
	return res
}

func (h *harness) apply(r *Request) *Result {
	h.t.Helper()
	data, err := r.Encode()
	if err != nil {
		h.t.Fatal(err)
	}
	return h.entry(data)
}

// ok applies r and fails the test on a refusal.
func (h *harness) ok(r *Request) *Result {
	h.t.Helper()
	res := h.apply(r)
	if res.Err != nil {
		h.t.Fatalf("request %+v refused: %v", r, res.Err)
	}
	return res
}

func (h *harness) put(key, value string) *Result {
	h.t.Helper()
	return h.ok(&Request{Put: &pb.PutRequest{Key: []byte(key), Value: []byte(value)}})
}

func (h *harness) get(key string, rev int64) *pb.RangeResponse {
	h.t.Helper()
	resp, _, err := h.s.Range(context.Background(), &pb.RangeRequest{Key: []byte(key), Revision: rev})
	if err != nil {
		h.t.Fatal(err)
	}
	return resp
}

func (h *harness) all() *pb.RangeResponse {
	h.t.Helper()
	resp, _, err := h.s.Range(context.Background(), &pb.RangeRequest{Key: []byte{0}, RangeEnd: []byte{0}})
	if err != nil {
		h.t.Fatal(err)
	}
	return resp
}

// reopen crashes the memory backend (keeping only what was committed) or
// closes the state cleanly, and opens it again.
func (h *harness) reopen(crash bool) {
	h.t.Helper()
	var mem *backend.Memory
	if crash {
		mem = h.mem.Crash()
		h.s.Close()
	} else {
		if err := h.s.Close(); err != nil {
			h.t.Fatal(err)
		}
		mem = h.mem.Crash()
	}
	s, err := Open(mem, Options{})
	if err != nil {
		h.t.Fatal(err)
	}
	h.mem, h.s = mem, s
	d, _ := s.DurableIndex()
	h.index = d
}

func putOp(key, value string) *pb.RequestOp {
	return &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte(key), Value: []byte(value)}}}
}

func rangeOp(r *pb.RangeRequest) *pb.RequestOp {
	return &pb.RequestOp{Request: &pb.RequestOp_RequestRange{RequestRange: r}}
}

func delOp(key, end string) *pb.RequestOp {
	d := &pb.DeleteRangeRequest{Key: []byte(key)}
	if end != "" {
		d.RangeEnd = []byte(end)
	}
	return &pb.RequestOp{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: d}}
}

func txnOp(t *pb.TxnRequest) *pb.RequestOp {
	return &pb.RequestOp{Request: &pb.RequestOp_RequestTxn{RequestTxn: t}}
}
