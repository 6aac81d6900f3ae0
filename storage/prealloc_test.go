package storage

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/edictlog/edictlog/wire"
	"github.com/stretchr/testify/require"
)

func TestPreallocation(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("hole detection is Linux-only")
	}
	path := filepath.Join(t.TempDir(), "log.db")
	s, err := OpenBolt(path, &BoltOptions{Preallocate: 1 << 20})
	require.NoError(t, err)
	require.NoError(t, s.StoreBatch(wire.Batch{Entries: testEntries(1, 100, 256)}))
	_, used := usedBytes(t, path)
	require.GreaterOrEqual(t, s.zeroedTo, used+1<<20-4096, "a megabyte ahead is zero-filled")
	f, err := os.Open(path)
	require.NoError(t, err)
	require.GreaterOrEqual(t, allocatedUpTo(f, used), s.zeroedTo, "without holes")
	require.NoError(t, f.Close())
	filled := s.zeroedTo
	require.NoError(t, s.Close())

	// After a restart the fill is found, not written again.
	s, err = OpenBolt(path, &BoltOptions{Preallocate: 1 << 20})
	require.NoError(t, err)
	require.NoError(t, s.StoreBatch(wire.Batch{Entries: testEntries(101, 1, 256)}))
	require.Equal(t, filled, s.zeroedTo)
	require.NoError(t, s.Close())

	// Turned off, the file holds only what bbolt grows it to.
	path = filepath.Join(t.TempDir(), "off.db")
	s, err = OpenBolt(path, &BoltOptions{Preallocate: -1})
	require.NoError(t, err)
	require.NoError(t, s.StoreBatch(wire.Batch{Entries: testEntries(1, 100, 256)}))
	st, err := s.Stats()
	require.NoError(t, err)
	require.Less(t, st.FileSize, int64(1<<20))
	require.NoError(t, s.Close())
}
