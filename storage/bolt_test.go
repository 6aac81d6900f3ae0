package storage_test

import (
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/edictlog/edictlog/storage"
	"github.com/edictlog/edictlog/storage/storagetest"
	"github.com/edictlog/edictlog/wire"
)

func TestBoltLockedFileIsAnError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log.db")
	a, err := storage.OpenBolt(path, nil)
	require.NoError(t, err)
	defer a.Close()
	start := time.Now()
	_, err = storage.OpenBolt(path, &storage.BoltOptions{Timeout: 200 * time.Millisecond})
	require.Error(t, err)
	require.ErrorContains(t, err, path)
	require.ErrorContains(t, err, "locked by another process")
	require.Less(t, time.Since(start), 5*time.Second, "a locked file must not hang the open")
}

func TestBoltCreateLeavesOnlyTheFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "log.db")
	s, err := storage.OpenBolt(path, nil)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	names, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, names, 1)
	require.Equal(t, "log.db", names[0].Name())
}

func TestBoltStats(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log.db")
	s, err := storage.OpenBolt(path, nil)
	require.NoError(t, err)
	defer s.Close()
	for i := uint64(0); i < 10; i++ {
		require.NoError(t, s.StoreBatch(wire.Batch{Entries: storagetest.Entries(1+i*16, 16, storagetest.Stamp(1, 1), 256)}))
	}
	st, err := s.Stats()
	require.NoError(t, err)
	require.Equal(t, path, st.Path)
	require.Equal(t, uint64(160), st.Entries)
	require.Equal(t, uint64(1), st.FirstIndex)
	require.Equal(t, uint64(160), st.LastIndex)
	require.Equal(t, uint64(10), st.Fsyncs)
	require.Greater(t, st.FileSize, int64(160*256))
	require.Positive(t, st.FsyncMean())
	require.GreaterOrEqual(t, st.FsyncMax, st.FsyncMean())
	t.Logf("%+v, mean %v", st, st.FsyncMean())
}

// TestBoltCompactionInterleaves checks that a large compaction does not hold
// off appends: they must complete while it is still running.
func TestBoltCompactionInterleaves(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log.db")
	s, err := storage.OpenBolt(path, &storage.BoltOptions{CompactChunk: 64})
	require.NoError(t, err)
	defer s.Close()
	reign := storagetest.Stamp(1, 1)
	const total = 12800
	for i := uint64(0); i < total/256; i++ {
		require.NoError(t, s.StoreBatch(wire.Batch{Entries: storagetest.Entries(1+i*256, 256, reign, 64)}))
	}
	var compacting atomic.Bool
	compacting.Store(true)
	done := make(chan error)
	go func() {
		err := s.CompactPrefix(total - 100)
		compacting.Store(false)
		done <- err
	}()
	next, during := uint64(total+1), 0
	var worst time.Duration
	for compacting.Load() {
		start := time.Now()
		require.NoError(t, s.StoreBatch(wire.Batch{Entries: storagetest.Entries(next, 1, reign, 64)}))
		worst = max(worst, time.Since(start))
		next++
		if compacting.Load() {
			during++
		}
	}
	require.NoError(t, <-done)
	st, err := s.Stats()
	require.NoError(t, err)
	t.Logf("%d appends completed during a compaction of %d entries in %d steps; slowest append %v", during, total-100, (total-100+63)/64, worst)
	require.GreaterOrEqual(t, during, 10, "appends must interleave with compaction steps")
	require.Equal(t, uint64(total-99), st.FirstIndex)
	require.Equal(t, next-1, st.LastIndex)
}
