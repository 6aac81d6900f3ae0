package replog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/fsm"
	"github.com/edictlog/edictlog/wire"
)

// Recovery is what a process starts from: what its stores remember, and
// the state machine restored to the newest snapshot.
type Recovery struct {
	State State
	// Peers are the transport addresses known: the bootstrap ones, those
	// the log taught (stored under peers/), and those the newest snapshot
	// carries for processes neither names.
	Peers map[edict.ProcessID]string
	// Incarnation is this life's, already stored.
	Incarnation uint64
	// Applied is the index of the last entry the state machine holds: the
	// snapshot it was restored to (0 without one) or, for one that keeps
	// its own state (RecoverDiskFSM), the index its store is durable at,
	// if that is no lower. State.Applied is the same. The log hands it
	// the entries after it only.
	Applied uint64
	// AppliedEntry is the position of the entry at Applied (its Index,
	// Reign and Stamp; no Data), for the metadata of a snapshot taken
	// before the next entry is applied: from the snapshot, or from the
	// log. Zero when Applied is.
	AppliedEntry wire.Entry
}

// Recover prepares a start from the stores, in the order safety needs.
// First the incarnation is bumped durably, so that every reading of this
// life is above every earlier life's (docs/protocol.md, "Clocks"; the restart quarantine
// keys on it too): the caller must send nothing before Recover returns.
// A clean-stop record left by the life just before (Core.Retire) lets
// this one start without the quarantine (State.CleanStop); the bump is
// what clears it, in the same write, for the record names the life that
// wrote it.
// Then the epochs, lease records and accepted reign are loaded — on a
// first start (no epoch known) epoch 0 is bootstrapped from peers, without
// id if it joins a running cluster, and stored — and the newest snapshot
// is restored into the state machine through restore, and the log after
// it loaded. A damaged snapshot or a gap between it and the log is an
// error naming it, never a silent start from an older state. edictlog.Node and
// the simulator both start this way.
func Recover(id edict.ProcessID, store Store, snaps SnapshotStore, restore func(io.Reader) error,
	peers map[edict.ProcessID]string, join bool) (Recovery, error) {
	return recoverWith(id, store, snaps, stateMachine{restore: func(r io.Reader) error {
		return RestoreChecked(context.Background(), restore, r)
	}}, peers, join)
}

// RecoverDiskFSM is Recover for a state machine that keeps its own state
// (fsm.DiskFSM): its durable index d is read first, and the newest
// snapshot is restored into it only if d is below the snapshot's index —
// which is then one that holds a copy of the state: installed from a
// leader, or one this process copied for a peer. Otherwise nothing is
// restored, and the Core starts at d (State.Applied): the entries up to d
// were applied, so they are committed, and only those after it are handed
// to the state machine. A d the log's store cannot account for — beyond
// its last entry, or above a snapshot the log must reset to — is an error
// naming both: it is impossible unless one of the stores lost what it
// had made durable.
//
// A state machine that stages the snapshots it is sent (fsm.StagingFSM)
// below a snapshot recorded as staged is made to install what it staged
// (InstallStagedSnapshot), and what it holds staged otherwise — a
// snapshot staged but never recorded, by a crash or a refusal — is
// discarded.
func RecoverDiskFSM(id edict.ProcessID, store Store, snaps SnapshotStore, f fsm.DiskFSM,
	peers map[edict.ProcessID]string, join bool) (Recovery, error) {
	sm := stateMachine{restore: func(r io.Reader) error { return RestoreChecked(context.Background(), f.Restore, r) }, disk: f}
	sm.stager, _ = f.(fsm.StagingFSM)
	return recoverWith(id, store, snaps, sm, peers, join)
}

// RecoverFSM is Recover for any state machine, as a Node starts: one
// that keeps its own state (fsm.DiskFSM) is brought up as RecoverDiskFSM
// does, and every read of a snapshot's stream ends when ctx does.
func RecoverFSM(ctx context.Context, id edict.ProcessID, store Store, snaps SnapshotStore, f fsm.FSM,
	peers map[edict.ProcessID]string, join bool) (Recovery, error) {
	sm := stateMachine{ctx: ctx, restore: func(r io.Reader) error { return RestoreChecked(ctx, f.Restore, r) }}
	if d, ok := f.(fsm.DiskFSM); ok {
		sm.disk = d
		sm.stager, _ = d.(fsm.StagingFSM)
	}
	return recoverWith(id, store, snaps, sm, peers, join)
}

