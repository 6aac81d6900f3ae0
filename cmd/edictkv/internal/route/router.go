package route

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/edict"
)

var (
	// ErrNoLeader: no leader was known, or reachable, within the wait. It
	// is the log's own sentinel, so that one check covers a read the Node
	// refused for want of a leader and a call the Router gave up on.
	ErrNoLeader = edictlog.ErrNoLeader
	// ErrMisdirected: the call was forwarded here, and this process does
	// not lead; the forwarder should look for the leader again.
	ErrMisdirected = errors.New("route: forwarded to a process that does not lead")
	// ErrHandingOver: this process leads but is handing leadership over;
	// the call waits for the next leader.
	ErrHandingOver = errors.New("route: handing leadership over")
)

// Back-off between attempts that were refused or could not reach the
// leader; a leadership event cuts it short.
const (
	firstBackoff = 10 * time.Millisecond
	maxBackoff   = 100 * time.Millisecond
)

// Router routes the calls of one process. It is safe for concurrent use;
// Close it when done.
type Router struct {
	node *edictlog.Node
	id   edict.ProcessID
	wait time.Duration

	obs  *edictlog.Observer
	stop chan struct{}
	done chan struct{}
	once sync.Once

	mu      sync.Mutex
	changed chan struct{} // closed at the next leadership event

	// gate is held shared by every call served as leader, and exclusively
	// by a handover, which so waits for them to finish. handingOver, while
	// set, sends later calls to the next leader instead of serving them.
	gate        sync.RWMutex
	handingOver atomic.Bool
	handover    sync.Mutex // one handover at a time
}

// New returns a Router for node that waits up to wait for a leader.
func New(node *edictlog.Node, wait time.Duration) *Router {
	r := &Router{node: node, id: node.Status().ID, wait: wait, stop: make(chan struct{}), done: make(chan struct{}),
		changed: make(chan struct{})}
	// Events are wake-ups to read Status again: a channel of one misses
	// nothing (see edictlog.Observer).
	events := make(chan edictlog.Event, 1)
	r.obs = node.Observe(events, func(ev edictlog.Event) bool {
		switch ev.Kind {
		case edictlog.BecameLeader, edictlog.SteppedDown, edictlog.LeaderChanged, edictlog.Stopped:
			return true
		}
		return false
	})
	go r.watch(events)
	return r
}

// Wait is how long a call waits for a leader before Do gives up.
func (r *Router) Wait() time.Duration { return r.wait }

// watch wakes the waiters at every leadership event.
func (r *Router) watch(events <-chan edictlog.Event) {
	defer close(r.done)
	for {
		select {
		case <-events:
			r.mu.Lock()
			close(r.changed)
			r.changed = make(chan struct{})
			r.mu.Unlock()
		case <-r.stop:
			return
		}
	}
}

// changes is closed at the next leadership event. Take it before reading
// Status, so that no change in between is missed.
func (r *Router) changes() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.changed
}

// Close ends the Router's subscription and its goroutine. Calls still
// waiting go on until their wait ends.
func (r *Router) Close() {
	r.once.Do(func() {
		r.obs.Cancel()
		close(r.stop)
	})
	<-r.done
}

// Do runs a call that needs the leader, with serve here while this
// process leads and no handover is under way, or with forward at the
// leader another process is known to be. Either returns a
// *edictlog.NotLeaderError when the call was not answered and is worth another
// look (leadership moved; the leader could not be reached; nothing was
// written); anything else is the answer, and Do returns it. forwarded
// says another process sent the call here. serve and forward are given
// ctx; the wait is Do's own.
func (r *Router) Do(ctx context.Context, forwarded bool, serve func(context.Context) error,
	forward func(ctx context.Context, leader edict.ProcessID) error) error {
	return r.loop(ctx, func(st edictlog.Status) (bool, error) {
		switch {
		case st.IsLeader:
			return true, r.serveGated(ctx, serve)
		case st.Leader == r.id:
			// Beginning a reign: it will lead, or step down, in a moment.
			return false, nil
		case forwarded:
			return true, &edictlog.NotLeaderError{Leader: st.Leader, Err: ErrMisdirected}
		case st.Leader != edict.None:
			return true, forward(ctx, st.Leader)
		}
		return false, nil
	}, func(err error) bool { return errors.Is(err, ErrMisdirected) })
}

// serveGated runs serve under the handover gate, or refuses, having run
// nothing, while a handover is under way.
func (r *Router) serveGated(ctx context.Context, serve func(context.Context) error) error {
	if !r.gate.TryRLock() {
		return &edictlog.NotLeaderError{Leader: edict.None, Err: ErrHandingOver}
	}
	defer r.gate.RUnlock()
	if r.handingOver.Load() {
		return &edictlog.NotLeaderError{Leader: edict.None, Err: ErrHandingOver}
	}
	return serve(ctx)
}

// Retry runs try, which serves a call here that needs a leader known (a
// follower read), and runs it again while it returns a
// *edictlog.NotLeaderError, as Do does; anything else try returns is the
// answer. It does not take the handover gate: a read has no outcome to
// lose when leadership moves.
func (r *Router) Retry(ctx context.Context, try func(context.Context) error) error {
	return r.loop(ctx, func(edictlog.Status) (bool, error) { return true, try(ctx) }, nil)
}

