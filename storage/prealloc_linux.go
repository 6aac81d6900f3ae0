//go:build linux

package storage

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// startWriteback asks the kernel to start writing the range to disk without
// waiting for it (sync_file_range with SYNC_FILE_RANGE_WRITE). It makes
// nothing durable; the commits' fdatasync does that.
func startWriteback(f *os.File, off, n int64) error {
	return unix.SyncFileRange(int(f.Fd()), off, n, unix.SYNC_FILE_RANGE_WRITE)
}

// allocatedUpTo returns the end of the allocated run of f that starts at
// off: the first hole at or after off, or the end of the file. After a
// restart it tells how much of the space past the used pages is already
// zero-filled, so that it is not written again.
func allocatedUpTo(f *os.File, off int64) int64 {
	end, err := unix.Seek(int(f.Fd()), off, unix.SEEK_HOLE)
	if err != nil {
		return off // unknown: fill again, which is only slower
	}
	return end
}

// fallocate allocates size bytes of f (mode 0: the file grows to size,
// the new blocks read as zeros). A filesystem without it is
// errors.ErrUnsupported; any other failure (ENOSPC above all) is the
// caller's to report.
func fallocate(f *os.File, size int64) error {
	err := unix.Fallocate(int(f.Fd()), 0, 0, size)
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
		return errors.ErrUnsupported
	}
	return err
}

// fdatasync makes f's data durable, and the metadata needed to read it.
func fdatasync(f *os.File) error {
	for {
		err := unix.Fdatasync(int(f.Fd()))
		if err != unix.EINTR {
			return err
		}
	}
}

// mapFile maps the first size bytes of f read-only, for a scan that would
// otherwise copy a whole segment onto the heap (where the garbage
// collector may leave it for a while); unmap releases it.
func mapFile(f *os.File, size int64) (data []byte, unmap func(), err error) {
	if size == 0 {
		return nil, func() {}, nil
	}
	data, err = unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, nil, err
	}
	return data, func() { unix.Munmap(data) }, nil
}