// stateMachine is how Recover brings the state machine up: restore for
// either kind, disk for one that keeps its own state, and stager for one
// of those that stages the snapshots it is sent.
type stateMachine struct {
	// ctx bounds the reads of a snapshot's stream (Start's context); nil
	// for none.
	ctx     context.Context
	restore func(io.Reader) error
	disk    fsm.DiskFSM
	stager  fsm.StagingFSM
}

func recoverWith(id edict.ProcessID, store Store, snaps SnapshotStore, sm stateMachine,
	peers map[edict.ProcessID]string, join bool) (Recovery, error) {
	inc, err := store.BumpIncarnation()
	if err != nil {
		return Recovery{}, fmt.Errorf("edictlog: bump incarnation: %w", err)
	}
	if mutated(RuleIncarnationBump) {
		inc = 1 // every life reads as the first: no quarantine, readings may repeat
	}
	st, known, err := loadState(id, store, peers, join)
	if err != nil {
		return Recovery{}, err
	}
	if st.CleanStop, err = cleanStopBefore(store, inc); err != nil {
		return Recovery{}, err
	}
	applied, snapAddrs, err := restoreSnapshot(store, snaps, sm, &st)
	if err != nil {
		return Recovery{}, err
	}
	// A snapshot installed from a leader carries the addresses of the
	// processes added by the config edicts it spans, which the runtime
	// then stores under peers/; a crash in between leaves them only
	// here. They fill gaps: an address stored under peers/ was learned
	// later, and one given for this start is the embedder's word.
	for p, addr := range snapAddrs {
		if _, ok := known[p]; !ok && wire.CheckAddr(addr) == nil {
			known[p] = addr
		}
	}
	return Recovery{State: st, Peers: known, Incarnation: inc, Applied: applied.Index, AppliedEntry: applied}, nil
}

// loadState reads what the stores remember, bootstrapping on a first
// start (see Recover).
func loadState(id edict.ProcessID, s Store, bootstrap map[edict.ProcessID]string, join bool) (State, map[edict.ProcessID]string, error) {
	var st State
	keys, err := s.Keys(wire.EpochKeyPrefix)
	if err != nil {
		return st, nil, fmt.Errorf("edictlog: list epochs: %w", err)
	}
	for _, k := range keys {
		switch {
		case strings.HasSuffix(k, "/config"):
			b, err := s.Get(k)
			if err != nil {
				return st, nil, err
			}
			ec, err := wire.DecodeEpochConfig(k, b)
			if err != nil {
				return st, nil, err
			}
			st.Epochs = append(st.Epochs, ec)
		case strings.HasSuffix(k, "/wedge"):
			b, err := s.Get(k)
			if err != nil {
				return st, nil, err
			}
			r, err := wire.DecodeEpochRecord(k, b)
			if err != nil {
				return st, nil, err
			}
			st.Records = append(st.Records, r)
		}
	}
	if len(st.Epochs) == 0 {
		if len(bootstrap) == 0 {
			return st, nil, errors.New("edictlog: a first start needs Config.Peers (the bootstrap members)")
		}
		members := slices.Sorted(func(yield func(edict.ProcessID) bool) {
			for p := range bootstrap {
				if join && p == id {
					continue
				}
				if !yield(p) {
					return
				}
			}
		})
		ec := wire.EpochConfig{Epoch: 0, Members: members}
		b, err := wire.EncodeEpochConfig(ec)
		if err == nil {
			err = s.Set(wire.EpochConfigKey(ec.Epoch), b)
		}
		if err != nil {
			return st, nil, fmt.Errorf("edictlog: bootstrap: %w", err)
		}
		st.Epochs = []wire.EpochConfig{ec}
	}
	switch b, err := s.Get(wire.KeyAcceptedReign); {
	case errors.Is(err, wire.ErrNotFound):
	case err != nil:
		return st, nil, err
	default:
		if st.AcceptedReign, err = wire.DecodeStamp(wire.KeyAcceptedReign, b); err != nil {
			return st, nil, err
		}
	}
	peers := maps.Clone(bootstrap)
	if peers == nil {
		peers = map[edict.ProcessID]string{}
	}
	pk, err := s.Keys("peers/")
	if err != nil {
		return st, nil, err
	}
	for _, k := range pk {
		p, err := strconv.ParseUint(strings.TrimPrefix(k, "peers/"), 16, 64)
		if err != nil {
			return st, nil, fmt.Errorf("edictlog: stable key %q: %w", k, err)
		}
		b, err := s.Get(k)
		if err != nil {
			return st, nil, err
		}
		peers[edict.ProcessID(p)] = string(b)
	}
	return st, peers, nil
}

