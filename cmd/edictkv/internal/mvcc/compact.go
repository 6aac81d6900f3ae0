package mvcc

import (
	"fmt"
	"slices"
	"time"
)

// compactJob is the physical part of a compaction: removing from the
// backend the revisions at or below rev that the index no longer holds,
// and the revision bucket's entries below rev. It proceeds by CompactStep,
// from next on; each step's deletions are ordinary pending changes.
type compactJob struct {
	rev  int64
	keep map[Revision]struct{}
	// nextKey and nextRev are where the next step resumes in the key and
	// revision buckets; nil once that bucket is done.
	nextKey, nextRev []byte
	// waiters are closed once the removal is done and committed.
	waiters []chan struct{}
}

func newCompactJob(rev int64, keep map[Revision]struct{}, waiters []chan struct{}) *compactJob {
	return &compactJob{rev: rev, keep: keep, nextKey: []byte{}, nextRev: []byte{}, waiters: waiters}
}

// Compact applies the compaction log entry at index: history before rev is
// dropped, as etcd's Compact does. It fails with ErrCompacted if rev is not
// above CompactRev and ErrFutureRev if it is above Rev; the consistent
// index advances to index either way (the entry is applied, its result is
// the error).
//
// At once: the key index is compacted — each key keeps its newest revision
// at or below rev unless that is a tombstone ending its last generation
// before rev — and reads below rev fail with ErrCompacted; the scheduled
// compaction is recorded with the entry's other changes, so a crash before
// the removal ends resumes it at the next Open. Then, by CompactStep (run
// by the background compactor, or by the caller), the dropped revisions
// leave the backend in batches. The returned channel is closed when that
// removal is done and committed (etcd's physical compaction). A later
// compaction that starts before it is done takes it over: the channel then
// closes when the later one is done. Restore closes it too.
//
// The revision bucket keeps the revisions from rev on: RevisionIndex
// answers for them and fails with ErrCompacted below.
func (s *Store) Compact(index uint64, rev int64) (<-chan struct{}, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.writableLocked(index); err != nil {
		return nil, err
	}
	s.revMu.RLock()
	cur, compacted := s.currentRev, s.compactRev
	s.revMu.RUnlock()
	var err error
	switch {
	case rev <= compacted:
		err = ErrCompacted
	case rev > cur:
		err = ErrFutureRev
	}
	if err != nil {
		s.setAppliedLocked(index)
		s.maybeCommitLocked()
		return nil, err
	}

	s.compactMu.Lock()
	keep := s.ix.compact(rev)
	s.revMu.Lock()
	s.compactRev = rev
	s.revMu.Unlock()
	s.compactMu.Unlock()

	s.bufMu.Lock()
	s.open.put(bucketMeta, metaScheduledCompact, encodeCompactRev(rev))
	s.bufMu.Unlock()
	s.setAppliedLocked(index)

	ch := make(chan struct{})
	var waiters []chan struct{}
	if s.job != nil {
		// The earlier job's progress is not reusable: what it kept below
		// its cursor the new one may drop. It restarts from the beginning.
		waiters = s.job.waiters
	}
	s.job = newCompactJob(rev, keep, append(waiters, ch))
	s.maybeCommitLocked()
	s.kickCompactor()
	return ch, nil
}

// CompactStep performs one batch of the physical compaction pending, if
// any: it examines up to CompactionBatchLimit key-bucket entries and as
// many revision-bucket entries, and deletes the compacted ones, except
// the changes of the compaction revision itself: a watcher may start
// there and must get all of them, a key changed twice in it included (the
// next compaction removes those; kvstate's transactions change a key
// once per revision, so there are none). The step
// that finishes records the compaction as finished and commits. It reports
// whether work remains. With Options.Background a goroutine calls it; the
// simulator and tests call it themselves.
func (s *Store) CompactStep() (pending bool, err error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	job := s.job
	if job == nil || s.closed {
		return false, nil
	}
	if err := s.failure(); err != nil {
		return true, err
	}
	v, err := s.newView()
	if err != nil {
		return true, fmt.Errorf("mvcc: compaction: %w", err)
	}
	defer v.release()
	limit := s.opts.CompactionBatchLimit

	var delKeys, delRevs [][]byte
	if job.nextKey != nil {
		n := 0
		var last []byte
		var scanErr error
		v.ascend(bucketKey, job.nextKey, revKey(Revision{Main: job.rev + 1}, false), func(k, _ []byte) bool {
			if n == limit {
				return false
			}
			n++
			rev, _, derr := decodeRevKey(k)
			if derr != nil {
				scanErr = fmt.Errorf("%w: compaction: key bucket: %v", ErrCorrupt, derr)
				return false
			}
			if _, ok := job.keep[rev]; !ok && rev.Main != job.rev {
				delKeys = append(delKeys, slices.Clone(k))
			}
			last = k
			return true
		})
		if scanErr != nil {
			return true, scanErr
		}
		if n < limit {
			job.nextKey = nil
		} else {
			job.nextKey = append(slices.Clone(last), 0)
		}
	}
	if job.nextRev != nil {
		n := 0
		var last []byte
		v.ascend(bucketRev, job.nextRev, revIndexKey(job.rev), func(k, _ []byte) bool {
			if n == limit {
				return false
			}
			n++
			delRevs = append(delRevs, slices.Clone(k))
			last = k
			return true
		})
		if n < limit {
			job.nextRev = nil
		} else {
			job.nextRev = append(slices.Clone(last), 0)
		}
	}
	s.bufMu.Lock()
	for _, k := range delKeys {
		s.open.del(bucketKey, k)
	}
	for _, k := range delRevs {
		s.open.del(bucketRev, k)
	}
	done := job.nextKey == nil && job.nextRev == nil
	if done {
		s.open.put(bucketMeta, metaFinishedCompact, encodeCompactRev(job.rev))
	}
	s.bufMu.Unlock()
	if !done {
		s.maybeCommitLocked()
		return true, nil
	}
	s.job = nil
	if err := s.commitLocked(); err != nil {
		// The deletions stay pending, readable; the waiters wait for a
		// store that no longer writes, and learn it from its errors.
		return false, err
	}
	for _, ch := range job.waiters {
		close(ch)
	}
	return false, nil
}

func (s *Store) kickCompactor() {
	if !s.opts.Background {
		return
	}
	select {
	case s.compactKick <- struct{}{}:
	default:
	}
}

func (s *Store) runCompactor() {
	defer s.wg.Done()
	for {
		select {
		case <-s.stop:
			return
		case <-s.compactKick:
		}
		for {
			pending, err := s.CompactStep()
			if err != nil || !pending {
				break
			}
			select {
			case <-s.stop:
				return
			case <-time.After(s.opts.CompactionSleepInterval):
			}
		}
	}
}
