package log

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/storage"
)

// loadState reads what the stores remember. On a first start (no epoch
// known) it bootstraps epoch 0 from Config.Peers — without this process
// if it joins a running cluster (Config.Join) — and stores it.
func loadState(cfg Config) (State, map[edict.ProcessID]string, error) {
	var st State
	s := cfg.Store
	keys, err := s.Keys(storage.EpochKeyPrefix)
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
			ec, err := storage.DecodeEpochConfig(k, b)
			if err != nil {
				return st, nil, err
			}
			st.Epochs = append(st.Epochs, ec)
		case strings.HasSuffix(k, "/wedge"):
			b, err := s.Get(k)
			if err != nil {
				return st, nil, err
			}
			r, err := DecodeEpochRecord(k, b)
			if err != nil {
				return st, nil, err
			}
			st.Records = append(st.Records, r)
		}
	}
	if len(st.Epochs) == 0 {
		if len(cfg.Peers) == 0 {
			return st, nil, errors.New("log: a first start needs Config.Peers (the bootstrap members)")
		}
		members := slices.Sorted(func(yield func(edict.ProcessID) bool) {
			for id := range cfg.Peers {
				if cfg.Join && id == cfg.ID {
					continue
				}
				if !yield(id) {
					return
				}
			}
		})
		ec := storage.EpochConfig{Epoch: 0, Members: members}
		if err := storage.SetEpochConfig(s, ec); err != nil {
			return st, nil, fmt.Errorf("log: bootstrap: %w", err)
		}
		st.Epochs = []storage.EpochConfig{ec}
	}
	st.AcceptedReign, err = storage.GetStamp(s, storage.KeyAcceptedReign)
	if err != nil && !errors.Is(err, storage.ErrNotFound) {
		return st, nil, err
	}
	peers := map[edict.ProcessID]string{}
	for id, addr := range cfg.Peers {
		peers[id] = addr
	}
	pk, err := s.Keys("peers/")
	if err != nil {
		return st, nil, err
	}
	for _, k := range pk {
		id, err := strconv.ParseUint(strings.TrimPrefix(k, "peers/"), 16, 64)
		if err != nil {
			return st, nil, fmt.Errorf("log: stable key %q: %w", k, err)
		}
		b, err := s.Get(k)
		if err != nil {
			return st, nil, err
		}
		peers[edict.ProcessID(id)] = string(b)
	}
	return st, peers, nil
}

// restoreSnapshot restores the newest snapshot into the FSM and loads the
// log entries after it. A damaged snapshot is an error naming it, never a
// silent start from an older state.
func restoreSnapshot(cfg Config, st *State) (uint64, error) {
	metas, err := cfg.Snapshots.List()
	if err != nil {
		return 0, fmt.Errorf("log: list snapshots: %w", err)
	}
	if len(metas) > 0 {
		m := metas[0]
		_, rc, err := cfg.Snapshots.Open(m.ID)
		if err != nil {
			return 0, fmt.Errorf("log: open snapshot %s: %w", m.ID, err)
		}
		err = cfg.FSM.Restore(rc)
		rc.Close()
		if err != nil {
			return 0, fmt.Errorf("log: restore snapshot %s (index %d): %w", m.ID, m.Index, err)
		}
		st.Snapshot = storage.Position{Index: m.Index, Stamp: m.Stamp}
	}
	first, err := cfg.Store.FirstIndex()
	if err != nil {
		return 0, err
	}
	last, err := cfg.Store.LastIndex()
	if err != nil {
		return 0, err
	}
	snap := st.Snapshot.Index
	switch {
	case last < snap:
		// The store is behind the snapshot (a crash after installing it):
		// start the log over at the snapshot.
		pos := st.Snapshot
		if err := cfg.Store.StoreBatch(storage.Batch{Reset: &pos}); err != nil {
			return 0, fmt.Errorf("log: reset the log to snapshot %d: %w", snap, err)
		}
	case first > snap+1 && last >= first:
		return 0, fmt.Errorf("log: the log store starts at index %d but the newest snapshot ends at %d: entries %d..%d are missing", first, snap, snap+1, first-1)
	case last > snap:
		es, err := cfg.Store.Entries(max(first, snap+1), last+1, 0)
		if err != nil {
			return 0, fmt.Errorf("log: load entries: %w", err)
		}
		st.Entries = es
		if snap == 0 && first > 1 {
			return 0, fmt.Errorf("log: the log store starts at index %d with no snapshot", first)
		}
		if snap > 0 && first <= snap {
			// Entries the snapshot covers: their stamp at snap anchors log
			// matching.
			if pre, err := cfg.Store.Entries(snap, snap+1, 0); err == nil && len(pre) == 1 && !pre[0].Stamp.Equal(st.Snapshot.Stamp) {
				return 0, fmt.Errorf("log: entry %d in the store does not match the snapshot's stamp", snap)
			}
		}
	}
	return snap, nil
}
