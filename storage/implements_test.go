package storage_test

import (
	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/storage"
)

// The log declares what it needs of a store where it consumes it; these
// are the stores package storage offers for it.
var (
	_ edictlog.Store         = (*storage.BoltStore)(nil)
	_ edictlog.Store         = (*storage.MemStore)(nil)
	_ edictlog.SnapshotStore = (*storage.FileSnapshotStore)(nil)
	_ edictlog.SnapshotStore = (*storage.MemSnapshotStore)(nil)
)
