package edictlog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/internal/replog"
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
	// epoch is the active epoch when the loop took the proposal: a write
	// refused because that epoch is ending waits for the next one.
	epoch uint64
	done  chan struct{}
	res   ApplyResult
	err   error
}

func (p *proposal) finish(res ApplyResult, err error) {
	p.res, p.err = res, err
	close(p.done)
}

// finishDriven is finish for the Driver's answer.
func (p *proposal) finishDriven(res replog.ApplyResult, err error) {
	p.finish(ApplyResult(res), fromDriver(err))
}

// ApplyResult is a committed write: where it is in the log, its edict
// stamp, and what the state machine answered.
type ApplyResult struct {
	Index    uint64
	Stamp    edict.Stamp
	Response any
}

// Apply replicates cmd and returns once the state machine has applied it.
// The context's deadline covers the whole operation: the wait for a
// leader, the commit and the apply.
//
// Where the write goes depends on what this process knows of the leader:
//
//   - It leads a ready reign: cmd is appended at once.
//   - Another process is known to lead (or is being handed leadership):
//     Apply returns at once a *NotLeaderError naming it. The library does
//     not forward writes; the caller, or package client, retries there.
//   - No leader is known (an election, the gap of a membership change),
//     this process is about to lead (its reign is not ready yet), or the
//     epoch is ending: Apply waits, within ctx, for the Node's view to
//     change (woken by its leadership and epoch events, not by polling)
//     and then tries again as above. If ctx ends first, the error is a
//     *NotLeaderError that wraps ctx's error as well as the last refusal:
//     nothing was written.
//
// A write whose leader loses its lease after appending it is not given up:
// it is answered when its index is applied here, under whichever leader —
// with the state machine's answer if its own edict committed there, with
// ErrNotCommitted if another did. If ctx ends after the write was
// appended, the error wraps ErrOutcomeUnknown: the write may still commit.
func (n *Node) Apply(ctx context.Context, cmd []byte) (ApplyResult, error) {
	return n.submitWaiting(ctx, wire.EntryCommand, cmd, edict.None)
}

// ApplyForwarded is Apply for a write that process from forwarded here
// and answers its client once it has applied the write too, as etcd's
// members do: once the write commits, this leader tells from so at once
// rather than with the next append or heartbeat,
// which on an idle cluster may be a heartbeat away. It waits for a leader
// as Apply does.
func (n *Node) ApplyForwarded(ctx context.Context, cmd []byte, from edict.ProcessID) (ApplyResult, error) {
	return n.submitWaiting(ctx, wire.EntryCommand, cmd, from)
}

// Barrier returns once every write committed before it has been applied
// here: it replicates a no-op edict, and waits for a leader as Apply does.
func (n *Node) Barrier(ctx context.Context) error {
	_, err := n.Apply(ctx, nil)
	return err
}

// submitWaiting submits a write, and submits it again each time the
// Node's view changes for as long as it is refused for want of a leader
// (untilLeader). Every attempt but the last was refused before anything
// was written, so repeating it cannot apply the write twice.
func (n *Node) submitWaiting(ctx context.Context, kind wire.EntryKind, data []byte, from edict.ProcessID) (ApplyResult, error) {
	var res ApplyResult
	err := n.untilLeader(ctx, func() (uint64, error) {
		p := &proposal{kind: kind, data: data, forwarder: from, done: make(chan struct{})}
		var err error
		res, err = n.submit(ctx, p)
		return p.epoch, err
	})
	return res, err
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
	epoch := n.core.WriteEpoch()
	for _, p := range batch {
		p.epoch = epoch
		if p.admin != nil {
			n.d.ProposeAt(now, p.admin, p.finishDriven)
		} else {
			kind, data, from := p.kind, p.data, p.forwarder
			n.d.ProposeAt(now, func(now edict.Time) (wire.Entry, error) {
				e, err := n.core.Propose(now, kind, data)
				if err == nil && from != edict.None {
					n.core.TellCommitted(from, e.Index)
				}
				return e, err
			}, p.finishDriven)
		}
	}
	n.d.FlushProposed()
}

