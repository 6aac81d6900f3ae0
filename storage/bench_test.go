package storage_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/edictlog/edictlog/storage"
	"github.com/edictlog/edictlog/storage/storagetest"
	"github.com/edictlog/edictlog/wire"
)

// BenchmarkAppend measures durable appends (one transaction and fsync per
// batch) of 256-byte entries; entries/s is the figure to compare.
func BenchmarkAppend(b *testing.B) {
	for _, batch := range []int{1, 16, 256} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			s, err := storage.OpenBolt(filepath.Join(b.TempDir(), "log.db"), nil)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			es := storagetest.Entries(1, batch, storagetest.Stamp(1, 1), 256)
			b.SetBytes(int64(batch * 256))
			b.ResetTimer()
			next := uint64(1)
			for b.Loop() {
				for i := range es {
					es[i].Index = next + uint64(i)
				}
				if err := s.StoreBatch(wire.Batch{Entries: es}); err != nil {
					b.Fatal(err)
				}
				next += uint64(batch)
			}
			b.ReportMetric(float64(next-1)/b.Elapsed().Seconds(), "entries/s")
		})
	}
}

// BenchmarkEntries measures reading a range of 256-byte entries from a log
// of 16384.
func BenchmarkEntries(b *testing.B) {
	s, err := storage.OpenBolt(filepath.Join(b.TempDir(), "log.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const n = 16384
	reign := storagetest.Stamp(1, 1)
	for i := uint64(0); i < n/256; i++ {
		if err := s.StoreBatch(wire.Batch{Entries: storagetest.Entries(1+i*256, 256, reign, 256)}); err != nil {
			b.Fatal(err)
		}
	}
	for _, span := range []uint64{16, 256} {
		b.Run(fmt.Sprintf("range=%d", span), func(b *testing.B) {
			b.SetBytes(int64(span * 256))
			lo, read := uint64(1), 0
			for b.Loop() {
				es, err := s.Entries(lo, lo+span, 0)
				if err != nil || len(es) != int(span) {
					b.Fatalf("read %d entries: %v", len(es), err)
				}
				read += len(es)
				lo = (lo+span)%(n-span) + 1
			}
			b.ReportMetric(float64(read)/b.Elapsed().Seconds(), "entries/s")
		})
	}
}
