package kvstate

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/edictlog/edictlog/cmd/edictkv/internal/mvcc"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/mvcc/backend"
	"github.com/edictlog/edictlog/fsm"
)

// model is etcd's keyspace the simple way: every revision's whole state.
type model struct {
	rev        int64
	compactRev int64
	history    map[int64]map[string]mvccpb.KeyValue // revision → keys alive
}

func newModel() *model {
	return &model{rev: 1, compactRev: -1, history: map[int64]map[string]mvccpb.KeyValue{1: {}}}
}

func (m *model) now() map[string]mvccpb.KeyValue { return m.history[m.rev] }

// write applies puts and deletes as one revision, if they change anything.
func (m *model) write(puts map[string]string, dels []string) {
	next := maps.Clone(m.now())
	changed := false
	for _, k := range dels {
		if _, ok := next[k]; ok {
			delete(next, k)
			changed = true
		}
	}
	for _, k := range slices.Sorted(maps.Keys(puts)) {
		kv, ok := next[k]
		if !ok {
			kv = mvccpb.KeyValue{Key: []byte(k), CreateRevision: m.rev + 1}
		}
		kv.Value, kv.ModRevision, kv.Version = []byte(puts[k]), m.rev+1, kv.Version+1
		next[k] = kv
		changed = true
	}
	if changed {
		m.rev++
		m.history[m.rev] = next
	}
}

func (m *model) keysIn(at map[string]mvccpb.KeyValue, from, end string) []string {
	var out []string
	for k := range at {
		if k == from || (end != "" && k >= from && (end == "\x00" || k < end)) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

var modelKeys = []string{"a", "b", "c", "d", "e", "\x00", "\x00x"}

func randKey(r *rand.Rand) string { return modelKeys[r.IntN(len(modelKeys))] }

func randEnd(r *rand.Rand, key string) string {
	switch r.IntN(3) {
	case 0:
		return ""
	case 1:
		return "\x00"
	}
	return key + "\xff"
}

// step draws a request, applies it to the model, and returns it.
func (m *model) step(r *rand.Rand) *Request {
	switch n := r.IntN(10); {
	case n < 4:
		k, v := randKey(r), fmt.Sprint(r.IntN(100))
		m.write(map[string]string{k: v}, nil)
		return &Request{Put: &pb.PutRequest{Key: []byte(k), Value: []byte(v)}}
	case n < 6:
		k := randKey(r)
		end := randEnd(r, k)
		m.write(nil, m.keysIn(m.now(), k, end))
		d := &pb.DeleteRangeRequest{Key: []byte(k)}
		if end != "" {
			d.RangeEnd = []byte(end)
		}
		return &Request{DeleteRange: d}
	case n < 9:
		// if version(k) == v then put k2 else delete k3
		k, v := randKey(r), int64(r.IntN(3))
		k2, k3 := randKey(r), randKey(r)
		ok := m.now()[k].Version == v
		if ok {
			m.write(map[string]string{k2: "t"}, nil)
		} else {
			m.write(nil, []string{k3})
		}
		return &Request{Txn: &pb.TxnRequest{
			Compare: []*pb.Compare{{Key: []byte(k), Target: pb.Compare_VERSION, Result: pb.Compare_EQUAL, TargetUnion: &pb.Compare_Version{Version: v}}},
			Success: []*pb.RequestOp{putOp(k2, "t")}, Failure: []*pb.RequestOp{delOp(k3, "")}}}
	default:
		rev := m.compactRev + 1 + int64(r.IntN(int(m.rev-m.compactRev)+1))
		if rev > m.compactRev && rev <= m.rev {
			for x := range m.history {
				if x < rev {
					delete(m.history, x)
				}
			}
			m.compactRev = rev
		}
		return &Request{Compaction: &pb.CompactionRequest{Revision: rev}}
	}
}

// check compares every read the state can answer with the model.
func (m *model) check(t *testing.T, s *State) {
	t.Helper()
	if s.Rev() != m.rev || s.CompactRev() != m.compactRev {
		t.Fatalf("state at revision %d compacted at %d, the model at %d and %d", s.Rev(), s.CompactRev(), m.rev, m.compactRev)
	}
	for rev, at := range m.history {
		resp, _, err := s.Range(context.Background(), &pb.RangeRequest{Key: []byte{0}, RangeEnd: []byte{0}, Revision: rev})
		if err != nil {
			t.Fatalf("read at revision %d: %v", rev, err)
		}
		want := m.keysIn(at, "\x00", "\x00")
		if len(resp.Kvs) != len(want) {
			t.Fatalf("revision %d: %d keys, the model has %v", rev, len(resp.Kvs), want)
		}
		for i, kv := range resp.Kvs {
			w := at[want[i]]
			if !bytes.Equal(kv.Key, w.Key) || !bytes.Equal(kv.Value, w.Value) || kv.CreateRevision != w.CreateRevision ||
				kv.ModRevision != w.ModRevision || kv.Version != w.Version {
				t.Fatalf("revision %d: got %v, the model has %v", rev, kv, w)
			}
		}
	}
	if m.compactRev > 1 {
		if _, _, err := s.Range(context.Background(), &pb.RangeRequest{Key: []byte("a"), Revision: m.compactRev - 1}); err != ErrCompacted {
			t.Fatalf("read below the compaction: %v", err)
		}
	}
}

// TestModel applies random requests, the log's own entries, syncs,
// crashes and clean restarts, and checks every revision against the
// model; after a crash the entries after the durable index are applied
// again, as the log does.
func TestModel(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 7))
			m := newModel()
			mem := backend.NewMemory()
			opts := Options{Store: mvcc.Options{BatchLimit: 1 + r.IntN(20), CompactionBatchLimit: 2}}
			s, err := Open(mem, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { s.Close() }()
			var log []fsm.Entry
			apply := func(e fsm.Entry) {
				res := s.Apply(e).(*Result)
				if res.Err != nil && res.Compaction == nil && e.Data != nil {
					req, _ := DecodeRequest(e.Data)
					if req.Compaction == nil {
						t.Fatalf("entry %d refused: %v", e.Index, res.Err)
					}
				}
			}
			for i := range 400 {
				idx := uint64(i + 1)
				var data []byte
				if r.IntN(8) != 0 {
					data, err = m.step(r).Encode()
					if err != nil {
						t.Fatal(err)
					}
				}
				e := fsmEntry(idx, data)
				log = append(log, e)
				apply(e)
				switch r.IntN(30) {
				case 0:
					if _, err := s.Sync(); err != nil {
						t.Fatal(err)
					}
				case 1, 2:
					for more := true; more; {
						if more, err = s.CompactStep(); err != nil {
							t.Fatal(err)
						}
					}
				case 3:
					mem = mem.Crash()
					s.Close()
					if s, err = Open(mem, opts); err != nil {
						t.Fatal(err)
					}
					d, _ := s.DurableIndex()
					for _, e := range log[d:] {
						apply(e)
					}
				case 4:
					if err := s.Close(); err != nil {
						t.Fatal(err)
					}
					mem = mem.Crash()
					if s, err = Open(mem, opts); err != nil {
						t.Fatal(err)
					}
					if d, _ := s.DurableIndex(); d != idx {
						t.Fatalf("a clean close kept index %d of %d", d, idx)
					}
				}
				if i%25 == 0 || i == 399 {
					m.check(t, s)
				}
			}
		})
	}
}
