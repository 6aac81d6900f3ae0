package storage

import (
	"errors"
	"fmt"
)

var (
	// ErrCompacted reports a request for log entries below FirstIndex: they
	// were compacted into a snapshot.
	ErrCompacted = errors.New("storage: entries compacted")
	// ErrUnavailable reports a request for log entries above LastIndex.
	ErrUnavailable = errors.New("storage: entries not yet in the log")
	// ErrNotContiguous reports a batch that would leave a gap in the log or
	// truncate where there is nothing to truncate.
	ErrNotContiguous = errors.New("storage: log would not be contiguous")
	// ErrCorrupt reports stored data that fails a check: a checksum, a
	// version byte, a structural rule of the file. It is never recovered from
	// silently; the error names the file and what is wrong.
	ErrCorrupt = errors.New("storage: corrupt data")
	// ErrClosed reports a call on a closed store.
	ErrClosed = errors.New("storage: store is closed")
	// ErrReservedKey reports a write to a stable key that only the store
	// itself may write (the incarnation).
	ErrReservedKey = errors.New("storage: reserved stable key")
	// ErrInvalid reports an argument the store refuses (an unknown entry
	// kind, an oversized value, an empty key).
	ErrInvalid = errors.New("storage: invalid argument")
)

// corruptf returns an error wrapping ErrCorrupt that names the file.
func corruptf(file, format string, args ...any) error {
	return fmt.Errorf("storage: %s: %s: %w", file, fmt.Sprintf(format, args...), ErrCorrupt)
}
