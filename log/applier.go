package log

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/fsm"
	"github.com/edictlog/edictlog/wire"
)

// applier owns the FSM: it applies committed entries off the replication
// path (DESIGN §9), takes snapshots, and restores installed ones. Its
// queue is unbounded so the loop goroutine never waits for it.
type applier struct {
	n *Node

	mu     sync.Mutex
	cond   *sync.Cond
	queue  []applyJob
	closed bool
	done   chan struct{}

	last      wire.Entry // the last entry applied
	lastIndex uint64
	sinceSnap uint64
	// reignIndex is Node.ReignIndex: read by any goroutine.
	reignIndex atomic.Uint64
}

type applyJob struct {
	entries  []wire.Entry
	snapshot chan error  // take a snapshot now
	restore  *restoreJob // replace the state
}

type restoreJob struct {
	open  func() (io.ReadCloser, error)
	index uint64
	stamp edict.Stamp
	after func(error)
}

type applied struct {
	index   uint64
	results []ApplyResult
	// restored: the state machine was restored from an installed
	// snapshot up to index.
	restored bool
}

func newApplier(n *Node, index uint64) *applier {
	a := &applier{n: n, lastIndex: index, done: make(chan struct{})}
	a.cond = sync.NewCond(&a.mu)
	// The reign-start edict of the reign the snapshot ended in is at or
	// below its index, and every later reign starts above it: the
	// snapshot's index keeps ReignIndex monotonic until one is applied.
	a.reignIndex.Store(index)
	return a
}

func (a *applier) enqueue(j applyJob) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		if j.snapshot != nil {
			j.snapshot <- ErrShutdown
		}
		if j.restore != nil {
			j.restore.after(ErrShutdown)
		}
		return
	}
	a.queue = append(a.queue, j)
	a.cond.Signal()
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
				j.snapshot <- a.takeSnapshot(true)
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
	out := applied{index: a.lastIndex, results: make([]ApplyResult, len(batch))}
	for i, e := range batch {
		out.results[i] = ApplyResult{Index: e.Index, Stamp: e.Stamp, Response: responses[i]}
	}
	a.report(out)
	a.sinceSnap += uint64(len(batch))
	if a.sinceSnap >= a.n.cfg.SnapshotEvery {
		if err := a.takeSnapshot(false); err != nil {
			a.n.log.Error("snapshot", "err", err)
		}
	}
}

func (a *applier) report(out applied) {
	select {
	case a.n.applyDone <- out:
	case <-a.n.done:
	}
}

// takeSnapshot captures the FSM here (Applies wait, briefly) and writes it
// out on another goroutine, so applies go on meanwhile; the log is
// compacted once it is durable. With wait it returns when it is.
func (a *applier) takeSnapshot(wait bool) error {
	if a.lastIndex == 0 || a.last.Index != a.lastIndex {
		return nil // nothing applied since the start or a restore
	}
	a.sinceSnap = 0
	s, err := a.n.cfg.FSM.Snapshot()
	if err != nil {
		return fmt.Errorf("log: fsm snapshot: %w", err)
	}
	st := a.n.Status()
	if st.EpochHeard {
		// The snapshot would name an epoch whose stop edict this log
		// does not hold yet; a process that installs it would take the
		// epoch as its log's own. Wait until the log brings it.
		return nil
	}
	meta := wire.SnapshotMeta{Index: a.last.Index, Reign: a.last.Reign, Stamp: a.last.Stamp,
		Config: wire.EpochConfig{Epoch: st.Epoch, Members: st.Members, Learners: st.Learners}}
	errc := make(chan error, 1)
	go func() {
		defer s.Release()
		err := persistSnapshot(a.n.cfg.Snapshots, meta, s)
		errc <- err
		if err != nil {
			a.n.log.Error("snapshot", "index", meta.Index, "err", err)
			return
		}
		a.n.compactAfterSnapshot(meta.Index)
	}()
	if !wait {
		return nil
	}
	return <-errc
}

func persistSnapshot(store SnapshotStore, meta wire.SnapshotMeta, s fsm.Snapshot) error {
	if len(meta.Config.Members) == 0 {
		return fmt.Errorf("log: snapshot at %d: no membership known yet", meta.Index)
	}
	sink, err := store.Create(meta)
	if err != nil {
		return fmt.Errorf("log: create snapshot at %d: %w", meta.Index, err)
	}
	if err := s.Persist(sink); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("log: write snapshot at %d: %w", meta.Index, err)
	}
	if err := sink.Close(); err != nil {
		return fmt.Errorf("log: finish snapshot at %d: %w", meta.Index, err)
	}
	return nil
}

// restore replaces the state machine with a snapshot the Core installed.
// The Core installs only a snapshot ahead of its commit index, and every
// entry handed out before was at or below it: the state is never moved
// back (asserted, since a state machine moved back would apply entries it
// has already applied, or never apply some).
func (a *applier) restore(j *restoreJob) {
	var err error
	if j.index <= a.lastIndex {
		err = fmt.Errorf("snapshot at %d is not ahead of the applied index %d", j.index, a.lastIndex)
	} else {
		var rc io.ReadCloser
		if rc, err = j.open(); err == nil {
			err = a.n.cfg.FSM.Restore(rc)
			rc.Close()
		}
	}
	if err == nil {
		a.lastIndex, a.last, a.sinceSnap = j.index, wire.Entry{}, 0
		if j.index > a.reignIndex.Load() {
			a.reignIndex.Store(j.index)
		}
	}
	j.after(err)
	if err == nil {
		a.report(applied{index: j.index, restored: true})
	}
}
