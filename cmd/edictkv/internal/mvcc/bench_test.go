package mvcc

import (
	"context"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/edictlog/edictlog/cmd/edictkv/internal/mvcc/backend"
)

const benchKeys = 100_000

func benchKey(i int) []byte { return fmt.Appendf(nil, "key/%08d", i) }

// fill puts benchKeys keys, 1,000 per transaction, and commits.
func fill(b *testing.B, s *Store) {
	b.Helper()
	value := make([]byte, 128)
	idx := s.ConsistentIndex()
	for i := 0; i < benchKeys; i += 1000 {
		idx++
		tw, err := s.Write(idx)
		if err != nil {
			b.Fatal(err)
		}
		for j := i; j < i+1000; j++ {
			tw.Put(benchKey(j), value, 0, PutOptions{})
		}
		tw.End()
	}
	if _, err := s.Commit(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkPut is one put per write transaction (one log entry each) on a
// store of 100k keys, on a bbolt file with etcd's batching (fsync on each
// commit).
func BenchmarkPut(b *testing.B) {
	s, err := OpenFile(filepath.Join(b.TempDir(), "db"), backend.BoltOptions{}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	fill(b, s)
	value := make([]byte, 128)
	idx := s.ConsistentIndex()
	b.ResetTimer()
	for i := range b.N {
		idx++
		tw, _ := s.Write(idx)
		tw.Put(benchKey(i%benchKeys), value, 0, PutOptions{})
		tw.End()
	}
	s.Commit()
}

// BenchmarkRange reads a single key, 100 keys, and counts 100k keys.
func BenchmarkRange(b *testing.B) {
	s, err := OpenFile(filepath.Join(b.TempDir(), "db"), backend.BoltOptions{}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	fill(b, s)
	ctx := context.Background()
	for _, c := range []struct {
		name string
		end  []byte
		o    RangeOptions
	}{
		{"one", nil, RangeOptions{}},
		{"limit100", []byte{0}, RangeOptions{Limit: 100}},
		{"count100k", []byte{0}, RangeOptions{CountOnly: true}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for i := range b.N {
				if _, err := s.Range(ctx, benchKey(i%benchKeys), c.end, c.o); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkOpen reopens a file of 100k keys: the key index is rebuilt
// from the key bucket.
func BenchmarkOpen(b *testing.B) {
	path := filepath.Join(b.TempDir(), "db")
	s, err := OpenFile(path, backend.BoltOptions{}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	fill(b, s)
	s.Close()
	b.ResetTimer()
	for range b.N {
		s, err := OpenFile(path, backend.BoltOptions{}, Options{})
		if err != nil {
			b.Fatal(err)
		}
		if s.KeyCount() != benchKeys {
			b.Fatalf("%d keys", s.KeyCount())
		}
		s.Close()
	}
}

// indexMemoryKeys is how many keys BenchmarkIndexMemory loads.
const indexMemoryKeys = 100_000

// indexLoads are the shapes of history BenchmarkIndexMemory measures, each
// on n keys of etcd's benchmark (binary.PutVarint of the put's number in 8
// bytes, with --sequential-keys: new keys in no byte order), one revision
// per put or delete: put once; put 4 times; put then deleted (a tombstone,
// not yet compacted); put 4 times, then compacted at the last revision;
// put once, 1,000 per write transaction, and the index rebuilt from the
// key bucket as a reopened store rebuilds it. Each prepares what its load
// reads, then returns the load.
var indexLoads = []struct {
	name    string
	prepare func(n int) (func(ti *treeIndex) error, error)
}{
	{"once", readsNothing(func(ti *treeIndex, n int) error { _, err := loadPuts(ti, n, 1, 2); return err })},
	{"put4", readsNothing(func(ti *treeIndex, n int) error { _, err := loadPuts(ti, n, 4, 2); return err })},
	{"deleted", readsNothing(func(ti *treeIndex, n int) error {
		rev, err := loadPuts(ti, n, 1, 2)
		if err != nil {
			return err
		}
		var k [8]byte
		for i := range n {
			if err := ti.tombstone(etcdBenchKey(&k, i), Revision{Main: rev}); err != nil {
				return err
			}
			rev++
		}
		return nil
	})},
	{"put4-compacted", readsNothing(func(ti *treeIndex, n int) error {
		rev, err := loadPuts(ti, n, 4, 2)
		if err != nil {
			return err
		}
		ti.compact(rev - 1)
		return nil
	})},
	{"reopened", func(n int) (func(ti *treeIndex) error, error) {
		m := backend.NewMemory()
		s, err := Open(m, Options{})
		if err != nil {
			return nil, err
		}
		var k [8]byte
		for i := 0; i < n; i += 1000 {
			tw, err := s.Write(uint64(i/1000 + 1))
			if err != nil {
				return nil, err
			}
			for j := i; j < min(i+1000, n); j++ {
				tw.Put(etcdBenchKey(&k, j), nil, 0, PutOptions{})
			}
			tw.End()
		}
		if _, err := s.Commit(); err != nil {
			return nil, err
		}
		return func(ti *treeIndex) error {
			tx, err := m.Begin()
			if err != nil {
				return err
			}
			defer tx.Release()
			_, err = rebuildIndex(tx, ti)
			return err
		}, nil
	}},
}

// readsNothing is the preparation of a load that reads nothing.
func readsNothing(load func(ti *treeIndex, n int) error) func(n int) (func(ti *treeIndex) error, error) {
	return func(n int) (func(ti *treeIndex) error, error) {
		return func(ti *treeIndex) error { return load(ti, n) }, nil
	}
}

// etcdBenchKey is the key etcd's benchmark puts as its i-th, in k.
func etcdBenchKey(k *[8]byte, i int) []byte {
	clear(k[:])
	binary.PutVarint(k[:], int64(i))
	return k[:]
}

// loadPuts puts n keys, rounds times each, a revision per put from rev
// on, and returns the next revision.
func loadPuts(ti *treeIndex, n, rounds int, rev int64) (int64, error) {
	var k [8]byte
	none := func(int64, int64) ([]byte, error) { return nil, nil }
	for range rounds {
		for i := range n {
			if _, err := ti.put(etcdBenchKey(&k, i), Revision{Main: rev}, none); err != nil {
				return 0, err
			}
			rev++
		}
	}
	return rev, nil
}

// BenchmarkIndexMemory reports the heap the key index holds per key
// (B/key: the live heap after a collection, less the live heap before the
// index was built), for each of indexLoads. etcd v3.6.8's treeIndex, loaded
// the same way (its keys allocated by the request's decoding, as its apply
// passes them), holds 150 B/key once, 198 put4, 214 deleted, 198
// put4-compacted; its restore builds what its puts build.
func BenchmarkIndexMemory(b *testing.B) {
	for _, c := range indexLoads {
		b.Run(c.name, func(b *testing.B) {
			load, err := c.prepare(indexMemoryKeys)
			if err != nil {
				b.Fatal(err)
			}
			var perKey float64
			for range b.N {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				ti := newTreeIndex()
				if err := load(ti); err != nil {
					b.Fatal(err)
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				perKey = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / indexMemoryKeys
				runtime.KeepAlive(ti)
			}
			b.ReportMetric(perKey, "B/key")
		})
	}
}

// BenchmarkIndexPut is the key index's share of a put: of a new key of
// etcd's benchmark in an index of 100k keys and more ("new"), of one of
// 100k keys put once before ("overwrite1": its first change; the index is
// built again after each 100k), and of one put 8 times before
// ("overwriteN").
func BenchmarkIndexPut(b *testing.B) {
	none := func(int64, int64) ([]byte, error) { return nil, nil }
	for _, c := range []struct {
		name   string
		rounds int // puts of every key before the benchmark
		key    func(i int) int
	}{
		{"new", 1, func(i int) int { return benchKeys + i }},
		{"overwrite1", 1, func(i int) int { return i % benchKeys }},
		{"overwriteN", 8, func(i int) int { return i % benchKeys }},
	} {
		b.Run(c.name, func(b *testing.B) {
			ti := newTreeIndex()
			rev, err := loadPuts(ti, benchKeys, c.rounds, 2)
			if err != nil {
				b.Fatal(err)
			}
			var k [8]byte
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if c.rounds == 1 && i > 0 && i%benchKeys == 0 && c.name == "overwrite1" {
					b.StopTimer()
					ti = newTreeIndex()
					rev, _ = loadPuts(ti, benchKeys, c.rounds, 2)
					b.StartTimer()
				}
				if _, err := ti.put(etcdBenchKey(&k, c.key(i)), Revision{Main: rev}, none); err != nil {
					b.Fatal(err)
				}
				rev++
			}
		})
	}
}