// Issue creates a stamped edict to send outside the log (docs/protocol.md,
// "Clocks"): the receiver fences stale leaders with edict.Fence. Only the
// leader of a ready reign issues one; Issue writes nothing, and returns
// at once with the edict when this process leads.
//
// It waits for a leader as Apply does: while no leader is known, this
// process is about to lead or its lease lapsed, it waits within ctx, woken
// by the Node's leadership events, and tries again. When another process
// is known to lead it returns at once a *NotLeaderError naming it; if ctx
// ends while it waits, a *NotLeaderError that wraps ctx's error too.
func (n *Node) Issue(ctx context.Context, payload []byte) (Edict, error) {
	var st edict.Stamp
	err := n.untilLeader(ctx, func() (uint64, error) {
		var epoch uint64
		var err error
		if derr := n.do(ctx, func() {
			epoch = n.core.WriteEpoch()
			if st, err = n.core.Issue(n.d.Now()); err != nil {
				err = &NotLeaderError{Leader: n.core.Status(n.d.Now()).Leader, Err: err} // the lease lapsed, or no ready reign
			}
		}); derr != nil {
			return 0, derr
		}
		return epoch, err
	})
	if err != nil {
		return Edict{}, err
	}
	return Edict{Stamp: st, Payload: payload}, nil
}

// Edict is a payload stamped by the leader that created it.
type Edict struct {
	Stamp   edict.Stamp
	Payload []byte
}

// TransferLeadership hands leadership to target, a member of the current
// epoch, and returns once this process's Status names target as the
// leader, or ctx ends. Meanwhile this
// leader takes no writes: they are refused with a *NotLeaderError
// wrapping ErrTransferring and naming target.
//
// Only the leader starts a transfer. Like Apply, it waits within ctx while
// no leader is known, while this process is about to lead, and while the
// epoch is ending (a membership change: the transfer starts in the next
// epoch, if this process leads it). When another process is known to
// lead, it returns at once a *NotLeaderError naming it; one already
// transferring refuses at once with ErrTransferring. A target that is no
// member of the epoch, or this process itself, is refused with a
// *MembershipError (ErrNotMember). If ctx ends while it waits for a
// leader, the error is a *NotLeaderError wrapping ctx's error and no
// transfer was started; if it ends after the transfer started, the error
// is ctx's, and the transfer may still complete.
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
	err := n.untilLeader(ctx, func() (uint64, error) {
		var epoch uint64
		var err error
		if derr := n.do(ctx, func() {
			epoch = n.core.WriteEpoch()
			if err = n.core.TransferLeadership(n.d.Now(), target); err != nil {
				err = fromDriver(n.core.Refusal(err))
			}
		}); derr != nil {
			return 0, derr
		}
		return epoch, err
	})
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
// quorums, until it is promoted (Promote); addr is its transport address.
// It is a config edict of the current epoch: the leader keeps leading,
// and no write or read waits for it. AddLearner returns once the edict is
// committed and applied here; every process then reaches id at addr as
// soon as it learns the commit, and the leader starts sending id the log.
//
// Membership changes wait within ctx:
//
//   - for a leader, as Apply does: while no leader is known (an election,
//     the gap of a membership change), this process is about to lead, or
//     the epoch is ending, the call waits, woken by the Node's leadership
//     and epoch events, and tries again. When another process is known to
//     lead, it returns at once a *NotLeaderError naming it: the library
//     does not forward. If ctx ends while it waits, the error is a
//     *NotLeaderError that wraps ctx's error too.
//   - for a change in flight: one change at a time, so while a membership
//     edict this leader appended is not committed yet the call waits for
//     that commit (or for the leader to change) and then tries again,
//     against the configuration that change made: two calls that add the
//     same learner leave one added and the other refused with
//     ErrAlreadyMember. If ctx ends first, the error is the
//     *MembershipError wrapping both ErrChangeInProgress and ctx's error.
//
// In both cases nothing was written, and nothing is written twice: a call
// is tried again only after a refusal made before its edict was appended.
// Once it was appended, it is answered as Apply's write is: if ctx ends
// before the edict is applied here, the error wraps ErrOutcomeUnknown (the
// change may still commit); if another edict committed at its index, the
// error is ErrNotCommitted (it never takes effect). A change the
// configuration refuses is a *MembershipError (ErrAlreadyMember,
// ErrBadAddress) and nothing was written.
func (n *Node) AddLearner(ctx context.Context, id edict.ProcessID, addr string) error {
	return n.admin(ctx, func(now edict.Time) (wire.Entry, error) { return n.core.AddLearner(now, id, addr) })
}

