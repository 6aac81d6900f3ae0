//go:build !linux

package storage

import (
	"errors"
	"io"
	"os"
)

// startWriteback is a no-op where sync_file_range does not exist: the
// zeros are written back with the next fdatasync instead.
func startWriteback(*os.File, int64, int64) error { return nil }

// allocatedUpTo cannot find holes here, so the fill starts at off.
func allocatedUpTo(_ *os.File, off int64) int64 { return off }

// fallocate is not available here; allocate writes zeros instead.
func fallocate(*os.File, int64) error { return errors.ErrUnsupported }

// fdatasync falls back to a full fsync.
func fdatasync(f *os.File) error { return f.Sync() }

// mapFile reads the first size bytes of f where mmap is not used.
func mapFile(f *os.File, size int64) ([]byte, func(), error) {
	data := make([]byte, size)
	if _, err := f.ReadAt(data, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, nil, err
	}
	return data, func() {}, nil
}
