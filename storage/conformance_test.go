package storage_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/edictlog/edictlog/storage"
	"github.com/edictlog/edictlog/storage/storagetest"
)

func TestConformanceBolt(t *testing.T) {
	storagetest.RunStore(t, storagetest.StoreHarness{
		Open: func(t testing.TB, dir string) storagetest.Store {
			s, err := storage.OpenBolt(filepath.Join(dir, "log.db"), &storage.BoltOptions{CompactChunk: 7})
			require.NoError(t, err)
			return s
		},
		Durable: true,
	})
}

func TestConformanceMem(t *testing.T) {
	storagetest.RunStore(t, storagetest.StoreHarness{
		Open: func(testing.TB, string) storagetest.Store { return storage.NewMemStore() },
	})
}

func TestConformanceFileSnapshots(t *testing.T) {
	storagetest.RunSnapshotStore(t, storagetest.SnapshotHarness{
		Open: func(t testing.TB, dir string, retain int) storagetest.SnapshotStore {
			s, err := storage.NewFileSnapshotStore(filepath.Join(dir, "snapshots"), retain)
			require.NoError(t, err)
			return s
		},
		Durable: true,
	})
}

func TestConformanceMemSnapshots(t *testing.T) {
	storagetest.RunSnapshotStore(t, storagetest.SnapshotHarness{
		Open: func(t testing.TB, _ string, retain int) storagetest.SnapshotStore {
			s, err := storage.NewMemSnapshotStore(retain)
			require.NoError(t, err)
			return s
		},
	})
}

func TestConformanceWAL(t *testing.T) {
	storagetest.RunStore(t, storagetest.StoreHarness{
		Open: func(t testing.TB, dir string) storagetest.Store {
			// Small segments, so that the suite's histories span several.
			s, err := storage.OpenWAL(filepath.Join(dir, "wal"), &storage.WALOptions{SegmentSize: 16 << 10})
			require.NoError(t, err)
			return s
		},
		Durable: true,
	})
}
