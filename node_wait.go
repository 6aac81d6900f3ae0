package edictlog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/edictlog/edictlog/edict"
)

// untilLeader runs attempt, and runs it again each time the Node's view
// of the leader changes, for as long as it is refused for want of a
// leader here: no leader known, this process about to lead (its reign not
// ready yet), or the epoch ending. A refusal that names another process
// as the leader, any other error and success are returned as they are.
// attempt reports the epoch its refusal was made in (replog's WriteEpoch:
// the refusing reign's, else the active one; 0 if it does not know), so
// that a write refused because that epoch is ending is not tried again
// before a reign of a later one.
//
// It never polls: it subscribes to the Node's leadership and epoch events
// after the first such refusal (so the path of a write that finds a leader
// costs nothing), and looks at Status when one arrives. Every event is
// sent after the Status that reflects it is published (see Observer), so
// a change that lets the attempt through is never missed: one made before
// the subscription is in the Status read right after it, one made after
// comes as an event.
//
// If ctx ends while it waits, or Config.MaxLeaderWait passes from the
// first refusal, the error is a *NotLeaderError wrapping both the last
// refusal's reason and ctx's error (or ErrLeaderWait): nothing was
// written.
//
// attempt must be refused before anything is written whenever it returns
// a *NotLeaderError (as every proposal, read and leader's op is): only
// then is running it again safe.
func (n *Node) untilLeader(ctx context.Context, attempt func() (epoch uint64, err error)) error {
	return n.untilTaken(ctx, false, attempt)
}

// untilChanged is untilLeader for a membership change: it also waits out
// a refusal for a change in flight (ErrChangeInProgress: a membership
// edict this leader appended is not committed yet), woken by the events
// its commit or the leader's fall sends, and then tries again, against
// the configuration that change made. The edict in flight is another
// call's: this one was refused before anything was written, so trying it
// again cannot apply it twice. If ctx ends while it waits for the commit,
// the error is the *MembershipError, wrapping ctx's error as well as
// ErrChangeInProgress.
func (n *Node) untilChanged(ctx context.Context, attempt func() (epoch uint64, err error)) error {
	return n.untilTaken(ctx, true, attempt)
}

func (n *Node) untilTaken(ctx context.Context, changes bool, attempt func() (epoch uint64, err error)) error {
	var wake chan Event
	var obs *Observer
	var limit *time.Timer
	defer func() {
		if obs != nil {
			obs.Cancel()
		}
		if limit != nil {
			limit.Stop()
		}
	}()
	// subscribe reports whether it subscribed now, the first time; the
	// MaxLeaderWait timer starts with it.
	subscribe := func() bool {
		if obs != nil {
			return false
		}
		wake = make(chan Event, 1)
		obs = n.Observe(wake, leadershipEvent)
		if n.cfg.MaxLeaderWait > 0 {
			limit = time.NewTimer(n.cfg.MaxLeaderWait)
		}
		return true
	}
	// end is what ends a wait: the context, or the MaxLeaderWait timer.
	end := func() waitEnd {
		if limit == nil {
			return waitEnd{ctx: ctx}
		}
		return waitEnd{ctx: ctx, limit: limit.C}
	}
	for {
		if wake != nil {
			// Only an event sent after this attempt starts says
			// something the attempt did not see.
			select {
			case <-wake:
			default:
			}
		}
		epoch, err := attempt()
		var nl *NotLeaderError
		var me *MembershipError
		switch {
		case errors.As(err, &nl) && n.waitsFor(nl):
			first := subscribe()
			if err := n.awaitLeader(end(), wake, nl, epoch, first); err != nil {
				return err
			}
		case changes && errors.As(err, &me) && errors.Is(me.Err, ErrChangeInProgress):
			if subscribe() {
				// No Status shows the commit: the attempt itself is the
				// look, now that any commit from here on wakes it.
				continue
			}
			if err := n.awaitCommit(end(), wake, me); err != nil {
				return err
			}
		default:
			return err
		}
	}
}

// leadershipEvent is the filter of untilLeader's subscription: the events
// that can tell it a leader is known or ready, or (for untilChanged) that
// a membership change in flight committed.
func leadershipEvent(ev Event) bool {
	switch ev.Kind {
	case BecameLeader, SteppedDown, LeaderChanged, EpochChanged, ConfigChanged, Stopped:
		return true
	}
	return false
}

