package replog

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

// stagedData is the data of a snapshot installed from a leader into a
// state machine that staged it in its own store (fsm.StagingFSM): like
// metaOnlyData, it holds no copy of the state, but the state machine may
// not hold the snapshot's state yet — a crash may have come between the
// record and InstallStaged — and a start then has it install what it
// staged. Its length differs from metaOnlyData's, so that a size tells
// either from a copy of a state.
var stagedData = []byte("edictlog: no state here; the state machine staged it in its own store (fsm.StagingFSM)\n")

// snapshotKind is what a stored snapshot holds.
type snapshotKind int

const (
	// snapshotCopy: a copy of the state (Persist's stream).
	snapshotCopy snapshotKind = iota
	// snapshotSynced: no copy; the state machine made the snapshot's
	// index durable before it was recorded (SaveMetaOnlySnapshot).
	snapshotSynced
	// snapshotStaged: no copy; the state machine staged the snapshot's
	// state before it was recorded (SaveStagedSnapshot).
	snapshotStaged
)

// SaveMetaOnlySnapshot records in store a snapshot at meta's index that
// holds no copy of the state: the state machine keeps its own, durable at
// meta.Index or beyond (what fsm.DiskFSM.Sync returned). It returns the
// snapshot's ID once the snapshot is durable.
func SaveMetaOnlySnapshot(store SnapshotStore, meta wire.SnapshotMeta) (string, error) {
	return saveMarker(store, meta, metaOnlyData)
}

// SaveStagedSnapshot records in store a snapshot at meta's index that
// holds no copy of the state: the state machine (an fsm.StagingFSM) has
// staged it, durably (StageSnapshot), and installs it next. It returns
// the snapshot's ID once the snapshot is durable. A start that finds the
// state machine below meta.Index has it install what it staged.
func SaveStagedSnapshot(store SnapshotStore, meta wire.SnapshotMeta) (string, error) {
	return saveMarker(store, meta, stagedData)
}

func saveMarker(store SnapshotStore, meta wire.SnapshotMeta, data []byte) (string, error) {
	if len(meta.Config.Members) == 0 {
		return "", fmt.Errorf("edictlog: snapshot at %d: no membership known yet", meta.Index)
	}
	sink, err := store.Create(meta)
	if err != nil {
		return "", fmt.Errorf("edictlog: create snapshot at %d: %w", meta.Index, err)
	}
	if _, err := sink.Write(data); err != nil {
		_ = sink.Cancel()
		return "", fmt.Errorf("edictlog: write snapshot at %d: %w", meta.Index, err)
	}
	if err := sink.Close(); err != nil {
		return "", fmt.Errorf("edictlog: finish snapshot at %d: %w", meta.Index, err)
	}
	return sink.ID(), nil
}

// IsMetaOnlySnapshot reports whether the snapshot m of store holds no copy
// of the state (SaveMetaOnlySnapshot, SaveStagedSnapshot). Only a snapshot
// of one of their sizes is opened and read, through the store's digest
// check.
func IsMetaOnlySnapshot(store SnapshotStore, m wire.SnapshotMeta) (bool, error) {
	k, err := kindOf(store, m)
	return k != snapshotCopy, err
}

// kindOf tells what the snapshot m of store holds.
func kindOf(store SnapshotStore, m wire.SnapshotMeta) (snapshotKind, error) {
	var want []byte
	kind := snapshotCopy
	switch m.Size {
	case int64(len(metaOnlyData)):
		want, kind = metaOnlyData, snapshotSynced
	case int64(len(stagedData)):
		want, kind = stagedData, snapshotStaged
	default:
		return snapshotCopy, nil
	}
	_, rc, err := store.Open(m.ID)
	if err != nil {
		return snapshotCopy, fmt.Errorf("edictlog: open snapshot %s: %w", m.ID, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, int64(len(want))+1))
	if err == nil {
		// Read on to io.EOF: the store checks its digest there.
		_, err = io.Copy(io.Discard, rc)
	}
	if err != nil {
		return snapshotCopy, fmt.Errorf("edictlog: read snapshot %s: %w", m.ID, err)
	}
	if !bytes.Equal(data, want) {
		return snapshotCopy, nil
	}
	return kind, nil
}

// StageSnapshot stages r, the stream of a snapshot from a leader that ends
// at index, in f's own store (fsm.StagingFSM.Stage): checked, durable,
// not in use. Only then may the snapshot be recorded (SaveStagedSnapshot,
// as Driver.InstallSnapshot's publish step), and only after that may f
// install it (InstallStagedSnapshot), so that a crash anywhere leaves the
// old state and log, or the metadata recorded with the state staged or
// installed: never a state the log cannot describe. edictlog.Node and the
// simulator both install such snapshots through it.
func StageSnapshot(f fsm.StagingFSM, index uint64, r io.Reader) error {
	if err := f.Stage(index, r); err != nil {
		return fmt.Errorf("edictlog: stage the snapshot at %d in the state machine: %w", index, err)
	}
	if mutated(RuleRecordBeforeAdopt) {
		// The state machine takes the snapshot's state before the log
		// records the snapshot.
		return f.InstallStaged(index)
	}
	return nil
}

// InstallStagedSnapshot has f install the snapshot at index it staged
// (StageSnapshot), once the snapshot is recorded, and checks that f then
// reports index durable.
func InstallStagedSnapshot(f fsm.StagingFSM, index uint64) error {
	if mutated(RuleRecordBeforeAdopt) {
		if d, err := f.DurableIndex(); err == nil && d == index {
			return nil // installed by StageSnapshot
		}
	}
	if err := f.InstallStaged(index); err != nil {
		return fmt.Errorf("edictlog: install the snapshot at %d the state machine staged: %w", index, err)
	}
	d, err := f.DurableIndex()
	if err != nil {
		return fmt.Errorf("edictlog: the state machine's durable index after installing the snapshot at %d: %w", index, err)
	}
	if d != index {
		return fmt.Errorf("edictlog: the state machine installed the snapshot it staged at %d and reports index %d durable", index, d)
	}
	return nil
}

// SyncState syncs f, a state machine that has applied up to applied, and
// returns the index up to which a snapshot may record it and the log be
// compacted: the index f reports durable. It is what keeps the log from
// being compacted past the state machine's durable state, which a crash
// would leave with entries neither in the state machine nor in the log.
// edictlog.Node and the simulator both take their snapshots of a DiskFSM
// through it.
func SyncState(f fsm.DiskFSM, applied uint64) (uint64, error) {
	if mutated(RuleCompactBehindDurable) {
		return applied, nil // what is applied, durable or not
	}
	d, err := f.Sync()
	if err != nil {
		return 0, fmt.Errorf("edictlog: sync the state machine: %w", err)
	}
	if d > applied {
		return 0, fmt.Errorf("edictlog: the state machine's Sync reports index %d durable, but only %d was applied", d, applied)
	}
	return d, nil
}
