package log

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/edictlog/edictlog/edict"
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
	// Applied is the index of the snapshot the state machine was restored
	// to (0 without one).
	Applied uint64
}

// Recover prepares a start from the stores, in the order safety needs.
// First the incarnation is bumped durably, so that every reading of this
// life is above every earlier life's (DESIGN §3; the restart quarantine
// keys on it too): the caller must send nothing before Recover returns.
// Then the epochs, lease records and accepted reign are loaded — on a
// first start (no epoch known) epoch 0 is bootstrapped from peers, without
// id if it joins a running cluster, and stored — and the newest snapshot
// is restored into the state machine through restore, and the log after
// it loaded. A damaged snapshot or a gap between it and the log is an
// error naming it, never a silent start from an older state. log.Node and
// the simulator both start this way.
func Recover(id edict.ProcessID, store Store, snaps SnapshotStore, restore func(io.Reader) error,
	peers map[edict.ProcessID]string, join bool) (Recovery, error) {
	inc, err := store.BumpIncarnation()
	if err != nil {
		return Recovery{}, fmt.Errorf("log: bump incarnation: %w", err)
	}
	if mutated(RuleIncarnationBump) {
		inc = 1 // every life reads as the first: no quarantine, readings may repeat
	}
	st, known, err := loadState(id, store, peers, join)
	if err != nil {
		return Recovery{}, err
	}
	applied, snapAddrs, err := restoreSnapshot(store, snaps, restore, &st)
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
	return Recovery{State: st, Peers: known, Incarnation: inc, Applied: applied}, nil
}

// loadState reads what the stores remember, bootstrapping on a first
// start (see Recover).
func loadState(id edict.ProcessID, s Store, bootstrap map[edict.ProcessID]string, join bool) (State, map[edict.ProcessID]string, error) {
	var st State
	keys, err := s.Keys(wire.EpochKeyPrefix)
	if err != nil {
		return st, nil, fmt.Errorf("log: list epochs: %w", err)
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
			return st, nil, errors.New("log: a first start needs Config.Peers (the bootstrap members)")
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
			return st, nil, fmt.Errorf("log: bootstrap: %w", err)
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
			return st, nil, fmt.Errorf("log: stable key %q: %w", k, err)
		}
		b, err := s.Get(k)
		if err != nil {
			return st, nil, err
		}
		peers[edict.ProcessID(p)] = string(b)
	}
	return st, peers, nil
}

// restoreSnapshot restores the newest snapshot into the FSM and loads the
// log entries after it. A damaged snapshot is an error naming it, never a
// silent start from an older state. A snapshot installed from a leader
// whose records a crash kept from the store is completed here (the log
// reset, the accepted reign) and in NewCore (its epoch configuration).
// It returns the snapshot's index and the addresses it carries.
func restoreSnapshot(store LogStore, snaps SnapshotStore, restore func(io.Reader) error, st *State) (uint64, map[edict.ProcessID]string, error) {
	metas, err := snaps.List()
	if err != nil {
		return 0, nil, fmt.Errorf("log: list snapshots: %w", err)
	}
	var m wire.SnapshotMeta
	if len(metas) > 0 {
		m = metas[0]
		_, rc, err := snaps.Open(m.ID)
		if err != nil {
			return 0, nil, fmt.Errorf("log: open snapshot %s: %w", m.ID, err)
		}
		err = restore(rc)
		rc.Close()
		if err != nil {
			return 0, nil, fmt.Errorf("log: restore snapshot %s (index %d): %w", m.ID, m.Index, err)
		}
		st.Snapshot = wire.Position{Index: m.Index, Stamp: m.Stamp}
		st.SnapshotConfig = m.Config
	}
	first, err := store.FirstIndex()
	if err != nil {
		return 0, nil, err
	}
	last, err := store.LastIndex()
	if err != nil {
		return 0, nil, err
	}
	snap := st.Snapshot.Index
	reset := last < snap
	if !reset && snap > 0 && first <= snap && !mutated(RuleRecoverInstall) {
		pre, err := store.Entries(snap, snap+1, 0)
		if err != nil {
			return 0, nil, fmt.Errorf("log: load entry %d: %w", snap, err)
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
				return 0, nil, fmt.Errorf("log: snapshot %s: reign: %w", m.ID, err)
			}
			b.Stable = map[string][]byte{wire.KeyAcceptedReign: enc}
			st.AcceptedReign = m.Reign
		}
		if err := store.StoreBatch(b); err != nil {
			return 0, nil, fmt.Errorf("log: reset the log to snapshot %d: %w", snap, err)
		}
	case first > snap+1 && last >= first:
		return 0, nil, fmt.Errorf("log: the log store starts at index %d but the newest snapshot ends at %d: entries %d..%d are missing", first, snap, snap+1, first-1)
	case last > snap:
		es, err := store.Entries(max(first, snap+1), last+1, 0)
		if err != nil {
			return 0, nil, fmt.Errorf("log: load entries: %w", err)
		}
		st.Entries = es
		if snap == 0 && first > 1 {
			return 0, nil, fmt.Errorf("log: the log store starts at index %d with no snapshot", first)
		}
		if snap > 0 && first <= snap && mutated(RuleRecoverInstall) {
			if pre, err := store.Entries(snap, snap+1, 0); err == nil && len(pre) == 1 && !pre[0].Stamp.Equal(st.Snapshot.Stamp) {
				return 0, nil, fmt.Errorf("log: entry %d in the store does not match the snapshot's stamp", snap)
			}
		}
	}
	return snap, m.Addrs, nil
}
