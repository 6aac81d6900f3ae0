//go:build !linux

package storage

import (
	"errors"
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