// Promote makes a caught-up learner a member, through a new epoch. It
// returns once the stop edict that ends the current epoch is committed
// and applied here; the new epoch is then decided. This process, its
// leader, leads throughout: it keeps its lease while it ends the old
// epoch and wins the new one, two round trips later, serving reads all
// along (docs/protocol.md, "Membership changes that keep the leader").
// Meanwhile writes here wait for the new reign (Apply), and are not
// refused. It waits for a leader, and for a change in flight, as
// AddLearner does, and is answered as AddLearner is once its edict is
// appended. A change refused is a *MembershipError (ErrNotLearner,
// ErrQuorumLost) and nothing was written. PromoteWith takes options
// (Force).
func (n *Node) Promote(ctx context.Context, id edict.ProcessID) error {
	return n.PromoteWith(ctx, id)
}

// PromoteWith is Promote with options: Force skips the quorum check.
func (n *Node) PromoteWith(ctx context.Context, id edict.ProcessID, opts ...ChangeOption) error {
	return n.admin(ctx, func(now edict.Time) (wire.Entry, error) { return n.core.Promote(now, id, coreOptions(opts)...) })
}

// Remove takes a member or learner out of the cluster. A learner's
// removal is a config edict and interrupts nothing; a member's ends the
// epoch like Promote. Remove returns once the removal is committed and
// applied here. This leader goes on leading, the new epoch too, as
// through a Promote.
//
// If id is this process, it retires (docs/protocol.md, "Membership
// changes that keep the leader"): it commits its retirement, hands
// leadership to the member whose log is the most up to date, and that
// member, leading now, removes it and leads on without another gap. The
// cluster's gap is one leadership transfer, and the removal is decided
// before it: should the transfer fail, whoever leads next carries it out.
// Remove then returns once the removal is applied here, as a follower
// (this process emits Removed), so it may be stopped at once; if ctx ends
// first, the error wraps ctx's: the removal is decided, but this process
// has not seen it done. RemoveWith(self, Force()) ends the epoch itself
// instead and hands the next one over, a round trip longer.
//
// Either way the removed process learns its removal (a Removed event) if
// it can be reached, and campaigns no more; it may be stopped. A change
// refused is a *MembershipError (ErrNotMember, ErrLastMember,
// ErrQuorumLost) and nothing was written. It waits for a leader, and for
// a change in flight, as AddLearner does, and is answered as AddLearner is
// once its edict is appended: a Remove that waited out another Remove of
// the same process is refused with ErrNotMember. RemoveWith takes options
// (Force).
func (n *Node) Remove(ctx context.Context, id edict.ProcessID) error {
	return n.RemoveWith(ctx, id)
}

// RemoveWith is Remove with options: Force skips the quorum check, to
// remove a member while the leader does not hear from enough of the
// others, when they are known to come back.
func (n *Node) RemoveWith(ctx context.Context, id edict.ProcessID, opts ...ChangeOption) error {
	var epoch uint64
	if err := n.admin(ctx, func(now edict.Time) (wire.Entry, error) {
		epoch = n.core.WriteEpoch()
		return n.core.Remove(now, id, coreOptions(opts)...)
	}); err != nil {
		return err
	}
	switch {
	case id != n.cfg.ID:
	case foldChanges(opts).force:
		n.awaitHandOver(ctx)
	default:
		return n.awaitRemoval(ctx, id, epoch)
	}
	return nil
}

// awaitRemoval waits, after this leader committed its retirement in
// epoch, until it learns a configuration of a later epoch that leaves it
// out: the next leader's stop edict, committed.
func (n *Node) awaitRemoval(ctx context.Context, id edict.ProcessID, epoch uint64) error {
	ch := make(chan Event, 1)
	obs := n.Observe(ch, func(ev Event) bool { return ev.Kind == Removed || ev.Kind == Stopped })
	defer obs.Cancel()
	undone := func(err error) error {
		return fmt.Errorf("edictlog: remove %v: retired and decided, but not yet applied here: %w", id, err)
	}
	for {
		var removed bool
		if err := n.do(ctx, func() { removed = n.core.RemovedAfter(epoch) }); err != nil {
			return undone(err)
		}
		if removed {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return undone(ctx.Err())
		case <-n.done:
			return ErrShutdown
		}
	}
}

