package edictlog

import (
	"io"

	"github.com/edictlog/edictlog/wire"
)

// The interfaces below are what the log needs of its storage, declared
// where they are consumed (as hashicorp/raft declares LogStore and
// StableStore): package storage's BoltStore and MemStore implement Store,
// its FileSnapshotStore and MemSnapshotStore implement SnapshotStore, and
// storage/storagetest is the conformance suite any implementation must
// pass. The log needs nothing else of a store, so an embedder may bring its
// own.

// LogStore holds the log. Implementations are safe for concurrent use.
type LogStore interface {
	// StoreBatch applies b atomically and durably; see wire.Batch. When it
	// returns an error nothing of b is applied.
	StoreBatch(b wire.Batch) error
	// Entries returns the entries with lo ≤ index < hi, stopping before the
	// encoded sizes add up to more than maxBytes (but returning at least one
	// entry when lo < hi); maxBytes ≤ 0 means no limit. It returns an
	// error when lo < FirstIndex (compacted) or hi > LastIndex+1. The entries do not alias the store's memory.
	Entries(lo, hi uint64, maxBytes int) ([]wire.Entry, error)
	// FirstIndex is the index of the first entry held, or LastIndex+1 when
	// the log is empty.
	FirstIndex() (uint64, error)
	// LastIndex is the index of the last entry held or, when the log is
	// empty, of the last entry compacted or reset away (0 for a new log).
	LastIndex() (uint64, error)
	// Last returns LastIndex and the stamp of that entry (kept across
	// compaction and reset, so log matching works on an empty log).
	Last() (wire.Position, error)
	// CompactPrefix removes the entries with index ≤ upTo, which must not be
	// above LastIndex. Large compactions run as a series of small
	// transactions so that appends interleave with them.
	CompactPrefix(upTo uint64) error
}

// StableStore holds the records the protocol must not forget. Values are
// opaque bytes; package wire names the well-known keys and encodes their
// records. Keys are non-empty strings of at most 1 KiB.
type StableStore interface {
	// Get returns the value of key, or an error wrapping wire.ErrNotFound.
	Get(key string) ([]byte, error)
	// Set stores value under key durably.
	Set(key string, value []byte) error
	// Delete removes key durably; deleting a missing key is not an error.
	Delete(key string) error
	// Keys returns the keys that start with prefix, in byte order.
	Keys(prefix string) ([]string, error)
	// BumpIncarnation increments the incarnation (from 0 on a new store)
	// and stores it durably before returning the new value. A process calls
	// it on every start before it sends anything (docs/protocol.md, "Clocks").
	BumpIncarnation() (uint64, error)
}

// Store is a log store and a stable store that share one transaction, so a
// wire.Batch can change both atomically.
type Store interface {
	LogStore
	StableStore
}

// SnapshotStore keeps the newest snapshots, up to its retention count.
type SnapshotStore interface {
	// Create starts a snapshot; meta's Index, Reign, Stamp, Config and
	// Addrs are used, the other fields are filled in by the store.
	Create(meta wire.SnapshotMeta) (wire.SnapshotSink, error)
	// List returns the complete snapshots, newest (highest Index) first.
	// A snapshot whose metadata is damaged is an error, not left out.
	List() ([]wire.SnapshotMeta, error)
	// Open returns a snapshot's metadata and a reader of its data. The
	// reader checks the size and SHA-256 when it reaches the end and
	// returns an error naming the file instead of io.EOF if they are wrong:
	// a consumer must not act on the data before it has read io.EOF.
	Open(id string) (wire.SnapshotMeta, io.ReadCloser, error)
}
