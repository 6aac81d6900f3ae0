package edictlog

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/edictlog/edictlog/fsm"
	"github.com/edictlog/edictlog/internal/replog"
)

// ReadLevel is the consistency of a read (docs/protocol.md, "The replicated log").
type ReadLevel uint8

const (
	// ReadLease is linearizable: the leader answers from applied state
	// under its lease, with no network round trip. The default.
	ReadLease ReadLevel = iota
	// ReadFollower is linearizable: a follower asks the leader for its
	// commit index (answered under the lease, no quorum round), waits to
	// apply it, and answers.
	ReadFollower
	// ReadStale answers from local applied state at once; the result says
	// how stale it may be.
	ReadStale
)

func (l ReadLevel) String() string { return coreLevel(l).String() }

// coreLevel is level in the protocol's words: the same three levels.
func coreLevel(level ReadLevel) replog.ReadLevel { return replog.ReadLevel(level) }

// ReadResult is a read's answer and the guarantee it came with.
type ReadResult struct {
	Data []byte
	// Level is how the read was served: a follower read answered by the
	// leader itself is served as a lease read.
	Level ReadLevel
	// Index is the applied index the answer reflects at least.
	Index uint64
	// Staleness bounds, for a stale read, how old the answer may be: the
	// time since this process last heard from a leader (0 at the leader).
	// Negative when no leader has been heard from since the start.
	Staleness time.Duration
}

// readGroup is the reads of one level that arrived while the loop had
// not yet taken that level's reads (readGate). The loop starts them as
// one read, at a reading of the clock taken after it took them, so after
// every one of them arrived; one answer serves them all.
type readGroup struct {
	done chan struct{}
	res  ReadResult
	err  error
}

// finish is the Driver's answer, given once.
func (g *readGroup) finish(res replog.ReadResult, err error) {
	g.res = ReadResult{Level: ReadLevel(res.Level), Index: res.Index, Staleness: res.Staleness}
	g.err = fromDriver(err)
	close(g.done)
}

// readGate gathers arriving reads into groups, one open group per level,
// for the loop to take (etcd's linearizable read loop shares one read
// index among the reads that wait for it the same way). The first read
// of a group rings the bell, which wakes the loop, unless it is a
// follower read that arrived while follower reads wait for the leader's
// read index: those would wait for the next request anyway, which leaves
// once the one in flight is answered, so they wait here and the loop
// takes them in the step that answers it, without a wake per read.
//
// Invariant: an open follower group that did not ring exists only while
// holdFollower is set, and holdFollower is set only while the Core has
// follower reads waiting, so a step is still to come (the reply, or the
// Core's timer for resending or failing the request) and the loop takes
// the group at the latest then.
type readGate struct {
	bell chan struct{} // capacity 1: a ring is pending or the loop is woken

	mu           sync.Mutex
	open         [ReadStale + 1]*readGroup
	holdFollower bool
}

// join adds a read at level to the open group, opening one if none is.
func (g *readGate) join(level ReadLevel) *readGroup {
	g.mu.Lock()
	grp := g.open[level]
	ring := false
	if grp == nil {
		grp = &readGroup{done: make(chan struct{})}
		g.open[level] = grp
		ring = level != ReadFollower || !g.holdFollower
	}
	g.mu.Unlock()
	if ring {
		select {
		case g.bell <- struct{}{}:
		default:
		}
	}
	return grp
}

// take moves the open groups that may start now into buf: all but the
// follower group while hold (follower reads wait for a request). hold
// becomes the gate's until the next take or setHold.
func (g *readGate) take(buf []*readGroup, levels []ReadLevel, hold bool) ([]*readGroup, []ReadLevel) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.holdFollower = hold
	for l, grp := range g.open {
		if grp == nil || hold && ReadLevel(l) == ReadFollower {
			continue
		}
		buf, levels = append(buf, grp), append(levels, ReadLevel(l))
		g.open[l] = nil
	}
	return buf, levels
}

// setHold records whether follower reads wait for a request.
func (g *readGate) setHold(hold bool) {
	g.mu.Lock()
	g.holdFollower = hold
	g.mu.Unlock()
}

// ErrNoQuerier: Read needs an FSM that implements fsm.Querier.
var ErrNoQuerier = errors.New("edictlog: the FSM does not answer queries (fsm.Querier)")

// Read answers query from the state machine at the given consistency
// level (docs/protocol.md, "The replicated log"). The context's deadline
// covers the whole read, the wait for a leader included.
//
// A lease read (ReadLease) at a process that does not lead returns at
// once a *NotLeaderError naming the leader it knows; a follower read
// (ReadFollower) asks that leader. While no leader is known, or this
// process is about to lead (its reign is not ready yet), both wait within
// ctx as Apply does, and if ctx ends first return a *NotLeaderError that
// wraps ctx's error. A stale read (ReadStale) never waits for a leader.
//
// The FSM's Query runs on the caller's goroutine once the level's
// guarantee holds, beside the applies (fsm.Querier); its error is
// returned as it is. ReadFunc runs a function of the caller's instead,
// with no serialization.
func (n *Node) Read(ctx context.Context, level ReadLevel, query []byte) (ReadResult, error) {
	q, ok := n.cfg.FSM.(fsm.Querier)
	if !ok {
		return ReadResult{}, ErrNoQuerier
	}
	res, err := n.awaitRead(ctx, level)
	if err != nil {
		return ReadResult{}, err
	}
	// The loop decided the read may be answered now; Query is safe to run
	// beside Apply and answers from a state at least at res.Index.
	data, err := q.Query(query)
	if err != nil {
		return res, &QueryError{Index: res.Index, Level: res.Level, Err: err}
	}
	res.Data = data
	return res, nil
}

