package storage

import (
	"time"
)

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
	// TornBytes is the size of the record that Open of a WALStore found
	// cut short by a crash at the end of the log and cleared, or 0. That
	// record was never acknowledged.
	TornBytes int64
}

// FsyncMean is the mean write-and-sync time of a commit.
func (s Stats) FsyncMean() time.Duration {
	if s.Fsyncs == 0 {
		return 0
	}
	return s.FsyncTime / time.Duration(s.Fsyncs)
}