// restoreSnapshot restores the newest snapshot into the FSM (for a
// DiskFSM, only if its durable index is below the snapshot's) and loads
// the log entries after it. A damaged snapshot is an error naming it,
// never a silent start from an older state. A snapshot installed from a
// leader whose records a crash kept from the store is completed here (the
// log reset, the accepted reign) and in NewCore (its epoch configuration).
// It returns the position of the entry the state machine holds last and
// the addresses the snapshot carries.
func restoreSnapshot(store LogStore, snaps SnapshotStore, sm stateMachine, st *State) (wire.Entry, map[edict.ProcessID]string, error) {
	var durable uint64
	if sm.disk != nil {
		d, err := sm.disk.DurableIndex()
		if err != nil {
			return wire.Entry{}, nil, fmt.Errorf("edictlog: the state machine's durable index: %w", err)
		}
		durable = d
	}
	metas, err := snaps.List()
	if err != nil {
		return wire.Entry{}, nil, fmt.Errorf("edictlog: list snapshots: %w", err)
	}
	var m wire.SnapshotMeta
	if len(metas) > 0 {
		m = metas[0]
		kind, err := kindOf(snaps, m)
		if err != nil {
			return wire.Entry{}, nil, err
		}
		switch {
		case sm.disk == nil && kind != snapshotCopy:
			return wire.Entry{}, nil, fmt.Errorf("edictlog: snapshot %s (index %d) holds no copy of the state: it was recorded for a state machine that keeps its own (fsm.DiskFSM), and this one does not", m.ID, m.Index)
		case sm.disk != nil && durable >= m.Index:
			// The state machine holds the snapshot's state or a later one.
		case kind == snapshotSynced:
			return wire.Entry{}, nil, fmt.Errorf("edictlog: the state machine's store is durable up to index %d, but the newest snapshot %s was recorded at %d as durable there and holds no copy of the state: the state machine's store lost what it had made durable", durable, m.ID, m.Index)
		case kind == snapshotStaged && sm.stager == nil:
			return wire.Entry{}, nil, fmt.Errorf("edictlog: the newest snapshot %s (index %d) was staged in the state machine's own store (fsm.StagingFSM), and this state machine stages nothing", m.ID, m.Index)
		case kind == snapshotStaged:
			// Installed from a leader, and a crash came before the state
			// machine installed what it had staged.
			if err := InstallStagedSnapshot(sm.stager, m.Index); err != nil {
				return wire.Entry{}, nil, fmt.Errorf("edictlog: the newest snapshot %s was recorded at %d as staged in the state machine's store, which is durable up to %d: %w", m.ID, m.Index, durable, err)
			}
			durable = m.Index
		default:
			if err := restoreFrom(snaps, m, sm); err != nil {
				return wire.Entry{}, nil, err
			}
			durable = m.Index
		}
		st.Snapshot = wire.Position{Index: m.Index, Stamp: m.Stamp}
		st.SnapshotConfig = m.Config
	}
	if sm.stager != nil {
		// What is still staged was never recorded: a crash or a refusal
		// came between its Stage and the record.
		if err := sm.stager.DiscardStaged(); err != nil {
			return wire.Entry{}, nil, fmt.Errorf("edictlog: discard what the state machine staged and the log never recorded: %w", err)
		}
	}
	first, err := store.FirstIndex()
	if err != nil {
		return wire.Entry{}, nil, err
	}
	last, err := store.LastIndex()
	if err != nil {
		return wire.Entry{}, nil, err
	}
	snap := st.Snapshot.Index
	reset := last < snap
	if !reset && snap > 0 && first <= snap && !mutated(RuleRecoverInstall) {
		pre, err := store.Entries(snap, snap+1, 0)
		if err != nil {
			return wire.Entry{}, nil, fmt.Errorf("edictlog: load entry %d: %w", snap, err)
		}
		reset = len(pre) == 1 && !pre[0].Stamp.Equal(st.Snapshot.Stamp)
	}
	switch {
	case reset:
		// The snapshot was installed from a leader and the process stopped
		// before the batch that replaces its log was written: the store
		// is behind the snapshot, or holds another edict at its index
		// (and so, by log matching, nothing after it that follows the
		// snapshot). That batch is written now: the log starts over at
		// the snapshot, and the accepted reign is raised to the reign the
		// snapshot came from, as the install would have done. Nothing the
		// old log held above the snapshot can be committed: a committed
		// entry there would make the edict at the snapshot's index, which
		// the log holds under another stamp, committed too.
		pos := st.Snapshot
		b := wire.Batch{Reset: &pos}
		if cmp, err := m.Reign.Compare(st.AcceptedReign); err == nil && cmp > 0 {
			enc, err := wire.EncodeStamp(m.Reign)
			if err != nil {
				return wire.Entry{}, nil, fmt.Errorf("edictlog: snapshot %s: reign: %w", m.ID, err)
			}
			b.Stable = map[string][]byte{wire.KeyAcceptedReign: enc}
			st.AcceptedReign = m.Reign
		}
		if err := store.StoreBatch(b); err != nil {
			return wire.Entry{}, nil, fmt.Errorf("edictlog: reset the log to snapshot %d: %w", snap, err)
		}
	case first > snap+1 && last >= first:
		return wire.Entry{}, nil, fmt.Errorf("edictlog: the log store starts at index %d but the newest snapshot ends at %d: entries %d..%d are missing", first, snap, snap+1, first-1)
	case last > snap:
		es, err := store.Entries(max(first, snap+1), last+1, 0)
		if err != nil {
			return wire.Entry{}, nil, fmt.Errorf("edictlog: load entries: %w", err)
		}
		st.Entries = es
		if snap == 0 && first > 1 {
			return wire.Entry{}, nil, fmt.Errorf("edictlog: the log store starts at index %d with no snapshot", first)
		}
		if snap > 0 && first <= snap && mutated(RuleRecoverInstall) {
			if pre, err := store.Entries(snap, snap+1, 0); err == nil && len(pre) == 1 && !pre[0].Stamp.Equal(st.Snapshot.Stamp) {
				return wire.Entry{}, nil, fmt.Errorf("edictlog: entry %d in the store does not match the snapshot's stamp", snap)
			}
		}
	}
	at := wire.Entry{Index: snap, Reign: m.Reign, Stamp: m.Stamp}
	if durable > snap {
		// A state machine that keeps its own state, ahead of the
		// snapshot: it applied those entries from this log, which holds
		// them durably, and nothing but a reset (to an installed
		// snapshot ahead of everything applied) removes them.
		if reset || durable > last {
			end := last
			if reset {
				end = snap
			}
			return wire.Entry{}, nil, fmt.Errorf("edictlog: the state machine's store is durable up to index %d, but the log ends at %d: one of the stores lost what it had made durable", durable, end)
		}
		e := st.Entries[durable-snap-1]
		at = wire.Entry{Index: e.Index, Reign: e.Reign, Stamp: e.Stamp}
		st.Applied = durable
	}
	return at, m.Addrs, nil
}