// QueryError is the state machine's own error for a read that the log
// served: Query's, or the function's of ReadFunc. Index and Level are the
// read's (also in the result returned beside it), so that a caller can
// tell an FSM's answer "no such thing at index i" from a refusal by the
// log, which is never a QueryError. It unwraps to Err.
type QueryError struct {
	Index uint64
	Level ReadLevel
	Err   error
}

func (e *QueryError) Error() string {
	return fmt.Sprintf("edictlog: the state machine's read at index %d (%v): %v", e.Index, e.Level, e.Err)
}

func (e *QueryError) Unwrap() error { return e.Err }

// Value is a typed read's answer and the guarantee it came with
// (ReadResult's fields, the value in place of Data).
type Value[T any] struct {
	Value     T
	Level     ReadLevel
	Index     uint64
	Staleness time.Duration
}

// ReadFunc runs fn against the Node's state machine once a read at level
// may be answered — with the guarantee and after the same waits as Read —
// and returns fn's value with the read's index and level. Nothing is
// serialized: fn gets the FSM the Node was configured with, as F (an
// FSM's concrete type, or an interface it implements; any other F is an
// error before the read starts).
//
// fn runs on the caller's goroutine, beside the applies, as
// fsm.Querier.Query does: it must read the FSM in a way that is safe for
// concurrent use with Apply (under the FSM's own read lock, say), must not
// change it, and sees a state at least at the returned Index (perhaps
// later entries too, which are committed). An FSM with no lock of its own
// uses ReadFuncBetweenApplies. When fn returns an error, ReadFunc returns
// it as a *QueryError, beside a result that carries Index and Level.
func ReadFunc[F, T any](ctx context.Context, n *Node, level ReadLevel, fn func(F) (T, error)) (Value[T], error) {
	return readFunc(ctx, n, level, fn, false)
}

// ReadFuncBetweenApplies is ReadFunc with fn run on the goroutine that
// applies entries, between two of them: fn needs no synchronization with
// Apply, and sees the state after exactly the entries applied so far (at
// least the returned Index). The applies, and the other reads of this
// kind, wait while fn runs: keep it short.
func ReadFuncBetweenApplies[F, T any](ctx context.Context, n *Node, level ReadLevel, fn func(F) (T, error)) (Value[T], error) {
	return readFunc(ctx, n, level, fn, true)
}

func readFunc[F, T any](ctx context.Context, n *Node, level ReadLevel, fn func(F) (T, error), onApplier bool) (Value[T], error) {
	f, ok := n.cfg.FSM.(F)
	if !ok {
		var want F
		return Value[T]{}, fmt.Errorf("edictlog: ReadFunc: the state machine is a %T, not a %T", n.cfg.FSM, &want)
	}
	res, err := n.awaitRead(ctx, level)
	if err != nil {
		return Value[T]{}, err
	}
	out := Value[T]{Level: res.Level, Index: res.Index, Staleness: res.Staleness}
	var v T
	if onApplier {
		done := make(chan struct{})
		ran := false
		n.applier.enqueue(applyJob{call: func(closed bool) {
			if !closed {
				v, err = fn(f)
				ran = true
			}
			close(done)
		}})
		select {
		case <-done:
		case <-n.done: // an applier that stopped leaves its queue
			return Value[T]{}, ErrShutdown
		case <-ctx.Done():
			return Value[T]{}, ctx.Err()
		}
		if !ran {
			return Value[T]{}, ErrShutdown
		}
	} else {
		v, err = fn(f)
	}
	out.Value = v
	if err != nil {
		return out, &QueryError{Index: out.Index, Level: out.Level, Err: err}
	}
	return out, nil
}

// awaitRead returns once the state machine may answer a read at level:
// the result's Index is applied, and a lease read's lease was held when
// the loop let it go. It waits for a leader as Read says.
func (n *Node) awaitRead(ctx context.Context, level ReadLevel) (ReadResult, error) {
	if level > ReadStale {
		return ReadResult{}, fmt.Errorf("edictlog: read level %d is none of ReadLease, ReadFollower, ReadStale", level)
	}
	var res ReadResult
	err := n.untilLeader(ctx, func() (uint64, error) {
		var err error
		res, err = n.readOnce(ctx, level)
		return 0, err
	})
	return res, err
}

// readOnce hands a read to the loop, in the open group of its level, and
// waits for the group's answer.
func (n *Node) readOnce(ctx context.Context, level ReadLevel) (ReadResult, error) {
	if err := n.alive(ctx); err != nil {
		return ReadResult{}, err
	}
	g := n.reads.join(level)
	select {
	case <-g.done:
	case <-n.done:
		return ReadResult{}, ErrShutdown
	case <-ctx.Done():
		return ReadResult{}, ctx.Err()
	}
	return g.res, g.err
}

// startReads hands the read groups that may start now to the Driver, which
// answers each once the state machine may (Driver.Reads): all of them at
// one reading of the clock, taken after they were taken from the gate.
// Then it tells the gate whether follower reads wait for a request.
func (n *Node) startReads() {
	var levels [ReadStale + 1]ReadLevel
	groups, ls := n.reads.take(n.readTaken[:0], levels[:0], n.d.FollowerReadsWaiting())
	if len(groups) == 0 {
		return
	}
	batch := n.readBatch[:0]
	for i, g := range groups {
		batch = append(batch, replog.ReadRequest{Level: coreLevel(ls[i]), Done: g.finish})
	}
	n.d.Reads(batch)
	n.reads.setHold(n.d.FollowerReadsWaiting())
	clear(batch) // the groups, for the collector
	clear(groups)
	n.readBatch, n.readTaken = batch[:0], groups[:0]
}
