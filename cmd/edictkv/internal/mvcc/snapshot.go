package mvcc

import (
	"fmt"
	"io"

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
// supersedes them). On any error the store is as it was, and usable.
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
	tx, err := rs.Begin()
	if err != nil {
		rs.Discard()
		return fmt.Errorf("mvcc: restore: %w", err)
	}
	st, err := load(tx)
	tx.Release()
	if err == nil && st.fresh {
		err = fmt.Errorf("%w: the snapshot holds none of the store's buckets", ErrCorrupt)
	}
	if err != nil {
		rs.Discard()
		return fmt.Errorf("mvcc: restore: the snapshot is not a valid store: %w", err)
	}

	s.compactMu.Lock()
	defer s.compactMu.Unlock()
	if err := rs.Install(); err != nil {
		return fmt.Errorf("mvcc: restore: %w", err)
	}
	old := s.job
	s.bufMu.Lock()
	s.open, s.sealed = newLayer(), nil
	s.bufMu.Unlock()
	s.revMu.Lock()
	s.install(st)
	s.revMu.Unlock()
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
