package edictlog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/fsm"
	"github.com/edictlog/edictlog/internal/replog"
	"github.com/edictlog/edictlog/wire"
)

// applier owns the FSM: it applies committed entries off the replication
// path (docs/architecture.md, "Performance principles"), takes snapshots, and restores installed ones. Its
// queue is unbounded so the loop goroutine never waits for it.
type applier struct {
	n *Node
	// disk is the FSM if it keeps its own state (fsm.DiskFSM): its
	// snapshots hold no copy of the state (syncSnapshot), and a member
	// that needs one is sent a copy made for it (copyState). last is then
	// always the entry at lastIndex (its position, from Recover or an
	// install, if nothing was applied since). stager is disk if it stages
	// the snapshots it is sent (fsm.StagingFSM).
	disk   fsm.DiskFSM
	stager fsm.StagingFSM
	// synced is the highest index a snapshot of disk recorded this life.
	synced uint64

	mu     sync.Mutex
	cond   *sync.Cond
	queue  []applyJob
	closed bool
	done   chan struct{}

	last      wire.Entry // the last entry applied
	lastIndex uint64
	sinceSnap uint64
	// sinceSnapBytes counts the bytes of the entries applied since the
	// newest snapshot, and snapSize is that snapshot's size, set by its
	// writer (0 until one is written this life): an automatic snapshot
	// waits until the first is SnapshotLogRatio times the second.
	sinceSnapBytes uint64
	snapSize       atomic.Int64
	// snapAt is the index of the newest snapshot of an FSM that keeps no
	// state of its own, taken or restored: set on the applier, taken back
	// by a snapshot's writer that failed.
	snapAt atomic.Uint64
	// reignIndex is Node.ReignIndex: read by any goroutine.
	reignIndex atomic.Uint64
}

type applyJob struct {
	entries  []wire.Entry
	snapshot chan snapshotDone // take a snapshot now (Node.Snapshot)
	restore  *restoreJob       // replace the state
	// copyFor: a DiskFSM's copy of its state for a peer (copyState).
	copyFor func(stateCopy, error)
	// call runs between two applies (ReadFuncBetweenApplies); closed: the
	// applier stopped, and it runs nothing.
	call func(closed bool)
}

// stateCopy is a DiskFSM's state for a peer: captured, to be streamed
// (snap), or written into the snapshot store (snap nil: meta is the
// stored snapshot's).
type stateCopy struct {
	meta wire.SnapshotMeta
	snap fsm.SizedSnapshot
}

type restoreJob struct {
	// open opens the stored snapshot to restore; with staged, the state
	// machine installs what it staged instead (fsm.StagingFSM).
	open   func() (io.ReadCloser, error)
	staged bool
	index  uint64
	// reign and stamp are the snapshot's (its metadata's Reign, the stamp
	// of the entry at index).
	reign, stamp edict.Stamp
	// size is the snapshot's, if known: the next automatic snapshot
	// waits for the log to match it (snapshotGrown).
	size  int64
	after func(error)
}

type applied struct {
	index   uint64
	results []replog.ApplyResult
	// restored: the state machine was restored from an installed
	// snapshot up to index.
	restored bool
}

// newApplier returns the applier of a state machine that holds the
// entries up to at (Recovery.AppliedEntry), the newest snapshot being at
// snap.
func newApplier(n *Node, at wire.Entry, snap uint64) *applier {
	index := at.Index
	a := &applier{n: n, lastIndex: index, done: make(chan struct{})}
	if d, ok := n.cfg.FSM.(fsm.DiskFSM); ok {
		a.disk, a.last, a.synced = d, at, snap
		a.stager, _ = d.(fsm.StagingFSM)
	}
	a.cond = sync.NewCond(&a.mu)
	a.snapAt.Store(snap)
	// The reign-start edict of the reign the snapshot ended in is at or
	// below its index, and every later reign starts above it: the
	// snapshot's index keeps ReignIndex monotonic until one is applied.
	a.reignIndex.Store(index)
	return a
}

func (a *applier) enqueue(j applyJob) {
	a.hold(j)
	a.wake()
}

// hold queues j without waking the applier: the loop wakes it once its
// step is done (Node.wake).
func (a *applier) hold(j applyJob) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		if j.snapshot != nil {
			j.snapshot <- snapshotDone{err: ErrShutdown}
		}
		if j.restore != nil {
			j.restore.after(ErrShutdown)
		}
		if j.copyFor != nil {
			a.n.background(func() { j.copyFor(stateCopy{}, ErrShutdown) }) // it reports to the loop, which may be the caller
		}
		if j.call != nil {
			j.call(true)
		}
		return
	}
	a.queue = append(a.queue, j)
}