// waitsFor reports whether a refusal is one to wait out here rather than
// return: no leader is known (or the one named has not been heard from
// for a lease's length, so Status names none), this process is the one
// about to lead, or the epoch is ending. A refusal naming another process
// that is heard from, or the target of a transfer, goes back to the
// caller at once: the library does not forward.
func (n *Node) waitsFor(nl *NotLeaderError) bool {
	switch {
	case nl.Leader == edict.None, nl.Leader == n.cfg.ID:
		return true
	case errors.Is(nl.Err, ErrStopped), errors.Is(nl.Err, ErrNoLeader):
		return true
	case errors.Is(nl.Err, ErrTransferring):
		return false
	}
	return n.Status().Leader == edict.None
}

// awaitLeader waits until Status shows a leader the refused attempt may
// succeed with (this process leading a ready reign) or be sent to
// (another process), in a reign of an epoch after epoch if the refusal was
// for an ending epoch: a leader that carries its lease through a
// membership change leads, and refuses, in the ending epoch until its
// reign of the next one begins. On the first refusal the Status now is looked at before
// any event; after a later one, only an event sent since the attempt
// started wakes it, since the Status already seen let that attempt through
// and it was refused all the same.
func (n *Node) awaitLeader(end waitEnd, wake <-chan Event, nl *NotLeaderError, epoch uint64, first bool) error {
	ending := errors.Is(nl.Err, ErrStopped)
	look := first
	for {
		if look {
			st := n.Status()
			known := st.Leader != edict.None && st.Leader != n.cfg.ID
			if (st.IsLeader || known) && (!ending || st.IsLeader && st.Reign.Epoch > epoch || known) {
				return nil
			}
		}
		look = true
		select {
		case ev := <-wake:
			if ev.Kind == Stopped {
				return ErrShutdown
			}
		case <-n.done:
			return ErrShutdown
		case <-end.ctx.Done():
			return &NotLeaderError{Leader: nl.Leader, Err: &waitEndedError{refusal: nl.Err, ctx: end.ctx.Err(), awaited: "a leader"}}
		case <-end.limit:
			return &NotLeaderError{Leader: nl.Leader, Err: &waitEndedError{refusal: nl.Err, ctx: ErrLeaderWait, awaited: "a leader"}}
		}
	}
}

// waitEnd is what ends a wait for a leader or a commit: the call's
// context, and the MaxLeaderWait timer's channel (nil without one).
type waitEnd struct {
	ctx   context.Context
	limit <-chan time.Time
}

// ErrLeaderWait is why a call gave up after waiting Config.MaxLeaderWait
// for a leader (or for a membership change in flight to commit), wrapped
// in the *NotLeaderError (or *MembershipError) it returns.
var ErrLeaderWait = errors.New("edictlog: Config.MaxLeaderWait passed")

// awaitCommit waits for an event sent since the refused attempt started:
// the commit of the change in flight (ConfigChanged, EpochChanged) or a
// change of leader, either of which may let the next attempt through.
func (n *Node) awaitCommit(end waitEnd, wake <-chan Event, me *MembershipError) error {
	var why error
	select {
	case ev := <-wake:
		if ev.Kind == Stopped {
			return ErrShutdown
		}
		return nil
	case <-n.done:
		return ErrShutdown
	case <-end.ctx.Done():
		why = end.ctx.Err()
	case <-end.limit:
		why = ErrLeaderWait
	}
	e := *me
	e.Err = &waitEndedError{refusal: me.Err, ctx: why, awaited: "the change in flight to commit"}
	return &e
}

// waitEndedError is why a call that waited gave up: the refusal it last
// had, and the context's end (or ErrLeaderWait).
type waitEndedError struct {
	refusal, ctx error
	awaited      string
}

func (e *waitEndedError) Error() string {
	return fmt.Sprintf("%v; gave up waiting for %s: %v", e.refusal, e.awaited, e.ctx)
}

func (e *waitEndedError) Unwrap() []error { return []error{e.refusal, e.ctx} }