// awaitHandOver waits, after this leader removed itself with Force, until
// it has handed the next epoch over: the TimeoutNow is sent once the
// batch that holds the old epoch's termination is durable, which
// waitDurable then covers. It gives up after MaxLease (the succession's
// own bound: the detectors elect then) or when ctx ends. The removal is
// done either way, so nothing is reported.
func (n *Node) awaitHandOver(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.MaxLease)
	defer cancel()
	ch := make(chan Event, 1)
	obs := n.Observe(ch, func(ev Event) bool { return ev.Kind == EpochChanged || ev.Kind == SteppedDown })
	defer obs.Cancel()
	tick := time.NewTicker(n.cfg.RoundTrip)
	defer tick.Stop()
	for {
		var pending bool
		if err := n.do(ctx, func() { pending = n.core.HandingOver(n.d.Now()) }); err != nil {
			return
		}
		if !pending {
			_ = n.waitDurable(ctx)
			return
		}
		select {
		case <-ch:
		case <-tick.C:
		case <-ctx.Done():
			return
		}
	}
}

// admin proposes a membership edict made by f, waiting for a leader and
// for a change in flight (untilChanged). f refuses, with a
// *NotLeaderError or a *MembershipError, before it appends anything, and
// an edict appended is answered only with its outcome (committed,
// ErrNotCommitted, ErrOutcomeUnknown), which untilChanged returns as it
// is: only a refused attempt is tried again.
func (n *Node) admin(ctx context.Context, f func(now edict.Time) (wire.Entry, error)) error {
	return n.untilChanged(ctx, func() (uint64, error) {
		p := &proposal{admin: f, done: make(chan struct{})}
		_, err := n.submit(ctx, p)
		return p.epoch, err
	})
}

// ForceRecovery starts a new epoch from the given survivors after a quorum
// is lost for good, and returns the new epoch once its configuration is
// durable here. UNSAFE if a process left out is alive: two epochs can
// run (docs/protocol.md, "The replicated log"). Run it on every survivor
// with the same members. It needs no leader and never waits for one: it
// is for a cluster that cannot elect one.
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
		return 0, fmt.Errorf("edictlog: forced recovery to epoch %d may not be durable: %w", epoch, err)
	}
	return epoch, nil
}

// ErrNothingNew: Snapshot found nothing applied since the newest snapshot
// (taken, or restored); the error is a *NothingNewError naming its index.
var ErrNothingNew = errors.New("edictlog: nothing applied since the last snapshot")

// NothingNewError is Snapshot's answer when there is nothing new to take:
// Index is the newest snapshot's, which already covers everything applied
// (for an fsm.DiskFSM, everything its Sync made durable). errors.Is(err,
// ErrNothingNew) finds it.
type NothingNewError struct{ Index uint64 }

func (e *NothingNewError) Error() string {
	return fmt.Sprintf("%v (it covers index %d)", ErrNothingNew, e.Index)
}

func (e *NothingNewError) Unwrap() error { return ErrNothingNew }

// errEpochHeard: no snapshot while the active epoch is known only from a
// peer's news (Status.EpochHeard): a snapshot names its epoch, and this
// log does not hold the edict that started it yet.
var errEpochHeard = errors.New("edictlog: no snapshot while the epoch is known only from a peer's news; the log brings it shortly")

// Snapshot takes a snapshot of the state machine at the index it has
// applied now and compacts the log behind it (keeping
// Config.TrailingEntries), and returns the index the snapshot covers. It
// returns once the snapshot is durable and the log's store compacted
// behind it. Applies pause only while the state machine captures its
// state (fsm.FSM.Snapshot); the writing goes on beside them.
//
// For an fsm.DiskFSM it syncs the state machine and records a snapshot
// that holds no copy of the state, at the index the sync made durable.
//
// When nothing was applied since the newest snapshot, it takes none and
// returns a *NothingNewError (errors.Is(err, ErrNothingNew)) carrying that
// snapshot's index. If ctx ends first, the snapshot may still be taken.
//
// A snapshot is local: it needs no leader, and Snapshot never waits for
// one; a follower and a learner take their own.
func (n *Node) Snapshot(ctx context.Context) (uint64, error) {
	if err := n.alive(ctx); err != nil {
		return 0, err
	}
	done := make(chan snapshotDone, 1)
	n.applier.enqueue(applyJob{snapshot: done})
	select {
	case r := <-done:
		return r.index, r.err
	case <-n.done:
		return 0, ErrShutdown
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// snapshotDone is a snapshot's answer to Node.Snapshot.
type snapshotDone struct {
	index uint64
	err   error
}

// onApplied tells the Driver what the state machine applied: it answers
// the writes and reads waiting for it.
func (n *Node) onApplied(a applied) {
	n.d.Applied(a.index, a.results)
	if a.restored {
		n.pending = append(n.pending, Event{Kind: SnapshotInstalled, Index: a.index})
	}
}
