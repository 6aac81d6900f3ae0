package edictlog

import (
	"context"
	"errors"
	"maps"
	"sync"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
)

// SetAddress makes addr the transport address of member or learner id,
// as etcd's MemberUpdate changes a member's peer URLs. It is a config
// edict of the current epoch: the leader keeps leading, and no write or read waits for it. It returns once the edict
// has committed and this process has applied it; by then this process
// reaches id at addr, and every other process does as soon as it learns
// the commit. Each process keeps the address in its store, so that a
// restart uses it (over what Config.Peers says), and a process that
// catches up from a snapshot learns it from the snapshot.
//
// SetAddress is for an address the cluster cannot learn by itself. A
// member restarted on a new address announces it when it connects to its
// peers, if its transport does (AddressAnnouncer; transport.TCP with a
// dialable or advertised address): each peer reaches it there at once,
// and the leader makes the change itself. An announcement is acted on
// once, when it is heard: an address set here later stands until the
// member announces again, in its next life. Only the leader proposes the
// change. SetAddress waits, within ctx, for a leader and for a change in
// flight (ErrChangeInProgress) as AddLearner does; a process that knows
// another leads returns at once a *NotLeaderError naming it.
func (n *Node) SetAddress(ctx context.Context, id edict.ProcessID, addr string) error {
	return n.admin(ctx, func(now edict.Time) (wire.Entry, error) { return n.core.ChangeAddress(now, id, addr) })
}

// addrWatch acts on the addresses peers announce (AddressAnnouncer): it
// reaches a member at the address it announced at once, before the
// cluster has made it the member's, and while this process leads it
// proposes the change (SetAddress). An announcement is pending until the
// replicated address is the one announced; then it is settled, and a
// later change (an operator's SetAddress) stands until the member
// announces again. Per process, only the newest life counts: a higher
// incarnation replaces what was heard, a lower one (an earlier life's) is
// ignored, and one of the same incarnation at another address — two
// processes started with one id and one store's copy, or a transport
// that sends no incarnation — is ignored with a warning rather than let
// the two flip the address back and forth.
type addrWatch struct {
	n       *Node
	mu      sync.Mutex
	newest  map[edict.ProcessID]heardAddr
	pending map[edict.ProcessID]heardAddr
	wake    chan struct{}
}

type heardAddr struct {
	addr        string
	incarnation uint64
}

// watchAddresses announces this process and starts acting on what its
// peers announce, if the transport carries announcements. Start calls it
// before the loop runs and before anything is sent.
func (n *Node) watchAddresses() {
	a, ok := n.cfg.Transport.(AddressAnnouncer)
	if !ok {
		return
	}
	w := &addrWatch{n: n, newest: map[edict.ProcessID]heardAddr{}, pending: map[edict.ProcessID]heardAddr{},
		wake: make(chan struct{}, 1)}
	a.WatchAddresses(w.heard)
	// A new leader proposes what it heard while it followed, and a
	// committed membership change may have been what held a proposal
	// back (ErrChangeInProgress) or what made the announcer a learner.
	events := make(chan Event, 1)
	obs := n.Observe(events, func(ev Event) bool { return ev.Kind == BecameLeader || ev.Kind == ConfigChanged })
	n.background(func() { w.run(obs, events) })
	a.Announce(n.inc)
}

func (w *addrWatch) heard(id edict.ProcessID, addr string, incarnation uint64) {
	if id == w.n.cfg.ID || wire.CheckAddr(addr) != nil {
		return
	}
	select {
	case <-w.n.done:
		return
	default:
	}
	h := heardAddr{addr: addr, incarnation: incarnation}
	w.mu.Lock()
	prev, ok := w.newest[id]
	switch {
	case ok && (h == prev || incarnation < prev.incarnation):
		w.mu.Unlock()
		return
	case ok && incarnation == prev.incarnation:
		w.mu.Unlock()
		w.n.log.Warn("two processes announce one id in one incarnation: ignoring the later address",
			"peer", uint64(id), "incarnation", incarnation, "address", prev.addr, "ignored", addr)
		return
	}
	w.newest[id], w.pending[id] = h, h
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *addrWatch) run(obs *Observer, events <-chan Event) {
	defer obs.Cancel()
	for {
		select {
		case <-w.wake:
		case <-events:
		case <-w.n.done:
			return
		}
		w.reconcile()
	}
}

// reconcile settles the pending announcements the cluster has made its
// own, points the transport at the others and, on the leader, proposes
// them.
func (w *addrWatch) reconcile() {
	w.mu.Lock()
	pending := maps.Clone(w.pending)
	w.mu.Unlock()
	if len(pending) == 0 {
		return
	}
	n := w.n
	var propose, settled []edict.ProcessID
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := n.do(ctx, func() {
		leads := n.core.Leads()
		for id, h := range pending {
			switch {
			case n.peers[id] == h.addr:
				settled = append(settled, id)
			case n.core.InConfig(id):
				// Reach it now: it listens there, and the replicated
				// address is one it left.
				n.cfg.Transport.AddPeer(id, h.addr)
				if leads {
					propose = append(propose, id)
				}
			}
		}
	})
	if err != nil {
		return
	}
	w.mu.Lock()
	for _, id := range settled {
		if w.pending[id] == pending[id] {
			delete(w.pending, id)
		}
	}
	w.mu.Unlock()
	for _, id := range propose {
		h := pending[id]
		switch err := n.SetAddress(ctx, id, h.addr); {
		case err == nil:
			n.log.Info("address changed as the member announced", "peer", uint64(id), "address", h.addr, "incarnation", h.incarnation)
			// Settled by the ConfigChanged event its commit made.
		case errors.Is(err, ErrChangeInProgress):
			// Retried when the change in flight commits (ConfigChanged).
		default:
			n.log.Info("address announced by a member not changed", "peer", uint64(id), "address", h.addr, "err", err)
		}
	}
}
