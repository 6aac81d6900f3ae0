package mvcc

import (
	"context"
	"fmt"
	"path/filepath"
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
