package mvcc

import (
	"context"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// TxnRead is a read-only view of the store at one revision, for several
// reads that must agree (a read-only etcd Txn: its compares and ranges).
// It holds off compaction and Restore until End: keep it short, and end it
// before calling Compact or Restore from the same goroutine. It is for one
// goroutine.
type TxnRead struct {
	s          *Store
	v          *view
	rev        int64
	compactRev int64
	ended      bool
}

// Read opens a read view at the current revision.
func (s *Store) Read() (*TxnRead, error) {
	s.compactMu.RLock()
	s.revMu.RLock()
	rev, compactRev := s.currentRev, s.compactRev
	s.revMu.RUnlock()
	v, err := s.newView()
	if err != nil {
		s.compactMu.RUnlock()
		return nil, fmt.Errorf("mvcc: read: %w", err)
	}
	return &TxnRead{s: s, v: v, rev: rev, compactRev: compactRev}, nil
}

// Rev is the store's revision when the view opened.
func (tr *TxnRead) Rev() int64 { return tr.rev }

// FirstRev is the compaction revision when the view opened (-1 before
// any): reads below it fail with ErrCompacted.
func (tr *TxnRead) FirstRev() int64 { return tr.compactRev }

// Range reads keys at o.Rev (0: the view's revision). See Store.Range.
func (tr *TxnRead) Range(ctx context.Context, key, end []byte, o RangeOptions) (*RangeResult, error) {
	if tr.ended {
		return nil, fmt.Errorf("mvcc: range on an ended read")
	}
	return tr.s.rangeKeys(ctx, tr.v, key, end, tr.rev, tr.compactRev, o)
}

// End releases the view. It is safe to call more than once.
func (tr *TxnRead) End() {
	if tr.ended {
		return
	}
	tr.ended = true
	tr.v.release()
	tr.s.compactMu.RUnlock()
}

// Range reads the keys in [key, end) at o.Rev (0: the current revision),
// as etcd's Range does, with every option applied while the index is
// walked; see RangeOptions. end nil (or empty) means key alone; end
// "\x00" means every key from key on. It is safe for concurrent use with
// everything else and never sees half a write transaction.
func (s *Store) Range(ctx context.Context, key, end []byte, o RangeOptions) (*RangeResult, error) {
	tr, err := s.Read()
	if err != nil {
		return nil, err
	}
	defer tr.End()
	return tr.Range(ctx, key, end, o)
}

// TxnWrite is a write transaction: all its changes get the revision
// Rev()+1 (sub revisions 0, 1, … in order), and become visible to readers
// together at End. Write transactions run one at a time; a TxnWrite is for
// one goroutine and must be ended. It cannot be rolled back: check what
// could fail (as etcd's apply checks a Txn) before changing anything.
type TxnWrite struct {
	s        *Store
	index    uint64
	beginRev int64
	changes  int64
	v        *view
	ended    bool
}

// Write opens the write transaction of the log entry at index, which must
// be above ConsistentIndex. It waits for the one in progress, if any.
func (s *Store) Write(index uint64) (*TxnWrite, error) {
	s.wmu.Lock()
	if err := s.writableLocked(index); err != nil {
		s.wmu.Unlock()
		return nil, err
	}
	return &TxnWrite{s: s, index: index, beginRev: s.Rev()}, nil
}

// Rev is the store's revision before the transaction; its changes get
// Rev()+1.
func (tw *TxnWrite) Rev() int64 { return tw.beginRev }

// Changes is the number of changes (puts and deleted keys) so far.
func (tw *TxnWrite) Changes() int { return int(tw.changes) }

// readRev is the revision the transaction reads at: its own changes
// included.
func (tw *TxnWrite) readRev() int64 {
	if tw.changes > 0 {
		return tw.beginRev + 1
	}
	return tw.beginRev
}

func (tw *TxnWrite) view() (*view, error) {
	if tw.v == nil {
		v, err := tw.s.newView()
		if err != nil {
			return nil, fmt.Errorf("mvcc: %w", err)
		}
		tw.v = v
	}
	return tw.v, nil
}

// Range reads as Store.Range does, seeing the transaction's own changes
// (as etcd's write transaction does): the revision it reads at, and
// reports, is Rev()+1 once the transaction has changed something.
func (tw *TxnWrite) Range(ctx context.Context, key, end []byte, o RangeOptions) (*RangeResult, error) {
	if tw.ended {
		return nil, fmt.Errorf("mvcc: range on an ended write")
	}
	v, err := tw.view()
	if err != nil {
		return nil, err
	}
	return tw.s.rangeKeys(ctx, v, key, end, tw.readRev(), tw.s.CompactRev(), o)
}

// PutOptions are a put's etcd flags.
type PutOptions struct {
	// PrevKV returns the key's value before the put.
	PrevKV bool
	// IgnoreValue keeps the key's current value; IgnoreLease its current
	// lease. Either fails with ErrKeyNotFound when the key does not exist.
	IgnoreValue bool
	IgnoreLease bool
}

// PutResult is what a put reports.
type PutResult struct {
	// Rev is the revision of the put (the transaction's).
	Rev int64
	// PrevKV is the key before the put, if PutOptions.PrevKV and it
	// existed.
	PrevKV *mvccpb.KeyValue
}

// Put sets key to value with lease (0: none; the store keeps the ID and
// does not interpret it). The key's create_revision, mod_revision and
// version follow etcd: a key that does not exist (never did, or deleted)
// starts a new generation with version 1. On error nothing changed.
func (tw *TxnWrite) Put(key, value []byte, lease int64, o PutOptions) (PutResult, error) {
	if tw.ended {
		return PutResult{}, fmt.Errorf("mvcc: put on an ended write")
	}
	if len(key) == 0 {
		return PutResult{}, ErrEmptyKey
	}
	s := tw.s
	rev := tw.beginRev + 1
	var prev *mvccpb.KeyValue
	if o.PrevKV || o.IgnoreValue || o.IgnoreLease {
		v, err := tw.view()
		if err != nil {
			return PutResult{}, err
		}
		prev, err = s.getKV(v, key, tw.readRev())
		if err != nil {
			return PutResult{}, err
		}
		if prev == nil && (o.IgnoreValue || o.IgnoreLease) {
			return PutResult{}, fmt.Errorf("%w: %q", ErrKeyNotFound, key)
		}
		if o.IgnoreValue {
			value = prev.Value
		}
		if o.IgnoreLease {
			lease = prev.Lease
		}
	}
	at := Revision{Main: rev, Sub: tw.changes}
	data, err := s.ix.put(key, at, func(created, ver int64) ([]byte, error) {
		kv := mvccpb.KeyValue{Key: key, Value: value, CreateRevision: created, ModRevision: rev, Version: ver, Lease: lease}
		data, err := kv.Marshal()
		if err != nil {
			return nil, fmt.Errorf("mvcc: encoding key %q: %w", key, err)
		}
		return data, nil
	})
	if err != nil {
		return PutResult{}, err
	}
	s.bufMu.Lock()
	s.open.put(bucketKey, revKey(at, false), data)
	s.bufMu.Unlock()
	tw.changes++
	r := PutResult{Rev: rev}
	if o.PrevKV {
		r.PrevKV = prev
	}
	return r, nil
}

// DeleteResult is what a DeleteRange reports.
type DeleteResult struct {
	// Deleted is the number of keys deleted.
	Deleted int64
	// Rev is etcd's: the transaction's revision once it has changed
	// something, the store's revision before it otherwise.
	Rev int64
	// PrevKVs are the deleted keys as they were, if asked.
	PrevKVs []*mvccpb.KeyValue
}

// DeleteRange deletes the keys in [key, end) (end as in Store.Range),
// each with a tombstone at the transaction's revision, ending its
// generation. With prevKV it returns them as they were.
func (tw *TxnWrite) DeleteRange(ctx context.Context, key, end []byte, prevKV bool) (DeleteResult, error) {
	if tw.ended {
		return DeleteResult{}, fmt.Errorf("mvcc: delete on an ended write")
	}
	s := tw.s
	var res DeleteResult
	var keys [][]byte
	if prevKV {
		rr, err := tw.Range(ctx, key, end, RangeOptions{})
		if err != nil {
			return DeleteResult{}, err
		}
		res.PrevKVs = rr.KVs
		for _, kv := range rr.KVs {
			keys = append(keys, kv.Key)
		}
	} else {
		k, e := normalizeRange(key, end)
		s.ix.visit(k, e, tw.readRev(), func(en indexEntry) bool {
			keys = append(keys, en.key)
			return true
		})
	}
	rev := tw.beginRev + 1
	for _, k := range keys {
		at := Revision{Main: rev, Sub: tw.changes}
		data, err := (&mvccpb.KeyValue{Key: k}).Marshal()
		if err != nil {
			return res, fmt.Errorf("mvcc: encoding the tombstone of %q: %w", k, err)
		}
		if err := s.ix.tombstone(k, at); err != nil {
			// The key was just seen alive: the index is broken.
			return res, fmt.Errorf("%w: deleting %q: %v", ErrCorrupt, k, err)
		}
		s.bufMu.Lock()
		s.open.put(bucketKey, revKey(at, true), data)
		s.bufMu.Unlock()
		tw.changes++
		res.Deleted++
	}
	res.Rev = tw.readRev()
	return res, nil
}

// End completes the transaction: if it changed anything, the store's
// revision becomes Rev()+1 and the revision is recorded as made by the
// transaction's log index; either way the consistent index becomes that
// index. It returns the store's revision. Changes are committed to the
// backend with the batch they fall in (see Commit). The synced watchers
// are offered the revision's events once reads see it, without waiting
// for any of them. It is safe to call more than once.
func (tw *TxnWrite) End() int64 {
	s := tw.s
	if tw.ended {
		return s.Rev()
	}
	tw.ended = true
	tw.v.release()
	rev := tw.beginRev
	s.bufMu.Lock()
	if tw.changes > 0 {
		rev++
		k, v := revIndexRecord(rev, tw.index)
		s.open.put(bucketRev, k, v)
	}
	s.open.setApplied(tw.index)
	s.bufMu.Unlock()
	// The revision moves only now that every change of the transaction
	// is in the index and the open layer: readers take it as their bound.
	s.revMu.Lock()
	s.currentRev = rev
	s.appliedIndex = tw.index
	s.revMu.Unlock()
	if tw.changes > 0 {
		// The watchers hear of the revision once reads see it.
		if err := s.notify(rev); err != nil {
			s.failMu.Lock()
			if s.failed == nil {
				s.failed = fmt.Errorf("mvcc: the store stopped writing: notifying watchers of revision %d: %w", rev, err)
			}
			s.failMu.Unlock()
		}
	}
	s.maybeCommitLocked()
	s.wmu.Unlock()
	return rev
}