// restoreFrom restores snapshot m into the state machine; a DiskFSM must
// then report the snapshot's index as durable.
func restoreFrom(snaps SnapshotStore, m wire.SnapshotMeta, sm stateMachine) error {
	if sm.disk != nil {
		// Its Restore is durable: checked after it, a damaged snapshot
		// would be its state at the next start all the same.
		ctx := sm.ctx
		if ctx == nil {
			ctx = context.Background()
		}
		if err := VerifySnapshot(ctx, func() (io.ReadCloser, error) {
			_, rc, err := snaps.Open(m.ID)
			return rc, err
		}); err != nil {
			return fmt.Errorf("edictlog: snapshot %s (index %d): %w", m.ID, m.Index, err)
		}
	}
	_, rc, err := snaps.Open(m.ID)
	if err != nil {
		return fmt.Errorf("edictlog: open snapshot %s: %w", m.ID, err)
	}
	err = sm.restore(rc)
	rc.Close()
	if err != nil {
		return fmt.Errorf("edictlog: restore snapshot %s (index %d): %w", m.ID, m.Index, err)
	}
	if sm.disk == nil {
		return nil
	}
	d, err := sm.disk.DurableIndex()
	if err != nil {
		return fmt.Errorf("edictlog: the state machine's durable index after restoring snapshot %s: %w", m.ID, err)
	}
	if d != m.Index {
		return fmt.Errorf("edictlog: the state machine restored snapshot %s of index %d reports index %d durable: the snapshot's data does not carry its index", m.ID, m.Index, d)
	}
	return nil
}
