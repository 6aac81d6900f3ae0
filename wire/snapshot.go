package wire

import (
	"io"
	"time"

	"github.com/edictlog/edictlog/edict"
)

// SnapshotMeta describes a snapshot of the FSM taken after applying the log
// up to Index.
type SnapshotMeta struct {
	// ID names the snapshot in its store; Create assigns it.
	ID string
	// Index is the last log index the snapshot includes; Reign and Stamp
	// are that entry's, so the log can be matched against the snapshot
	// after the entries are compacted.
	Index uint64
	Reign edict.Stamp
	Stamp edict.Stamp
	// Config is the epoch configuration in force at Index.
	Config EpochConfig
	// Addrs are the transport addresses of Config's processes that came
	// with a snapshot installed from a leader (SnapshotHeader.Addrs):
	// stored with it, so that a restart after the install still knows
	// how to reach the processes added by the config edicts it spans.
	Addrs map[edict.ProcessID]string
	// Size and SHA256 describe the data; Close fills them.
	Size   int64
	SHA256 []byte
	// Created is when Create was called.
	Created time.Time
}

// SnapshotSink receives the data of a snapshot being created. Close makes
// the snapshot durable and visible, Cancel discards it; either may be called
// once, and nothing is visible in List before Close returns nil. It is
// declared here rather than beside edictlog.SnapshotStore so that a store's
// Create can name it without importing the log.
type SnapshotSink interface {
	io.Writer
	ID() string
	Close() error
	Cancel() error
}
