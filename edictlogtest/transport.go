package edictlogtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
)

var (
	// ErrClosed is returned by a Transport after Close.
	ErrClosed = errors.New("edictlogtest: transport closed")
	// ErrUnknownPeer is returned by Send to a process without an address.
	ErrUnknownPeer = errors.New("edictlogtest: unknown peer")
	// ErrUnreachable is returned by SendSnapshot when the stream cannot
	// reach its receiver: a cut, a drop, an address no one holds.
	ErrUnreachable = errors.New("edictlogtest: peer unreachable")
	// ErrSnapshotRejected wraps the receiver's reason for refusing a
	// snapshot.
	ErrSnapshotRejected = errors.New("edictlogtest: snapshot rejected by receiver")
)

var _ edictlog.Transport = (*Transport)(nil)

// Transport is an in-memory edictlog.Transport on a Network. It behaves as
// package transport's TCP does where a Node can tell: Send validates a
// message and fills in its envelope, queues it without waiting for the
// network (control messages in a bounded queue per peer, Append and
// FetchReply in a bounded window per peer, both of TCP's sizes), and
// never lets the caller's payload reach the receiver: every receiver gets
// a deep copy. Control messages are handed out before queued bulk ones.
// Messages of one lane to one peer arrive in the order sent, or not at
// all. What it does not model: encoding (no frame size limit, no
// handshake, no cluster id, no TLS).
type Transport struct {
	net  *Network
	id   edict.ProcessID
	addr string

	inbox *inbox
	snaps chan *wire.IncomingSnapshot
	// snapMu keeps Close from closing snaps while a sender offers a
	// stream on it.
	snapMu     sync.RWMutex
	snapClosed bool

	closing   chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup // lanes and snapshot streams

	mu    sync.Mutex
	peers map[edict.ProcessID]string
	lanes map[laneKey]*lane
	// incarnation is what Announce set; announced, whether it was called.
	incarnation uint64
	announced   bool
	// watchers are WatchAddresses' callbacks; heardInc the newest
	// incarnation announced by each peer.
	watchers []func(edict.ProcessID, string, uint64)
	heardInc map[edict.ProcessID]uint64
}

type laneKey struct {
	dst  *Transport
	bulk bool
}

func newTransport(n *Network, id edict.ProcessID, addr string) *Transport {
	return &Transport{
		net: n, id: id, addr: addr,
		inbox:   newInbox(n.cfg.InboxSize, n.cfg.AppendWindow),
		snaps:   make(chan *wire.IncomingSnapshot),
		closing: make(chan struct{}),
		peers:   map[edict.ProcessID]string{},
		lanes:   map[laneKey]*lane{},

		heardInc: map[edict.ProcessID]uint64{},
	}
}

// Announce sets the incarnation this transport announces its address
// with, and announces it to every peer it knows, as TCP's hello does on
// each connection it opens (log's AddressAnnouncer): a process restarted
// at a new address is then reached there. Every lane it opens later
// announces it too. An announcement crosses the network as a message
// does: not over a cut link.
func (t *Transport) Announce(incarnation uint64) {
	t.mu.Lock()
	t.incarnation, t.announced = incarnation, true
	peers := make(map[edict.ProcessID]string, len(t.peers))
	for id, addr := range t.peers {
		peers[id] = addr
	}
	t.mu.Unlock()
	for id, addr := range peers {
		if dst := t.net.lookup(addr); dst != nil && dst.id == id && !t.net.isCut(t.id, id) {
			dst.heard(t.id, t.addr, incarnation)
		}
	}
}

// WatchAddresses has f called with each address a peer announces and its
// incarnation, never for an incarnation below one heard from that peer
// (log's AddressAnnouncer). f runs on the announcing side's goroutine: it
// must be quick and must not call the transport.
func (t *Transport) WatchAddresses(f func(id edict.ProcessID, addr string, incarnation uint64)) {
	t.mu.Lock()
	t.watchers = append(t.watchers, f)
	t.mu.Unlock()
}

// heard is an announcement from peer id reaching t.
func (t *Transport) heard(id edict.ProcessID, addr string, incarnation uint64) {
	if t.isClosing() {
		return
	}
	t.mu.Lock()
	if prev, ok := t.heardInc[id]; ok && incarnation < prev {
		t.mu.Unlock()
		return
	}
	t.heardInc[id] = incarnation
	ws := slices.Clone(t.watchers)
	t.mu.Unlock()
	for _, f := range ws {
		f(id, addr, incarnation)
	}
}

// ID implements edictlog.Transport.
func (t *Transport) ID() edict.ProcessID { return t.id }

// LocalAddr implements edictlog.Transport: the address it holds on its Network.
func (t *Transport) LocalAddr() string { return t.addr }

// Receive implements edictlog.Transport.
func (t *Transport) Receive() <-chan wire.Message { return t.inbox.out }

