package edictlog

import (
	"maps"
	"slices"
	"sync/atomic"

	"github.com/edictlog/edictlog/wire"
)

// Observer is one subscription to a Node's events, made by Node.Observe.
//
// What it guarantees:
//   - The Node never waits for an observer. An event that finds the
//     channel full is dropped for that observer, and counted (Dropped);
//     other observers are not affected.
//   - Events reach one observer in the order the Node made them.
//   - When an event arrives, Node.Status already reflects it, or something
//     newer: the Node publishes its status before it sends the events of
//     the step that led to it. Every change of Status().Leader or
//     Status().IsLeader is followed by a BecameLeader, SteppedDown or
//     LeaderChanged event; every rise of Status().Applied by an Applied
//     event; every change of the active epoch by EpochChanged.
//   - Stopped is the last event sent; once the Node has stopped nothing is
//     sent, and Observe on a stopped Node sends Stopped at once.
//   - Once Cancel returns, nothing more is sent on the channel: the
//     subscriber may close it.
//
// The drop policy is the subscriber's to live with. One that needs every
// event must keep up: read promptly, into a channel with room for a burst.
// One that only needs the state they announce can use events as wake-ups:
// with a channel of capacity 1, re-reading Status on each event it
// receives, it misses nothing — an event dropped because the channel is
// full finds a wake-up already pending, and that wake-up reads the newer
// status. Dropped tells either kind that it fell behind.
type Observer struct {
	n      *Node
	ch     chan<- Event
	filter func(Event) bool

	sent, dropped atomic.Uint64
}

// Observe subscribes ch to the Node's events that filter accepts, every
// event if filter is nil, until Cancel: the Core's changes of leader,
// epoch and configuration (BecameLeader, SteppedDown, LeaderChanged,
// EpochChanged, ConfigChanged), and the Node's own SnapshotTaken,
// SnapshotInstalled, Applied and Stopped. See Observer for the guarantees
// and the drop policy. ch should be buffered: an unbuffered channel gets
// only the events that find its reader waiting. filter runs on the Node's
// goroutine while the event is sent: it must be quick, and must not call
// the Node (Status excepted) nor Observe nor Cancel. A Membership an event
// carries, to the filter and on the channel, is the observer's own copy.
func (n *Node) Observe(ch chan<- Event, filter func(Event) bool) *Observer {
	if ch == nil {
		panic("edictlog: Observe with a nil channel")
	}
	o := &Observer{n: n, ch: ch, filter: filter}
	n.obsMu.Lock()
	defer n.obsMu.Unlock()
	if n.obsStopped != nil {
		o.offer(*n.obsStopped)
		return o
	}
	n.observers[o] = struct{}{}
	return o
}

// Cancel ends the subscription; once it returns nothing more is sent on
// the channel. It may be called more than once, and after the Node stopped.
func (o *Observer) Cancel() {
	o.n.obsMu.Lock()
	delete(o.n.observers, o)
	o.n.obsMu.Unlock()
}

// Sent is how many events the observer was sent.
func (o *Observer) Sent() uint64 { return o.sent.Load() }

// Dropped is how many events the filter accepted but the channel had no
// room for.
func (o *Observer) Dropped() uint64 { return o.dropped.Load() }

// offer sends ev if the filter takes it and the channel has room; the
// observers' lock is held.
func (o *Observer) offer(ev Event) {
	if ev.Membership != nil {
		ev.Membership = cloneMembership(ev.Membership) // rare: configuration changes
	}
	if o.filter != nil && !o.filter(ev) {
		return
	}
	select {
	case o.ch <- ev:
		o.sent.Add(1)
	default:
		o.dropped.Add(1)
	}
}

func cloneMembership(m *wire.Membership) *wire.Membership {
	c := *m
	c.Config.Members = slices.Clone(m.Config.Members)
	c.Config.Learners = slices.Clone(m.Config.Learners)
	c.Addrs = maps.Clone(m.Addrs)
	return &c
}

// announce sends the events of one step of the loop, once its status is
// published: the Core's (collected by onEvent), then a LeaderChanged if
// the leader the status shows changed and none of them said so, then
// Applied if the applied index rose. old is the status published before.
func (n *Node) announce(old, cur Status) {
	defer func() {
		clear(n.pending) // drop the Memberships
		n.pending = n.pending[:0]
	}()
	said := false
	for _, ev := range n.pending {
		switch ev.Kind {
		case BecameLeader, SteppedDown, LeaderChanged:
			said = true
		}
	}
	if !said && (cur.Leader != old.Leader || cur.IsLeader != old.IsLeader) {
		n.pending = append(n.pending, Event{Kind: LeaderChanged, Leader: cur.Leader, Epoch: cur.Epoch, Reign: cur.Reign})
	}
	if cur.Applied > old.Applied {
		n.pending = append(n.pending, Event{Kind: Applied, Epoch: cur.Epoch, Index: cur.Applied})
	}
	if len(n.pending) == 0 {
		return
	}
	n.obsMu.RLock()
	defer n.obsMu.RUnlock()
	if n.obsStopped != nil {
		return
	}
	for o := range n.observers {
		for _, ev := range n.pending {
			o.offer(ev)
		}
	}
}

// stopObservers sends Stopped, the last event, and sends nothing after.
func (n *Node) stopObservers(reason string) {
	ev := Event{Kind: Stopped, Reason: reason}
	n.obsMu.Lock()
	defer n.obsMu.Unlock()
	if n.obsStopped != nil {
		return
	}
	n.obsStopped = &ev
	for o := range n.observers {
		o.offer(ev)
	}
}