// loop runs attempt until it answers, waiting between attempts as the
// package documents. attempt reports whether it tried anything; final
// says which of its refusals are returned at once.
func (r *Router) loop(ctx context.Context, attempt func(edictlog.Status) (tried bool, err error), final func(error) bool) error {
	// The wait's timer starts only with the first wait: a call answered
	// at its first attempt, as nearly every call is, costs none.
	var wait context.Context
	start := time.Now()
	backoff := time.Duration(0)
	for {
		changed := r.changes()
		tried, err := attempt(r.node.Status())
		var nle *edictlog.NotLeaderError
		switch {
		case !tried:
			backoff = 0 // nothing to retry: wait for an event
		case !errors.As(err, &nle):
			return err // answered
		case final != nil && final(err):
			return err
		case backoff == 0:
			backoff = firstBackoff
		default:
			backoff = min(2*backoff, maxBackoff)
		}
		if wait == nil {
			var cancel context.CancelFunc
			wait, cancel = context.WithDeadline(ctx, start.Add(r.wait))
			defer cancel()
		}
		var retry *time.Timer
		var retryC <-chan time.Time
		if backoff > 0 {
			retry = time.NewTimer(backoff)
			retryC = retry.C
		}
		select {
		case <-changed:
		case <-retryC:
		case <-wait.Done():
		}
		if retry != nil {
			retry.Stop()
		}
		if wait.Err() != nil {
			return r.giveUp(ctx)
		}
	}
}

// giveUp is Do's answer when the wait ends first.
func (r *Router) giveUp(ctx context.Context) error {
	err := ErrNoLeader
	if cerr := ctx.Err(); cerr != nil {
		err = fmt.Errorf("%w: %w", ErrNoLeader, cerr)
	}
	return &edictlog.NotLeaderError{Leader: r.node.Status().Leader, Err: err}
}

// HandOver transfers leadership to target, or, if target is None, to the
// other member the leader knows to have stored the most (Successor). New
// calls stop being served here at once and wait for the next leader; the
// calls being served here finish first; then the log transfers
// leadership. It returns the target once the log knows the target leads.
// A process that does not lead refuses with a *edictlog.NotLeaderError; with
// no other member to hand to it returns None and does nothing.
//
// Handovers run one at a time. Do not call HandOver from a call served
// under the gate (Do's serve): it would wait for itself.
func (r *Router) HandOver(ctx context.Context, target edict.ProcessID) (edict.ProcessID, error) {
	r.handover.Lock()
	defer r.handover.Unlock()
	st := r.node.Status()
	if !st.IsLeader {
		return edict.None, &edictlog.NotLeaderError{Leader: st.Leader, Err: edictlog.ErrNotLeader}
	}
	if target == edict.None {
		if target = r.Successor(); target == edict.None {
			return edict.None, nil
		}
	}
	if target == r.id {
		return target, nil // it leads already
	}
	r.handingOver.Store(true)
	// Cleared once the transfer ends: by then Status names the new leader
	// and calls go there, or, if the transfer failed, this process still
	// leads and serves them again.
	defer r.handingOver.Store(false)
	r.gate.Lock() // waits for the calls being served
	r.gate.Unlock()
	if err := r.node.TransferLeadership(ctx, target); err != nil {
		return target, fmt.Errorf("route: transfer leadership to %d: %w", target, err)
	}
	return target, nil
}

// Transfer runs a leadership transfer asked of this process, for target
// (None: the Successor): HandOver here while this process leads, or
// forward at the leader, routed as Do routes a call but outside the
// handover gate, which HandOver takes itself. It returns the target
// HandOver chose (None when the call was forwarded, or there was no other
// member), or the error that ended it.
func (r *Router) Transfer(ctx context.Context, forwarded bool, target edict.ProcessID,
	forward func(ctx context.Context, leader edict.ProcessID) error) (edict.ProcessID, error) {
	var chosen edict.ProcessID
	err := r.loop(ctx, func(st edictlog.Status) (bool, error) {
		switch {
		case st.IsLeader:
			var err error
			chosen, err = r.HandOver(ctx, target)
			return true, err
		case st.Leader == r.id:
			return false, nil
		case forwarded:
			return true, &edictlog.NotLeaderError{Leader: st.Leader, Err: ErrMisdirected}
		case st.Leader != edict.None:
			return true, forward(ctx, st.Leader)
		}
		return false, nil
	}, func(err error) bool { return errors.Is(err, ErrMisdirected) })
	return chosen, err
}

// Successor is the other member the leader knows to have stored the
// most: the one that needs the least catching up to lead. None if this
// process has no other member.
func (r *Router) Successor() edict.ProcessID {
	st := r.node.Status()
	best, bestMatch := edict.None, uint64(0)
	for _, p := range st.Members {
		if p == r.id {
			continue
		}
		if m := st.Match[p]; best == edict.None || m > bestMatch {
			best, bestMatch = p, m
		}
	}
	return best
}
