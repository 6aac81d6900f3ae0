package log

import (
	"context"
	"fmt"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
)

// proposal is a write on its way into the log: the Driver answers it
// once, through finish.
type proposal struct {
	kind  wire.EntryKind
	data  []byte
	admin func(now edict.Time) (wire.Entry, error) // membership edicts
	// forwarder is the process that forwarded the write here, told the
	// commit at once (ApplyForwarded); edict.None for the others.
	forwarder edict.ProcessID
	done      chan struct{}
	res       ApplyResult
	err       error
}

func (p *proposal) finish(res ApplyResult, err error) {
	p.res, p.err = res, err
	close(p.done)
}

// ApplyResult is a committed write: where it is in the log, its edict
// stamp, and what the state machine answered.
type ApplyResult struct {
	Index    uint64
	Stamp    edict.Stamp
	Response any
}

// Apply replicates cmd and returns once the state machine has applied it.
// The context's deadline covers the whole operation, commit included. A
// write whose leader loses its lease after appending it is not given up:
// it is answered when its index is applied here, under whichever leader —
// with the state machine's answer if its own edict committed there, with
// ErrNotCommitted if another did. If ctx ends first, the error wraps
// ErrOutcomeUnknown: the write may still commit. A process that does not
// lead returns a *NotLeaderError naming the leader.
func (n *Node) Apply(ctx context.Context, cmd []byte) (ApplyResult, error) {
	return n.submit(ctx, &proposal{kind: wire.EntryCommand, data: cmd, done: make(chan struct{})})
}

// ApplyForwarded is Apply for a write that process from forwarded here
// and answers its client once it has applied the write too, as etcd's
// members do: once the write commits, this leader tells from so at once
// (Core.TellCommitted) rather than with the next append or heartbeat,
// which on an idle cluster may be a heartbeat away.
func (n *Node) ApplyForwarded(ctx context.Context, cmd []byte, from edict.ProcessID) (ApplyResult, error) {
	return n.submit(ctx, &proposal{kind: wire.EntryCommand, data: cmd, forwarder: from, done: make(chan struct{})})
}

// Barrier returns once every write committed before it has been applied
// here: it replicates a no-op edict.
func (n *Node) Barrier(ctx context.Context) error {
	_, err := n.Apply(ctx, nil)
	return err
}

func (n *Node) submit(ctx context.Context, p *proposal) (ApplyResult, error) {
	// A write is taken only by a live Node for a live context: the
	// proposal channel is buffered, and select picks at random among the
	// cases ready, so without these checks a write on a stopped Node, or
	// with a context already ended, could be queued and then reported as
	// of unknown outcome — or, with the context, even appended.
	if err := n.alive(ctx); err != nil {
		return ApplyResult{}, err
	}
	select {
	case n.proposals <- p:
	case <-n.done:
		return ApplyResult{}, ErrShutdown
	case <-ctx.Done():
		return ApplyResult{}, ctx.Err() // never appended: a plain failure
	}
	select {
	case <-p.done:
		return p.res, p.err
	case <-n.done:
		return ApplyResult{}, fmt.Errorf("%w: %w", ErrOutcomeUnknown, ErrShutdown)
	case <-ctx.Done():
		return ApplyResult{}, fmt.Errorf("%w: %w", ErrOutcomeUnknown, ctx.Err())
	}
}

// propose takes p and whatever else is queued into the log as one batch:
// one Ready, one fsync, one message per follower (group commit).
func (n *Node) propose(first *proposal) {
	batch := []*proposal{first}
	for len(batch) < n.cfg.MaxBatch {
		select {
		case p := <-n.proposals:
			batch = append(batch, p)
			continue
		default:
		}
		break
	}
	// One reading, taken after every proposal of the batch arrived,
	// serves them all (Driver.proposeAt checks each against a suspend).
	now := n.d.Now()
	for _, p := range batch {
		if p.admin != nil {
			n.d.proposeAt(now, p.admin, p.finish)
		} else {
			kind, data, from := p.kind, p.data, p.forwarder
			n.d.proposeAt(now, func(now edict.Time) (wire.Entry, error) {
				e, err := n.core.Propose(now, kind, data)
				if err == nil && from != edict.None {
					n.core.TellCommitted(from, e.Index)
				}
				return e, err
			}, p.finish)
		}
	}
	n.d.flush()
}