func (a *applier) wake() {
	a.mu.Lock()
	a.cond.Signal()
	a.mu.Unlock()
}

func (a *applier) close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closed = true
	a.cond.Signal()
}

func (a *applier) wait() { <-a.done }

func (a *applier) run() {
	defer close(a.done)
	for {
		a.mu.Lock()
		for len(a.queue) == 0 && !a.closed {
			a.cond.Wait()
		}
		if a.closed {
			a.mu.Unlock()
			return
		}
		jobs := a.queue
		a.queue = nil
		a.mu.Unlock()
		for _, j := range jobs {
			switch {
			case j.restore != nil:
				a.restore(j.restore)
			case j.snapshot != nil:
				index, err := a.takeSnapshot(true)
				j.snapshot <- snapshotDone{index: index, err: err}
			case j.copyFor != nil:
				a.copyState(j.copyFor)
			case j.call != nil:
				j.call(false)
			default:
				a.apply(j.entries)
			}
		}
	}
}

func (a *applier) apply(es []wire.Entry) {
	var batch []fsm.Entry
	for _, e := range es {
		if e.Index <= a.lastIndex {
			continue // covered by an installed snapshot
		}
		fe := fsm.Entry{Index: e.Index, Stamp: e.Stamp}
		switch e.Kind {
		case wire.EntryCommand:
			fe.Data = e.Data
		case wire.EntryReignStart:
			a.reignIndex.Store(e.Index)
		}
		batch = append(batch, fe)
		a.last = e
		a.lastIndex = e.Index
	}
	if len(batch) == 0 {
		return
	}
	var responses []any
	if b, ok := a.n.cfg.FSM.(fsm.BatchFSM); ok {
		responses = b.ApplyBatch(batch)
	} else {
		responses = make([]any, len(batch))
		for i, e := range batch {
			responses[i] = a.n.cfg.FSM.Apply(e)
		}
	}
	out := applied{index: a.lastIndex, results: make([]replog.ApplyResult, len(batch))}
	for i, e := range batch {
		out.results[i] = replog.ApplyResult{Index: e.Index, Stamp: e.Stamp, Response: responses[i]}
	}
	a.report(out)
	a.sinceSnap += uint64(len(batch))
	for _, e := range batch {
		a.sinceSnapBytes += uint64(len(e.Data)) + entryOverhead
	}
	if a.sinceSnap >= a.n.cfg.SnapshotEvery && a.snapshotGrown() {
		if _, err := a.takeSnapshot(false); err != nil && !errors.Is(err, ErrNothingNew) && !errors.Is(err, errEpochHeard) {
			a.n.log.Error("snapshot", "err", err)
		}
	}
}

// entryOverhead is what an entry costs the log beyond its data, roughly:
// its index, stamp and kind, and its key in the store.
const entryOverhead = 48

// snapshotGrown reports whether the entries applied since the newest
// snapshot are enough, by their bytes, for an automatic one
// (Config.SnapshotLogRatio).
func (a *applier) snapshotGrown() bool {
	r := a.n.cfg.SnapshotLogRatio
	if a.disk != nil || r < 0 {
		return true
	}
	return float64(a.sinceSnapBytes) >= r*float64(a.snapSize.Load())
}

func (a *applier) report(out applied) {
	select {
	case a.n.applyDone <- out:
	case <-a.n.done:
	}
}

// takeSnapshot captures the FSM here (Applies wait, briefly) and writes it
// out on another goroutine, so applies go on meanwhile; the log is
// compacted once it is durable. With wait it returns when the snapshot is
// durable and the log compacted behind it, with the index it covers.
// Nothing applied since the newest snapshot (taken, or restored) is a
// *NothingNewError.
func (a *applier) takeSnapshot(wait bool) (uint64, error) {
	if a.disk != nil {
		return a.syncSnapshot(wait)
	}
	prev := a.snapAt.Load()
	if a.lastIndex <= prev || a.last.Index != a.lastIndex {
		// Nothing applied since the start or a restore, or since the
		// newest snapshot.
		return 0, &NothingNewError{Index: max(prev, a.lastIndex)}
	}
	st := a.n.Status()
	if st.EpochHeard {
		// The snapshot would name an epoch whose stop edict this log
		// does not hold yet; a process that installs it would take the
		// epoch as its log's own. Wait until the log brings it.
		return 0, fmt.Errorf("%w (epoch %d)", errEpochHeard, st.Epoch)
	}
	a.sinceSnap, a.sinceSnapBytes = 0, 0
	s, err := a.n.cfg.FSM.Snapshot()
	if err != nil {
		return 0, fmt.Errorf("edictlog: fsm snapshot: %w", err)
	}
	meta := wire.SnapshotMeta{Index: a.last.Index, Reign: a.last.Reign, Stamp: a.last.Stamp,
		Config: wire.EpochConfig{Epoch: st.Epoch, Members: st.Members, Learners: st.Learners}}
	a.snapAt.Store(meta.Index)
	errc := make(chan error, 1)
	a.n.background(func() {
		defer s.Release()
		stored, err := persistSnapshotMeta(a.n.bgCtx, a.n.cfg.Snapshots, meta, s)
		if err == nil {
			a.snapSize.Store(stored.Size)
		}
		if err != nil {
			// The next call takes it again.
			a.snapAt.CompareAndSwap(meta.Index, prev)
			a.n.log.Error("snapshot", "index", meta.Index, "err", err)
		} else {
			err = a.n.compactAfterSnapshot(meta.Index)
		}
		errc <- err
	})
	if !wait {
		return meta.Index, nil
	}
	return meta.Index, <-errc
}

