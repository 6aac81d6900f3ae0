package replog

import (
	"io"

	"github.com/edictlog/edictlog/wire"
)

// The stores the log reads and writes: the interfaces of the embedder's
// package, declared again here because that package imports this one.
// They must keep the same methods (TestStoreInterfacesMatch in
// package edictlog).

// LogStore is edictlog.LogStore, which documents it.
type LogStore interface {
	StoreBatch(b wire.Batch) error
	Entries(lo, hi uint64, maxBytes int) ([]wire.Entry, error)
	FirstIndex() (uint64, error)
	LastIndex() (uint64, error)
	Last() (wire.Position, error)
	CompactPrefix(upTo uint64) error
}

// StableStore is edictlog.StableStore, which documents it.
type StableStore interface {
	Get(key string) ([]byte, error)
	Set(key string, value []byte) error
	Delete(key string) error
	Keys(prefix string) ([]string, error)
	BumpIncarnation() (uint64, error)
}

// Store is edictlog.Store, which documents it.
type Store interface {
	LogStore
	StableStore
}

// SnapshotStore is edictlog.SnapshotStore, which documents it.
type SnapshotStore interface {
	Create(meta wire.SnapshotMeta) (wire.SnapshotSink, error)
	List() ([]wire.SnapshotMeta, error)
	Open(id string) (wire.SnapshotMeta, io.ReadCloser, error)
}
