package mvcc

import (
	"fmt"
	"io"
	"sync"

	"github.com/edictlog/edictlog/cmd/edictkv/internal/mvcc/backend"
)

// Snapshot is a consistent copy of the whole store being streamed: the
// backend's committed state after a forced commit, read through a backend
// view, so writes go on while it is written. Close it when done: a bbolt
// view kept open holds pages that commits cannot reuse.
type Snapshot struct {
	tx    backend.ReadTx
	index uint64
	rev   int64
}

// Snapshot commits what is pending and captures the result. It waits for a
// write transaction in progress to end.
func (s *Store) Snapshot() (*Snapshot, error) {
	s.wmu.Lock()
	if s.closed {
		s.wmu.Unlock()
		return nil, ErrClosed
	}
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	l := s.sealLocked()
	rev, index := s.Rev(), s.ConsistentIndex()
	s.wmu.Unlock()
	if err := s.commitLayer(l); err != nil {
		return nil, err
	}
	if err := s.failure(); err != nil {
		return nil, err
	}
	tx, err := s.be.Begin()
	if err != nil {
		return nil, fmt.Errorf("mvcc: snapshot: %w", err)
	}
	return &Snapshot{tx: tx, index: index, rev: rev}, nil
}

// Index is the consistent index of the captured state.
func (sn *Snapshot) Index() uint64 { return sn.index }

// Rev is the store's revision in the captured state.
func (sn *Snapshot) Rev() int64 { return sn.rev }

// Size is the number of bytes WriteTo writes.
func (sn *Snapshot) Size() int64 { return sn.tx.Size() }

// WriteTo streams the captured state in the backend's own form (for Bolt,
// the bbolt file followed by a trailer holding its length and CRC-32C),
// which Restore on a store with the same kind of backend reads.
func (sn *Snapshot) WriteTo(w io.Writer) (int64, error) {
	n, err := sn.tx.WriteTo(w)
	if err != nil {
		return n, fmt.Errorf("mvcc: snapshot: %w", err)
	}
	return n, nil
}

// Close releases the captured state. It is safe to call more than once.
func (sn *Snapshot) Close() { sn.tx.Release() }

// Restore replaces the whole store with a snapshot streamed by
// Snapshot.WriteTo, read to its end. The backend builds the new database
// beside the current one (for Bolt: a temporary file, fsynced and checked
// page by page); the store then checks it as Open does (buckets, meta,
// every key-bucket entry) and rebuilds its index from it, and only then
// installs it (for Bolt: renamed over the file, directory fsynced) and
// swaps its state. Afterwards the consistent index and revisions are the
// snapshot's, and changes pending before are gone (the snapshot
// supersedes them). Every watcher continues from its next revision on the
// new history (see the package documentation, "Watches"). On any error
// the store is as it was, and usable.
//
// Reads in progress finish on the old state; Restore waits for them only
// at the swap. It waits for a write transaction in progress to end.
func (s *Store) Restore(r io.Reader) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed {
		return ErrClosed
	}
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	rs, err := s.be.Restore(r)
	if err != nil {
		return fmt.Errorf("mvcc: restore: %w", err)
	}
	st, err := s.loadRestored(rs, nil)
	if err != nil {
		rs.Discard()
		return fmt.Errorf("mvcc: restore: %w", err)
	}
	if err := s.swapIn(rs, st); err != nil {
		return fmt.Errorf("mvcc: restore: %w", err)
	}
	return nil
}

// stagedState is what Stage loaded and checked, for InstallStaged.
type stagedState struct {
	mu    sync.Mutex
	st    *loaded
	index uint64
}

