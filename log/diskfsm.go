package log

import (
	"bytes"
	"fmt"
	"io"

	"github.com/edictlog/edictlog/fsm"
	"github.com/edictlog/edictlog/wire"
)

// A state machine that keeps its own state (fsm.DiskFSM) is not copied
// into the snapshot store every Config.SnapshotEvery entries: the log
// syncs it and records a snapshot that holds no copy of the state, only
// the metadata of the index the state machine made durable, and compacts
// its log behind that. Such a snapshot's data is metaOnlyData, which no
// state machine's Persist writes; its metadata is a snapshot's like any
// other (index, reign, stamp, epoch configuration), so everything that
// reads the snapshot store for metadata — Recover's log reset and epoch
// configuration among them — works as before, and only what reads the
// data tells the two apart (Recover, the snapshot sender).
var metaOnlyData = []byte("edictlog: no state here; the state machine keeps it (fsm.DiskFSM)\n")

// SaveMetaOnlySnapshot records in store a snapshot at meta's index that
// holds no copy of the state: the state machine keeps its own, durable at
// meta.Index or beyond (what fsm.DiskFSM.Sync returned). It returns the
// snapshot's ID once the snapshot is durable.
func SaveMetaOnlySnapshot(store SnapshotStore, meta wire.SnapshotMeta) (string, error) {
	if len(meta.Config.Members) == 0 {
		return "", fmt.Errorf("log: snapshot at %d: no membership known yet", meta.Index)
	}
	sink, err := store.Create(meta)
	if err != nil {
		return "", fmt.Errorf("log: create snapshot at %d: %w", meta.Index, err)
	}
	if _, err := sink.Write(metaOnlyData); err != nil {
		_ = sink.Cancel()
		return "", fmt.Errorf("log: write snapshot at %d: %w", meta.Index, err)
	}
	if err := sink.Close(); err != nil {
		return "", fmt.Errorf("log: finish snapshot at %d: %w", meta.Index, err)
	}
	return sink.ID(), nil
}

// IsMetaOnlySnapshot reports whether the snapshot m of store holds no copy
// of the state (SaveMetaOnlySnapshot). Only a snapshot of that size is
// opened and read, through the store's digest check.
func IsMetaOnlySnapshot(store SnapshotStore, m wire.SnapshotMeta) (bool, error) {
	if m.Size != int64(len(metaOnlyData)) {
		return false, nil
	}
	_, rc, err := store.Open(m.ID)
	if err != nil {
		return false, fmt.Errorf("log: open snapshot %s: %w", m.ID, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, int64(len(metaOnlyData))+1))
	if err == nil {
		// Read on to io.EOF: the store checks its digest there.
		_, err = io.Copy(io.Discard, rc)
	}
	if err != nil {
		return false, fmt.Errorf("log: read snapshot %s: %w", m.ID, err)
	}
	return bytes.Equal(data, metaOnlyData), nil
}

// SyncState syncs f, a state machine that has applied up to applied, and
// returns the index up to which a snapshot may record it and the log be
// compacted: the index f reports durable. It is what keeps the log from
// being compacted past the state machine's durable state, which a crash
// would leave with entries neither in the state machine nor in the log.
// log.Node and the simulator both take their snapshots of a DiskFSM
// through it.
func SyncState(f fsm.DiskFSM, applied uint64) (uint64, error) {
	if mutated(RuleCompactBehindDurable) {
		return applied, nil // what is applied, durable or not
	}
	d, err := f.Sync()
	if err != nil {
		return 0, fmt.Errorf("log: sync the state machine: %w", err)
	}
	if d > applied {
		return 0, fmt.Errorf("log: the state machine's Sync reports index %d durable, but only %d was applied", d, applied)
	}
	return d, nil
}
