// Package route decides where edictkv runs a request that needs the
// leader — a write, a lease read, an admin call — for both of its APIs:
// the HTTP API (internal/httpapi) and etcd's gRPC API (internal/etcdapi).
// Each API says how to serve a request here and how to forward it; a
// Router says which, and when to look again.
//
// What a Router guarantees:
//
//   - A request is served here only while the Node's Status says this
//     process leads.
//   - A request another process forwarded here is never forwarded again:
//     unless this process leads, or is beginning a reign, Do refuses it at
//     once (ErrMisdirected), and the forwarder looks again. A request
//     makes one hop at most, so stale leader hints cannot make it loop.
//   - It never polls the Node. While no leader is known, or this process
//     is beginning a reign, it waits for the Node's next leadership event
//     (log.Node.Observe), which the Node sends only once Status shows the
//     change. After an attempt that was refused or could not reach the
//     leader it tries again at the next leadership event or after a short
//     back-off (10ms, doubling up to 100ms), whichever comes first: a
//     refusal such as a transfer that gives up, or a leader whose address
//     is not yet known, ends without an event.
//   - It gives up after the wait it was made with, and then says so with a
//     *log.NotLeaderError (wrapping ErrNoLeader, and the context's error
//     if the caller's context ended) that names the leader it knew of, if
//     any. Serve and forward functions signal "look again" the same way,
//     so one check, errors.As(err, new(*log.NotLeaderError)), tells a
//     request not answered from one answered.
package route

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/log"
)

var (
	// ErrNoLeader: no leader was known, or reachable, within the wait.
	ErrNoLeader = errors.New("route: no leader reachable")
	// ErrMisdirected: the request was forwarded here, and this process
	// does not lead; the forwarder should look for the leader again.
	ErrMisdirected = errors.New("route: forwarded to a process that does not lead")
)

// Back-off between attempts that were refused or could not reach the
// leader; a leadership event cuts it short.
const (
	firstBackoff = 10 * time.Millisecond
	maxBackoff   = 100 * time.Millisecond
)

// Router routes the requests of one process. It is safe for concurrent
// use; Close it when done.
type Router struct {
	node *log.Node
	id   edict.ProcessID
	wait time.Duration

	obs  *log.Observer
	stop chan struct{}
	done chan struct{}
	once sync.Once

	mu      sync.Mutex
	changed chan struct{} // closed at the next leadership event
}

// New returns a Router for node that waits up to wait for a leader.
func New(node *log.Node, wait time.Duration) *Router {
	r := &Router{node: node, id: node.Status().ID, wait: wait, stop: make(chan struct{}), done: make(chan struct{}),
		changed: make(chan struct{})}
	// Events are wake-ups to read Status again: a channel of one misses
	// nothing (see log.Observer).
	events := make(chan log.Event, 1)
	r.obs = node.Observe(events, func(ev log.Event) bool {
		switch ev.Kind {
		case log.BecameLeader, log.SteppedDown, log.LeaderChanged, log.Stopped:
			return true
		}
		return false
	})
	go r.watch(events)
	return r
}

// watch wakes the waiters at every leadership event.
func (r *Router) watch(events <-chan log.Event) {
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

// Close ends the Router's subscription and its goroutine. Requests still
// waiting go on until their wait ends.
func (r *Router) Close() {
	r.once.Do(func() {
		r.obs.Cancel()
		close(r.stop)
	})
	<-r.done
}

// Do runs a request that needs the leader, with serve here while this
// process leads, or with forward at the leader another process is known
// to be. Either returns a *log.NotLeaderError when the request was not
// answered and is worth another look (leadership moved; the leader could
// not be reached; nothing was written); anything else is the answer, and
// Do returns it. forwarded says another process sent the request here.
// serve and forward are given ctx; the wait is Do's own.
func (r *Router) Do(ctx context.Context, forwarded bool, serve func(context.Context) error,
	forward func(ctx context.Context, leader edict.ProcessID) error) error {
	return r.loop(ctx, func(st log.Status) (bool, error) {
		switch {
		case st.IsLeader:
			return true, serve(ctx)
		case st.Leader == r.id:
			// Beginning a reign: it will lead, or step down, in a moment.
			return false, nil
		case forwarded:
			return true, &log.NotLeaderError{Leader: st.Leader, Err: ErrMisdirected}
		case st.Leader != edict.None:
			return true, forward(ctx, st.Leader)
		}
		return false, nil
	}, func(err error) bool { return errors.Is(err, ErrMisdirected) })
}

// Retry runs try, which serves a request here that needs a leader known
// (a follower read), and runs it again while it returns a
// *log.NotLeaderError, as Do does; anything else try returns is the
// answer.
func (r *Router) Retry(ctx context.Context, try func(context.Context) error) error {
	return r.loop(ctx, func(log.Status) (bool, error) { return true, try(ctx) }, nil)
}

// loop runs attempt until it answers, waiting between attempts as the
// package documents. attempt reports whether it tried anything; final
// says which of its refusals are returned at once.
func (r *Router) loop(ctx context.Context, attempt func(log.Status) (tried bool, err error), final func(error) bool) error {
	wait, cancel := context.WithTimeout(ctx, r.wait)
	defer cancel()
	backoff := time.Duration(0)
	for {
		changed := r.changes()
		tried, err := attempt(r.node.Status())
		var nle *log.NotLeaderError
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
	return &log.NotLeaderError{Leader: r.node.Status().Leader, Err: err}
}