// Stage reads a snapshot stream to its end as Restore does, and checks
// the database it carries as Restore does, and that its consistent index
// is index, and with check (if not nil) the application's records in
// it; then the backend keeps it staged (for Bolt: renamed to the staged
// file, directory fsynced), durably, beside the current state, in place
// of what was staged before, and the store keeps the index it rebuilt,
// for InstallStaged. Nothing else changes: Stage takes none of the
// store's locks, and runs while writes, reads and commits go on. On error
// nothing is staged.
func (s *Store) Stage(index uint64, r io.Reader, check func(*RecordView) error) error {
	s.staged.mu.Lock()
	defer s.staged.mu.Unlock()
	s.staged.st = nil
	if err := s.be.DiscardStaged(); err != nil {
		return fmt.Errorf("mvcc: stage: %w", err)
	}
	rs, err := s.be.Restore(r)
	if err != nil {
		return fmt.Errorf("mvcc: stage: %w", err)
	}
	st, err := s.loadRestored(rs, check)
	if err == nil && st.index != index {
		err = fmt.Errorf("%w: the snapshot's consistent index is %d, not %d", ErrCorrupt, st.index, index)
	}
	if err == nil {
		err = rs.Stage()
	}
	if err != nil {
		rs.Discard()
		return fmt.Errorf("mvcc: stage: %w", err)
	}
	s.staged.st, s.staged.index = st, index
	return nil
}

// InstallStaged replaces the whole store with the database staged for
// index, as Restore installs one: staged by Stage in this life, or in an
// earlier one (then checked again, with check if not nil, and its index
// rebuilt). On error the store is as it was, and what is staged stays
// staged.
func (s *Store) InstallStaged(index uint64, check func(*RecordView) error) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed {
		return ErrClosed
	}
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	s.staged.mu.Lock()
	st := s.staged.st
	if s.staged.index != index {
		st = nil
	}
	s.staged.st = nil
	s.staged.mu.Unlock()
	rs, err := s.be.Staged()
	if err != nil {
		return fmt.Errorf("mvcc: install the database staged at %d: %w", index, err)
	}
	if st == nil {
		if st, err = s.loadRestored(rs, check); err != nil {
			return fmt.Errorf("mvcc: install the database staged at %d: %w", index, err)
		}
	}
	if st.index != index {
		return fmt.Errorf("mvcc: install the database staged at %d: %w: its consistent index is %d", index, ErrCorrupt, st.index)
	}
	if err := s.swapIn(rs, st); err != nil {
		return fmt.Errorf("mvcc: install the database staged at %d: %w", index, err)
	}
	return nil
}

// DiscardStaged removes what is staged, if anything.
func (s *Store) DiscardStaged() error {
	s.staged.mu.Lock()
	defer s.staged.mu.Unlock()
	s.staged.st = nil
	if err := s.be.DiscardStaged(); err != nil {
		return fmt.Errorf("mvcc: discard what is staged: %w", err)
	}
	return nil
}

// loadRestored checks a restored database as Open checks one, and with
// check the application's records in it, and returns its state.
func (s *Store) loadRestored(rs backend.Restored, check func(*RecordView) error) (*loaded, error) {
	tx, err := rs.Begin()
	if err != nil {
		return nil, err
	}
	defer tx.Release()
	st, err := load(tx)
	if err == nil && st.fresh {
		err = fmt.Errorf("%w: the snapshot holds none of the store's buckets", ErrCorrupt)
	}
	if err == nil && check != nil {
		err = check(&RecordView{v: &view{s: s, open: newLayer(), tx: tx}})
	}
	if err != nil {
		return nil, fmt.Errorf("the snapshot is not a valid store: %w", err)
	}
	return st, nil
}

// swapIn installs rs and makes st the store's state. The caller holds
// wmu and commitMu.
func (s *Store) swapIn(rs backend.Restored, st *loaded) error {
	s.compactMu.Lock()
	defer s.compactMu.Unlock()
	if err := rs.Install(); err != nil {
		return err
	}
	old := s.job
	s.bufMu.Lock()
	s.open, s.sealed = newLayer(), nil
	s.bufMu.Unlock()
	s.revMu.Lock()
	s.install(st)
	s.revMu.Unlock()
	s.watch.restored(st.currentRev)
	s.failMu.Lock()
	s.failed = nil
	s.failMu.Unlock()
	if old != nil {
		for _, ch := range old.waiters {
			close(ch)
		}
	}
	if s.job != nil {
		s.kickCompactor()
	}
	return nil
}
