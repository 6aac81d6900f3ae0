package storage

import (
	"time"

	"github.com/edictlog/edictlog/edict"
)

// Position names a log entry by index and stamp, as log matching does.
type Position struct {
	Index uint64
	Stamp edict.Stamp
}

// Batch is one atomic, durable change to a Store: what a follower persists
// before it acknowledges an append, with the stable state that must move with
// it. The steps apply in this order, all in one transaction:
//
//  1. Reset, if set, discards the whole log: it restarts empty after
//     Reset.Index, as after installing a snapshot that ends there.
//  2. TruncateFrom, if not 0, removes the entries with index ≥ TruncateFrom
//     (a conflicting suffix). It must lie in [FirstIndex, LastIndex+1].
//  3. Entries are appended; the first must have index LastIndex+1 (as left
//     by steps 1 and 2) and each next one the index after.
//  4. Stable keys are set and Delete keys removed.
//
// An empty batch is a no-op and costs no fsync.
type Batch struct {
	Reset        *Position
	TruncateFrom uint64
	Entries      []Entry
	Stable       map[string][]byte
	Delete       []string
}

func (b *Batch) empty() bool {
	return b.Reset == nil && b.TruncateFrom == 0 && len(b.Entries) == 0 && len(b.Stable) == 0 && len(b.Delete) == 0
}

// LogStore holds the log. Implementations are safe for concurrent use.
type LogStore interface {
	// StoreBatch applies b atomically and durably; see Batch. When it
	// returns an error nothing of b is applied.
	StoreBatch(b Batch) error
	// Entries returns the entries with lo ≤ index < hi, stopping before the
	// encoded sizes add up to more than maxBytes (but returning at least one
	// entry when lo < hi); maxBytes ≤ 0 means no limit. It returns
	// ErrCompacted when lo < FirstIndex and ErrUnavailable when
	// hi > LastIndex+1. The entries do not alias the store's memory.
	Entries(lo, hi uint64, maxBytes int) ([]Entry, error)
	// FirstIndex is the index of the first entry held, or LastIndex+1 when
	// the log is empty.
	FirstIndex() (uint64, error)
	// LastIndex is the index of the last entry held or, when the log is
	// empty, of the last entry compacted or reset away (0 for a new log).
	LastIndex() (uint64, error)
	// Last returns LastIndex and the stamp of that entry (kept across
	// compaction and reset, so log matching works on an empty log).
	Last() (Position, error)
	// CompactPrefix removes the entries with index ≤ upTo, which must not be
	// above LastIndex. Large compactions run as a series of small
	// transactions so that appends interleave with them.
	CompactPrefix(upTo uint64) error
	// Stats reports sizes and fsync counts.
	Stats() (Stats, error)
	// Close releases the store. Later calls return ErrClosed.
	Close() error
}

// StableStore holds the records the protocol must not forget. Values are
// opaque bytes; the typed helpers in records.go encode the well-known ones.
// Keys are non-empty strings of at most MaxKeySize bytes.
type StableStore interface {
	// Get returns the value of key, or an error wrapping ErrNotFound.
	Get(key string) ([]byte, error)
	// Set stores value under key durably.
	Set(key string, value []byte) error
	// Delete removes key durably; deleting a missing key is not an error.
	Delete(key string) error
	// Keys returns the keys that start with prefix, in byte order.
	Keys(prefix string) ([]string, error)
	// BumpIncarnation increments the incarnation (from 0 on a new store)
	// and stores it durably before returning the new value. A process calls
	// it on every start before it sends anything (DESIGN §3).
	BumpIncarnation() (uint64, error)
}

// Store is a log store and a stable store that share one transaction, so a
// Batch can change both atomically.
type Store interface {
	LogStore
	StableStore
}

// Stats describes a store.
type Stats struct {
	// Path is the file, or "" for an in-memory store.
	Path string
	// FileSize is the size of the file in bytes (0 in memory), including
	// the zero-filled space kept ahead of the used pages (prealloc.go).
	FileSize int64
	// FirstIndex, LastIndex and Entries describe the log held.
	FirstIndex, LastIndex, Entries uint64
	// Fsyncs counts durable commits: each StoreBatch, Set, Delete,
	// BumpIncarnation and compaction step that wrote something, each
	// ended by one fdatasync. Always 0 in memory.
	Fsyncs uint64
	// FsyncTime is the total time spent writing and syncing commits, as
	// bbolt measures it; FsyncMax the longest single commit write.
	FsyncTime, FsyncMax time.Duration
	// PageWrites counts the pages written by those commits (meta page
	// included): the I/O behind the fsyncs.
	PageWrites uint64
	// RolledBack is the bbolt transaction that Open found cut short by a
	// crash (its meta page on disk, some of its pages not) and rolled
	// back, or 0. That transaction was never acknowledged.
	RolledBack uint64
}

// FsyncMean is the mean write-and-sync time of a commit.
func (s Stats) FsyncMean() time.Duration {
	if s.Fsyncs == 0 {
		return 0
	}
	return s.FsyncTime / time.Duration(s.Fsyncs)
}