// Snapshots implements edictlog.Transport.
func (t *Transport) Snapshots() <-chan *wire.IncomingSnapshot { return t.snaps }

// AddPeer implements edictlog.Transport. Changing a peer's address drops what
// is queued for the old one, as a TCP connection to it would close.
func (t *Transport) AddPeer(id edict.ProcessID, addr string) {
	if id == t.id || id == edict.None {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if old, ok := t.peers[id]; ok && old != addr {
		t.stopLanesLocked(id)
	}
	t.peers[id] = addr
}

// RemovePeer implements edictlog.Transport.
func (t *Transport) RemovePeer(id edict.ProcessID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.peers, id)
	t.stopLanesLocked(id)
}

// SetPeers implements edictlog.Transport.
func (t *Transport) SetPeers(peers map[edict.ProcessID]string) {
	t.mu.Lock()
	var gone []edict.ProcessID
	for id := range t.peers {
		if _, ok := peers[id]; !ok {
			gone = append(gone, id)
		}
	}
	t.mu.Unlock()
	for _, id := range gone {
		t.RemovePeer(id)
	}
	for id, addr := range peers {
		t.AddPeer(id, addr)
	}
}

// PeerAddr returns the address the transport reaches peer id at, if it
// knows id.
func (t *Transport) PeerAddr(id edict.ProcessID) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	a, ok := t.peers[id]
	return a, ok
}

func (t *Transport) stopLanesLocked(id edict.ProcessID) {
	for k, l := range t.lanes {
		if k.dst.id == id {
			l.stop()
			delete(t.lanes, k)
		}
	}
}

func (t *Transport) isClosing() bool {
	select {
	case <-t.closing:
		return true
	default:
		return false
	}
}

// Close implements edictlog.Transport: the transport leaves its Network (its
// address is free again), what it queued and what is in flight to or from
// it is lost, snapshot streams to and from it fail, and Receive and
// Snapshots are closed.
func (t *Transport) Close() error {
	t.closeOnce.Do(func() {
		close(t.closing)
		t.net.detach(t)
		t.mu.Lock()
		for k, l := range t.lanes {
			l.stop()
			delete(t.lanes, k)
		}
		t.mu.Unlock()
		t.inbox.close()
		t.snapMu.Lock()
		t.snapClosed = true
		close(t.snaps)
		t.snapMu.Unlock()
		t.wg.Wait()
	})
	return nil
}

// Send implements edictlog.Transport.
func (t *Transport) Send(ctx context.Context, to edict.ProcessID, m wire.Message) error {
	if t.isClosing() {
		return ErrClosed
	}
	if err := m.Address(t.id, to); err != nil {
		return fmt.Errorf("edictlogtest: send: %w", err)
	}
	if err := m.Validate(); err != nil {
		return fmt.Errorf("edictlogtest: send: %w", err)
	}
	cp := cloneMessage(m)
	if to == t.id {
		// To itself: no link, no faults, but a copy all the same.
		if !t.inbox.deliver(cp, ctx.Done()) {
			return fmt.Errorf("edictlogtest: send %v to self: %w", m.Kind(), context.Cause(ctx))
		}
		return nil
	}
	t.mu.Lock()
	addr, ok := t.peers[to]
	t.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w %v", ErrUnknownPeer, to)
	}
	bulk := m.Kind().Bulk()
	f, delay := t.net.decide(t.id, to)
	if f != fateDeliver {
		return nil // lost on the way, as far as the sender can tell
	}
	dst := t.net.lookup(addr)
	if dst == nil || dst.id != to {
		// No one there, or another process (TCP's handshake would refuse
		// it): the message is lost.
		t.net.count(t.id, to, func(s *LinkStats) { s.Unreachable++ })
		return nil
	}
	l, announce := t.lane(dst, bulk)
	if l == nil {
		return ErrClosed
	}
	if announce != nil {
		announce()
	}
	return l.enqueue(ctx, item{m: cp, at: time.Now().Add(delay)})
}

// lane returns the lane to dst of the given kind, starting it if needed;
// announce, if not nil, announces t's address to dst (a new connection's
// hello) and is called by the caller.
func (t *Transport) lane(dst *Transport, bulk bool) (l *lane, announce func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.isClosing() {
		return nil, nil
	}
	k := laneKey{dst, bulk}
	if l := t.lanes[k]; l != nil {
		return l, nil
	}
	// Lanes to closed transports are gone for good: forget them.
	for k2, l := range t.lanes {
		if k2.dst.isClosing() {
			l.stop()
			delete(t.lanes, k2)
		}
	}
	size := t.net.cfg.ControlQueue
	if bulk {
		size = t.net.cfg.AppendWindow
	}
	l = &lane{src: t, dst: dst, bulk: bulk, queue: make(chan item, size), done: make(chan struct{})}
	t.lanes[k] = l
	t.wg.Add(1)
	go l.run()
	if t.announced {
		// A new lane is a new connection: its hello says where this
		// process listens. Told once t's lock is released: dst's
		// watchers may take locks of their own.
		inc := t.incarnation
		announce = func() { dst.heard(t.id, t.addr, inc) }
	}
	return l, announce
}

