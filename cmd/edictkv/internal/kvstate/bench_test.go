package kvstate

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/edictlog/edictlog/cmd/edictkv/internal/mvcc/backend"
	"github.com/edictlog/edictlog/fsm"
)

const benchKeys = 100_000

func benchKey(i int) []byte { return fmt.Appendf(nil, "bench/key/%08d", i%benchKeys) }

// putEntries are encoded Puts of 256-byte values spread over benchKeys
// keys, as a client's puts reach the state.
func putEntries(b *testing.B) [][]byte {
	b.Helper()
	value := []byte(strings.Repeat("v", 256))
	cmds := make([][]byte, 4096)
	for i := range cmds {
		data, err := (&Request{ID: uint64(i), Put: &pb.PutRequest{Key: benchKey(i * 7919), Value: value}}).Encode()
		if err != nil {
			b.Fatal(err)
		}
		cmds[i] = data
	}
	return cmds
}

// syncEvery is how many puts a server applies between two of the store's
// background commits at the load of edictkv's etcd comparison (about
// 4,000 puts/s, a commit every 100 ms).
const syncEvery = 400

// BenchmarkApplyPut applies encoded Puts, one per entry, decoding and the
// stamp record included, as the log calls Apply in a server, and commits
// the store every syncEvery entries as its background committer would
// at that rate: its figures are the state's cost of a put, the commit's
// share included. "fsync" is the server's bbolt file; "nosync" leaves out
// the wait for the disk. Beside the time per put, cpu-ns/op is the CPU the
// process spent per put, every goroutine included: on a machine other
// jobs keep busy it moves far less than the time does. Compare with
// fsm/kvfsm's BenchmarkApplyPut, the in-memory state before the store.
func BenchmarkApplyPut(b *testing.B) {
	for _, c := range []struct {
		name string
		o    backend.BoltOptions
	}{
		{"fsync", backend.BoltOptions{}},
		{"nosync", backend.BoltOptions{NoSync: true}},
	} {
		b.Run(c.name, func(b *testing.B) {
			s, err := OpenFile(filepath.Join(b.TempDir(), "state.db"), Options{Bolt: c.o})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			cmds := putEntries(b)
			idx := s.AppliedIndex()
			b.SetBytes(256)
			b.ReportAllocs()
			cpu := processCPU()
			for i := 0; b.Loop(); i++ {
				idx++
				res := s.Apply(fsm.Entry{Index: idx, Stamp: stampAt(idx), Data: cmds[i%len(cmds)]}).(*Result)
				if res.Err != nil {
					b.Fatal(res.Err)
				}
				if idx%syncEvery == 0 {
					if _, err := s.Sync(); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}