// persistSnapshotMeta writes s into store as a snapshot with meta and
// returns the stored snapshot's metadata (its ID and size). Once ctx has
// ended, its writes fail and the snapshot is cancelled.
func persistSnapshotMeta(ctx context.Context, store SnapshotStore, meta wire.SnapshotMeta, s fsm.Snapshot) (wire.SnapshotMeta, error) {
	if len(meta.Config.Members) == 0 {
		return meta, fmt.Errorf("edictlog: snapshot at %d: no membership known yet", meta.Index)
	}
	sink, err := store.Create(meta)
	if err != nil {
		return meta, fmt.Errorf("edictlog: create snapshot at %d: %w", meta.Index, err)
	}
	w := &countingWriter{ctx: ctx, w: sink}
	if err := s.Persist(w); err != nil {
		_ = sink.Cancel()
		return meta, fmt.Errorf("edictlog: write snapshot at %d: %w", meta.Index, err)
	}
	if err := sink.Close(); err != nil {
		return meta, fmt.Errorf("edictlog: finish snapshot at %d: %w", meta.Index, err)
	}
	meta.ID, meta.Size = sink.ID(), w.n
	return meta, nil
}

type countingWriter struct {
	ctx context.Context
	w   io.Writer
	n   int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, fmt.Errorf("%w: %w", ErrShutdown, err)
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// syncSnapshot is takeSnapshot for a state machine that keeps its own
// state: it syncs the state machine here (Applies wait for its store's
// fsync), then, on another goroutine, records a snapshot that holds no
// copy of the state at the index the sync made durable, and compacts the
// log behind it. The log is never compacted past that index: a crash
// leaves every entry after it in the log. With wait it returns when the
// snapshot is recorded.
func (a *applier) syncSnapshot(wait bool) (uint64, error) {
	if a.lastIndex == 0 {
		return 0, &NothingNewError{}
	}
	st := a.n.Status()
	if st.EpochHeard {
		return 0, fmt.Errorf("%w (epoch %d)", errEpochHeard, st.Epoch) // as in takeSnapshot
	}
	a.sinceSnap = 0
	d, err := replog.SyncState(a.disk, a.lastIndex)
	if err != nil {
		return 0, err
	}
	if d <= a.synced {
		return 0, &NothingNewError{Index: a.synced} // nothing new is durable since the last one
	}
	at := a.last
	cfg := wire.EpochConfig{Epoch: st.Epoch, Members: st.Members, Learners: st.Learners}
	errc := make(chan error, 1)
	a.n.background(func() {
		err := a.n.recordSynced(d, at, cfg)
		errc <- err
		if err != nil {
			a.n.log.Error("snapshot", "index", d, "err", err)
		}
	})
	a.synced = d
	if !wait {
		return d, nil
	}
	return d, <-errc
}

// recordSynced records a snapshot with no copy of the state at index d,
// which the state machine has made durable, and compacts the log behind
// it. at is the entry last applied, which is d's unless the state
// machine's Sync reported less than everything applied: the position of
// d is then the log's.
func (n *Node) recordSynced(d uint64, at wire.Entry, cfg wire.EpochConfig) error {
	if at.Index != d {
		found := false
		if err := n.do(context.Background(), func() {
			if e, ok := n.core.EntryPosition(d); ok {
				at, found = e, true
			}
		}); err != nil {
			return err
		}
		if !found {
			return nil // compacted or replaced by an install meanwhile: nothing to record
		}
	}
	meta := wire.SnapshotMeta{Index: d, Reign: at.Reign, Stamp: at.Stamp, Config: cfg}
	if _, err := replog.SaveMetaOnlySnapshot(n.cfg.Snapshots, meta); err != nil {
		return err
	}
	return n.compactAfterSnapshot(d)
}

// copyState captures a DiskFSM's state for a peer that needs a snapshot
// when the newest one holds no copy. A snapshot that knows its size
// (fsm.SizedSnapshot) is handed to done as it is, to be streamed straight
// from Persist: nothing is written. Another is written into the snapshot
// store on another goroutine, and done is given the stored copy's
// metadata; the state machine is synced first, so that the copy, which
// becomes the newest snapshot, is at or below its durable index and a
// restart whose state machine is durable at or past it restores nothing.
func (a *applier) copyState(done func(stateCopy, error)) {
	fail := func(err error) { a.n.background(func() { done(stateCopy{}, err) }) }
	if a.lastIndex == 0 || a.last.Index != a.lastIndex {
		fail(fmt.Errorf("edictlog: no state to copy (applied %d)", a.lastIndex))
		return
	}
	st := a.n.Status()
	if st.EpochHeard {
		fail(fmt.Errorf("edictlog: no copy of the state while epoch %d is known only from news", st.Epoch))
		return
	}
	// A state machine whose Sync reports less than it applied leaves a
	// stored copy ahead of its store: a restart then restores the copy,
	// which is correct, only slower.
	d, err := a.disk.Sync()
	if err != nil {
		fail(fmt.Errorf("edictlog: sync the state machine: %w", err))
		return
	}
	if d > a.lastIndex {
		fail(fmt.Errorf("edictlog: the state machine's Sync reports index %d durable, but only %d was applied", d, a.lastIndex))
		return
	}
	s, err := a.disk.Snapshot()
	if err != nil {
		fail(fmt.Errorf("edictlog: fsm snapshot: %w", err))
		return
	}
	meta := wire.SnapshotMeta{Index: a.last.Index, Reign: a.last.Reign, Stamp: a.last.Stamp,
		Config: wire.EpochConfig{Epoch: st.Epoch, Members: st.Members, Learners: st.Learners}}
	if sized, ok := s.(fsm.SizedSnapshot); ok {
		a.n.background(func() { done(stateCopy{meta: meta, snap: sized}, nil) })
		return
	}
	a.n.background(func() {
		defer s.Release()
		m, err := persistSnapshotMeta(a.n.bgCtx, a.n.cfg.Snapshots, meta, s)
		done(stateCopy{meta: m}, err)
	})
}

// restore replaces the state machine with a snapshot the Core installed.
// The Core installs only a snapshot ahead of its commit index, and every
// entry handed out before was at or below it: the state is never moved
// back (asserted, since a state machine moved back would apply entries it
// has already applied, or never apply some).
func (a *applier) restore(j *restoreJob) {
	var err error
	switch {
	case j.index <= a.lastIndex:
		err = fmt.Errorf("snapshot at %d is not ahead of the applied index %d", j.index, a.lastIndex)
	case j.staged:
		err = replog.InstallStagedSnapshot(a.stager, j.index)
	default:
		if a.disk != nil {
			// Its Restore is durable: checked after it, a damaged
			// snapshot would be its state at the next start.
			err = replog.VerifySnapshot(context.Background(), j.open)
		}
		var rc io.ReadCloser
		if err == nil {
			if rc, err = j.open(); err == nil {
				// Read to its end whatever the state machine reads, so
				// that the store checks the digest (restoreChecked).
				err = replog.RestoreChecked(context.Background(), a.n.cfg.FSM.Restore, rc)
				rc.Close()
			}
		}
		if err == nil && a.disk != nil {
			var d uint64
			if d, err = a.disk.DurableIndex(); err == nil && d != j.index {
				err = fmt.Errorf("the state machine restored a snapshot of index %d reports index %d durable", j.index, d)
			}
		}
	}
	if err == nil {
		a.lastIndex, a.last, a.sinceSnap, a.sinceSnapBytes = j.index, wire.Entry{}, 0, 0
		if j.size > 0 {
			a.snapSize.Store(j.size)
		}
		a.snapAt.Store(max(a.snapAt.Load(), j.index))
		if a.disk != nil {
			a.last = wire.Entry{Index: j.index, Reign: j.reign, Stamp: j.stamp}
			a.synced = max(a.synced, j.index) // the installed snapshot holds it
		}
		if j.index > a.reignIndex.Load() {
			a.reignIndex.Store(j.index)
		}
	}
	j.after(err)
	if err == nil {
		a.report(applied{index: j.index, restored: true})
	}
}
