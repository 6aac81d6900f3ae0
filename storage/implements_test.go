package storage_test

import (
	"github.com/edictlog/edictlog/log"
	"github.com/edictlog/edictlog/storage"
)

// The log declares what it needs of a store where it consumes it; these
// are the stores package storage offers for it.
var (
	_ log.Store         = (*storage.BoltStore)(nil)
	_ log.Store         = (*storage.MemStore)(nil)
	_ log.SnapshotStore = (*storage.FileSnapshotStore)(nil)
	_ log.SnapshotStore = (*storage.MemSnapshotStore)(nil)
)