// Issue creates a stamped edict to send outside the log (docs/protocol.md, "Clocks"): the
// receiver fences stale leaders with edict.Fence. It succeeds only while
// this process leads.
func (n *Node) Issue(ctx context.Context, payload []byte) (Edict, error) {
	var st edict.Stamp
	var err error
	if derr := n.do(ctx, func() { st, err = n.core.Issue(n.d.Now()) }); derr != nil {
		return Edict{}, derr
	}
	if err != nil {
		return Edict{}, &NotLeaderError{Leader: n.Status().Leader, Err: err} // the lease lapsed, or no ready reign
	}
	return Edict{Stamp: st, Payload: payload}, nil
}

// Edict is a payload stamped by the leader that created it.
type Edict struct {
	Stamp   edict.Stamp
	Payload []byte
}

// TransferLeadership hands leadership to target and returns once this
// process knows target leads, or ctx ends. A process that does not lead
// refuses with a *NotLeaderError.
func (n *Node) TransferLeadership(ctx context.Context, target edict.ProcessID) error {
	// Subscribed before the transfer starts, so that no change is missed;
	// the events are wake-ups to look at Status (see Observer).
	wake := make(chan Event, 1)
	obs := n.Observe(wake, func(ev Event) bool {
		switch ev.Kind {
		case BecameLeader, SteppedDown, LeaderChanged, Stopped:
			return true
		}
		return false
	})
	defer obs.Cancel()
	var err error
	if derr := n.do(ctx, func() {
		if err = n.core.TransferLeadership(n.d.Now(), target); err != nil {
			err = notLeader(n.core, err)
		}
	}); derr != nil {
		return derr
	}
	if err != nil {
		return err
	}
	for {
		if n.Status().Leader == target {
			return nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		case <-n.done:
			return ErrShutdown
		}
	}
}

// AddLearner adds a process that receives the log without counting in
// quorums; addr is its transport address.
func (n *Node) AddLearner(ctx context.Context, id edict.ProcessID, addr string) error {
	return n.admin(ctx, func(now edict.Time) (wire.Entry, error) { return n.core.AddLearner(now, id, addr) })
}

// Promote makes a caught-up learner a member, through a new epoch.
func (n *Node) Promote(ctx context.Context, id edict.ProcessID) error {
	return n.admin(ctx, func(now edict.Time) (wire.Entry, error) { return n.core.Promote(now, id) })
}

// Remove takes a member or learner out of the cluster.
func (n *Node) Remove(ctx context.Context, id edict.ProcessID) error {
	return n.admin(ctx, func(now edict.Time) (wire.Entry, error) { return n.core.Remove(now, id) })
}

func (n *Node) admin(ctx context.Context, f func(now edict.Time) (wire.Entry, error)) error {
	_, err := n.submit(ctx, &proposal{admin: f, done: make(chan struct{})})
	return err
}

// ForceRecovery starts a new epoch from the given survivors after a quorum
// is lost for good. UNSAFE if a process left out is alive: see
// Core.ForceRecovery. Run it on every survivor with the same members.
func (n *Node) ForceRecovery(ctx context.Context, survivors []edict.ProcessID) (uint64, error) {
	var epoch uint64
	var err error
	if derr := n.do(ctx, func() { epoch, err = n.core.ForceRecovery(n.d.Now(), survivors) }); derr != nil {
		return 0, derr
	}
	if err != nil {
		return 0, err
	}
	// The new epoch's configuration and the old epochs' termination are
	// in a batch on its way to the store: answer once it is there, so
	// that an operator told the recovery is done does not find it gone
	// after a crash.
	if err := n.waitDurable(ctx); err != nil {
		return 0, fmt.Errorf("log: forced recovery to epoch %d may not be durable: %w", epoch, err)
	}
	return epoch, nil
}

// Snapshot takes a snapshot of the state machine now and compacts the log
// behind it. For an fsm.DiskFSM it syncs the state machine and records a
// snapshot that holds no copy of the state at the index the sync made
// durable.
func (n *Node) Snapshot(ctx context.Context) error {
	done := make(chan error, 1)
	n.applier.enqueue(applyJob{snapshot: done})
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// onApplied tells the Driver what the state machine applied: it answers
// the writes and reads waiting for it.
func (n *Node) onApplied(a applied) {
	n.d.Applied(a.index, a.results)
	if a.restored {
		n.pending = append(n.pending, Event{Kind: SnapshotInstalled, Index: a.index})
	}
}
