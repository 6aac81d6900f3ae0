package kvstate

import (
	"bytes"
	"context"
	"encoding/binary"
	"path/filepath"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/edictlog/edictlog/cmd/edictkv/internal/mvcc/backend"
	"github.com/edictlog/edictlog/fsm"
)

// putTemplate is an encoded Put of an 8-byte key and a 256-byte value,
// the sizes of edictkv's etcd comparison, and the offset of the key in it:
// a benchmark writes each put's key there (the state keeps none of an
// entry's Data).
func putTemplate(tb testing.TB) ([]byte, int) {
	tb.Helper()
	marker := []byte("KEYKEYKE")
	data, err := (&Request{ID: 1, Put: &pb.PutRequest{Key: marker, Value: bytes.Repeat([]byte("v"), 256)}}).Encode()
	if err != nil {
		tb.Fatal(err)
	}
	return data, bytes.Index(data, marker)
}

// benchKeys are the key orders of BenchmarkApplyPut: each writes the i-th
// put's 8-byte key into k.
var benchKeys = []struct {
	name string
	key  func(i uint64, k []byte)
	// prefill: the keys of the first overwriteKeys puts are written
	// before the benchmark, which then overwrites them.
	prefill bool
}{
	// etcd's benchmark with --sequential-keys: binary.PutVarint of the
	// put's number, new keys in no byte order.
	{"etcd", func(i uint64, k []byte) { clear(k); binary.PutVarint(k, int64(i)) }, false},
	// New keys in byte order, as time-ordered names are.
	{"ascending", func(i uint64, k []byte) { binary.BigEndian.PutUint64(k, i) }, false},
	// Existing keys, overwritten in no byte order.
	{"overwrite", func(i uint64, k []byte) { binary.BigEndian.PutUint64(k, (i*7919)%overwriteKeys) }, true},
}

const overwriteKeys = 100_000

// syncEvery is how many puts a server applies between two of the store's
// background commits at the load of edictkv's etcd comparison (about
// 4,000 puts/s, a commit every 100 ms).
const syncEvery = 400

// BenchmarkApplyPut applies encoded Puts, one per entry, decoding and the
// stamp record included, as the log calls Apply in a server, and commits
// the store every syncEvery entries as its background committer would
// at that rate: its figures are the state's cost of a put, the commit's
// share included, for each key order of benchKeys. "fsync" is the
// server's bbolt file; "nosync" leaves out the wait for the disk. Beside
// the time per put, cpu-ns/op is the CPU the process spent per put, every
// goroutine included: on a machine other jobs keep busy it moves far less
// than the time does. Compare with fsm/kvfsm's BenchmarkApplyPut, the
// in-memory state before the store.
func BenchmarkApplyPut(b *testing.B) {
	for _, keys := range benchKeys {
		for _, c := range []struct {
			name string
			o    backend.BoltOptions
		}{
			{"fsync", backend.BoltOptions{}},
			{"nosync", backend.BoltOptions{NoSync: true}},
		} {
			b.Run(keys.name+"/"+c.name, func(b *testing.B) {
				s, err := OpenFile(filepath.Join(b.TempDir(), "state.db"), Options{Bolt: c.o})
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				data, at := putTemplate(b)
				k := data[at : at+8]
				idx := s.AppliedIndex()
				apply := func(i uint64) {
					idx++
					keys.key(i, k)
					res := s.Apply(fsm.Entry{Index: idx, Stamp: stampAt(idx), Data: data}).(*Result)
					if res.Err != nil {
						b.Fatal(res.Err)
					}
					if idx%syncEvery == 0 {
						if _, err := s.Sync(); err != nil {
							b.Fatal(err)
						}
					}
				}
				if keys.prefill {
					for i := range uint64(overwriteKeys) {
						apply(i)
					}
				}
				b.SetBytes(256)
				b.ReportAllocs()
				cpu := processCPU()
				for i := uint64(0); b.Loop(); i++ {
					apply(i)
				}
				b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

// BenchmarkRange reads one key of a store on a bbolt file, committed (the
// read goes to the file, as a server's does between its batches), the
// sizes of edictkv's etcd comparison: an 8-byte key, a 256-byte value.
// It is the state's share of a Range: "unstamped" is what the etcd API
// asks of it, "stamps" what the HTTP API asks.
func BenchmarkRange(b *testing.B) {
	s, err := OpenFile(filepath.Join(b.TempDir(), "state.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	data, at := putTemplate(b)
	k := data[at : at+8]
	for i := range uint64(1000) {
		binary.BigEndian.PutUint64(k, i)
		if res := s.Apply(fsm.Entry{Index: i + 1, Stamp: stampAt(i + 1), Data: data}).(*Result); res.Err != nil {
			b.Fatal(res.Err)
		}
	}
	if _, err := s.Sync(); err != nil {
		b.Fatal(err)
	}
	key := binary.BigEndian.AppendUint64(nil, 500)
	ctx := context.Background()
	b.Run("stamps", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			resp, st, err := s.Range(ctx, &pb.RangeRequest{Key: key})
			if err != nil || len(resp.Kvs) != 1 || len(st) != 1 {
				b.Fatalf("range: %v, %d kvs, %d stamps", err, len(resp.Kvs), len(st))
			}
		}
	})
	b.Run("unstamped", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			resp, err := s.RangeUnstamped(ctx, &pb.RangeRequest{Key: key})
			if err != nil || len(resp.Kvs) != 1 {
				b.Fatalf("range: %v", err)
			}
		}
	})
}
