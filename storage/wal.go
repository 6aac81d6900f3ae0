package storage

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edictlog/edictlog/wire"
)

// WALStore is a Store kept as an append-only log of records in a folder of
// segment files: each StoreBatch, Set, Delete, BumpIncarnation and
// CompactPrefix is one record, written with one pwrite and made durable by
// one fdatasync. A segment's blocks are allocated when it is created, so a
// commit's fdatasync writes the record's blocks and nothing else; a bbolt
// commit of the same batch writes a leaf page, branch pages, the meta page
// and the state record (about four pages). The log's readers are the
// recovery at start and catch-up of slow followers, both rare, so the store
// keeps only where each entry is and reads it back with pread.
//
// # Layout
//
// The folder holds "LOCK" (flocked while open) and segments named by their
// sequence number, "%016x.wal", numbered from 1 without gaps. A segment is
// created at its full size (WALOptions.SegmentSize, or larger for a record
// that needs it) with its blocks allocated and zero, and starts with a
// checkpoint record: the log's bounds (first, last, the stamp of entry
// first-1) and every stable key as they stood when it was started, the
// store's salt and the segment's size. Records follow one after another
// (wal_record.go); past the last one the segment is zero. The state of the
// store is the oldest segment's checkpoint with every later record applied
// in order; each later segment's checkpoint must equal the state reached
// at its start.
//
// An entry's segment never decreases with its index (a truncation drops a
// suffix, and appends go to the newest segment), so once CompactPrefix has
// compacted every entry a segment holds, every segment before the one
// holding the first entry is dead, and is removed, oldest first.
//
// # What a crash leaves
//
//   - A record is written in one pwrite after the last one and then synced;
//     only the store's last record can be cut short. After a crash, the
//     newest segment may end in a record that fails its check; if nothing
//     after it in that segment verifies (only the write cut short can be
//     there) Open clears it with zeros, syncs, logs it and counts its bytes
//     in Stats.TornBytes. It was never acknowledged. A record that fails
//     its check with a record that verifies after it, or anywhere but in
//     the newest segment, is damage: Open refuses the store with an error
//     wrapping ErrCorrupt that names the file and the offset.
//   - A new segment is written under "segment.tmp" (allocated, synced,
//     its checkpoint and first record written and synced), then renamed
//     into place and the folder synced; a crash before the rename leaves
//     the temporary file, which Open removes, and the store as it was.
//   - Dead segments are removed oldest first, each removal synced before
//     the next, after the compaction record that kills them is durable. A
//     crash leaves some of them, which the next compaction removes.
//   - A segment shorter than the size its checkpoint names, a gap in the
//     numbering, a checkpoint that differs from the state before it, an
//     entry missing from the range the records describe: each is damage,
//     reported, never repaired.
//
// TestWALPowerLoss builds the images a power loss can leave at every
// commit (any subset of the sectors written since the last sync, torn at a
// sector, a renamed segment there or not) and requires each to open with
// the state before or after the commit.
type WALStore struct {
	dir  string
	opts WALOptions
	lock *os.File

	wmu    sync.Mutex // serialises writers and owns buf and offs
	buf    []byte
	offs   []int
	failed error // set when a write or sync failed; guarded by wmu
	tail   int64 // where the next record goes in the newest segment; guarded by wmu

	mu       sync.RWMutex // guards what follows, for readers
	closed   bool
	salt     [walSaltSize]byte
	b        bounds
	locs     []walLoc // locs[i] is where entry b.first+i is
	segments []*walSegment
	stable   map[string][]byte

	fsyncs     atomic.Uint64
	fsyncTime  atomic.Int64
	fsyncMax   atomic.Int64
	pageWrites atomic.Uint64
	tornBytes  int64
}

// walSegment is an open segment file.
type walSegment struct {
	seq  uint64
	path string
	f    *os.File
	size int64
}

// walLoc is where an entry's encoding is: its segment, offset and length
// (the entry's CRC follows it).
type walLoc struct {
	seg *walSegment
	off int64
	n   uint32
}

// WALOptions tunes a WALStore. The zero value is the recommended setting.
type WALOptions struct {
	// SegmentSize is the size a segment is created at. 0 means 64 MiB.
	// A record larger than it gets a segment of its own, as large as it.
	SegmentSize int64
	// Timeout bounds the wait for the folder's lock another process holds;
	// the open then fails instead of hanging. 0 means 2 seconds.
	Timeout time.Duration
	// Logger receives a warning when Open clears a write a crash cut
	// short. nil means slog.Default().
	Logger *slog.Logger
}

func (o WALOptions) withDefaults() WALOptions {
	if o.SegmentSize <= 0 {
		o.SegmentSize = 64 << 20
	}
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

const (
	walLockName  = "LOCK"
	walTempName  = "segment.tmp"
	walSuffix    = ".wal"
	walMaxRecord = 1 << 40
)

func walSegmentName(seq uint64) string { return fmt.Sprintf("%016x%s", seq, walSuffix) }

// Path returns the store's folder.
func (s *WALStore) Path() string { return s.dir }

// Close implements LogStore. It waits for a running write.
func (s *WALStore) Close() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	s.closed = true
	var errs []error
	for _, seg := range s.segments {
		if err := seg.f.Close(); err != nil {
			errs = append(errs, fmt.Errorf("storage: %s: close: %w", seg.path, err))
		}
	}
	s.segments, s.locs, s.stable = nil, nil, nil
	unlock(s.lock)
	s.lock.Close()
	return errors.Join(errs...)
}

// Stats describes the store. FileSize is the total size of its segments;
// PageWrites counts the 4 KiB blocks its writes touched.
func (s *WALStore) Stats() (Stats, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return Stats{}, ErrClosed
	}
	var size int64
	for _, seg := range s.segments {
		size += seg.size
	}
	return Stats{
		Path:       s.dir,
		FileSize:   size,
		FirstIndex: s.b.first,
		LastIndex:  s.b.last,
		Entries:    s.b.count(),
		Fsyncs:     s.fsyncs.Load(),
		FsyncTime:  time.Duration(s.fsyncTime.Load()),
		FsyncMax:   time.Duration(s.fsyncMax.Load()),
		PageWrites: s.pageWrites.Load(),
		TornBytes:  s.tornBytes,
	}, nil
}

func (s *WALStore) bounds() (bounds, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return bounds{}, ErrClosed
	}
	return s.b, nil
}

// FirstIndex implements LogStore.
func (s *WALStore) FirstIndex() (uint64, error) {
	b, err := s.bounds()
	return b.first, err
}

// LastIndex implements LogStore.
func (s *WALStore) LastIndex() (uint64, error) {
	b, err := s.bounds()
	return b.last, err
}

// Last implements LogStore.
func (s *WALStore) Last() (wire.Position, error) {
	b, err := s.bounds()
	return b.position(), err
}

// segmentPath is the path of segment seq.
func (s *WALStore) segmentPath(seq uint64) string {
	return filepath.Join(s.dir, walSegmentName(seq))
}

func (s *WALStore) errf(err error, format string, args ...any) error {
	return fmt.Errorf("storage: %s: %s: %w", s.dir, fmt.Sprintf(format, args...), err)
}