type item struct {
	m  wire.Message
	at time.Time // when it may be delivered
}

// lane carries one kind of message (control or bulk) from one transport
// to another, in order, as one TCP connection does. Its queue's capacity
// is the bound: TCP's control queue, or its window of bulk messages in
// flight (a bulk message holds its place until the receiver's inbox took
// it).
type lane struct {
	src, dst *Transport
	bulk     bool
	queue    chan item
	done     chan struct{}
	stopOnce sync.Once
}

func (l *lane) stop() { l.stopOnce.Do(func() { close(l.done) }) }

func (l *lane) kind() string {
	if l.bulk {
		return "bulk"
	}
	return "control"
}

// enqueue queues it, waiting for room until ctx is done. Room that is
// there is always taken, even with ctx already done, so a caller that
// must never block (the Node's loop) passes a done context and loses a
// message only when the queue is full.
func (l *lane) enqueue(ctx context.Context, it item) error {
	select {
	case l.queue <- it:
		return nil
	default:
	}
	select {
	case l.queue <- it:
		return nil
	case <-ctx.Done():
		l.src.net.count(l.src.id, l.dst.id, func(s *LinkStats) { s.Full++ })
		return fmt.Errorf("edictlogtest: send %v to %v: %s queue full: %w", it.m.Kind(), l.dst.id, l.kind(), context.Cause(ctx))
	case <-l.done:
		return nil // lost with the lane
	case <-l.src.closing:
		return ErrClosed
	}
}

func (l *lane) run() {
	defer l.src.wg.Done()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	lost := func(n uint64) {
		l.src.net.count(l.src.id, l.dst.id, func(s *LinkStats) { s.Unreachable += n })
	}
	defer func() { lost(uint64(len(l.queue))) }()
	for {
		var it item
		select {
		case it = <-l.queue:
		case <-l.done:
			return
		case <-l.src.closing:
			return
		case <-l.dst.closing:
			return
		}
		// A message waits out its delay unless its link is cut first,
		// which loses it at once, as a connection breaks.
		for wait := time.Until(it.at); wait > 0 && !l.src.net.isCut(l.src.id, l.dst.id); wait = time.Until(it.at) {
			changed := l.src.net.changes()
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-changed:
				timer.Stop()
			case <-l.done:
				lost(1)
				return
			case <-l.src.closing:
				lost(1)
				return
			case <-l.dst.closing:
				lost(1)
				return
			}
		}
		if l.src.net.isCut(l.src.id, l.dst.id) {
			l.src.net.count(l.src.id, l.dst.id, func(s *LinkStats) { s.Cut++ })
			continue
		}
		if !l.dst.inbox.deliver(it.m, l.done, l.src.closing) {
			lost(1)
			return
		}
		l.src.net.count(l.src.id, l.dst.id, func(s *LinkStats) { s.Delivered++ })
	}
}

// inbox hands received messages to the runtime, control messages first:
// a lease message that arrives behind many queued appends must not wait
// for the runtime to work through them (package transport's inbox).
type inbox struct {
	control chan wire.Message
	appends chan wire.Message
	out     chan wire.Message
	done    chan struct{}
	stop    sync.Once
}

func newInbox(controlCap, appendCap int) *inbox {
	b := &inbox{
		control: make(chan wire.Message, controlCap),
		appends: make(chan wire.Message, appendCap),
		// Unbuffered: which message goes next is chosen when the runtime
		// is ready for one, so control messages keep their priority.
		out:  make(chan wire.Message),
		done: make(chan struct{}),
	}
	go b.run()
	return b
}

// deliver queues m, waiting for room until one of stop closes or the
// inbox does. It reports whether m was queued.
func (b *inbox) deliver(m wire.Message, stop ...<-chan struct{}) bool {
	q := b.control
	if m.Kind().Bulk() {
		q = b.appends
	}
	select {
	case <-b.done:
		return false
	default:
	}
	select {
	case q <- m:
		return true
	default:
	}
	var s1, s2 <-chan struct{}
	if len(stop) > 0 {
		s1 = stop[0]
	}
	if len(stop) > 1 {
		s2 = stop[1]
	}
	select {
	case q <- m:
		return true
	case <-s1:
	case <-s2:
	case <-b.done:
	}
	return false
}

func (b *inbox) run() {
	defer close(b.out)
	for {
		var m wire.Message
		select {
		case m = <-b.control:
		default:
			select {
			case m = <-b.control:
			case m = <-b.appends:
			case <-b.done:
				return
			}
		}
		select {
		case b.out <- m:
		case <-b.done:
			return
		}
	}
}

func (b *inbox) close() { b.stop.Do(func() { close(b.done) }) }
