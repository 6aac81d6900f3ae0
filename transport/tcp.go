package transport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
)

// TCPConfig configures a TCP transport. Zero durations and sizes take the
// defaults named on each field.
type TCPConfig struct {
	// ID is this process. Required.
	ID edict.ProcessID
	// ClusterID names the cluster; a peer that presents another one in its
	// handshake is refused. Required, at most MaxClusterIDLen bytes.
	ClusterID string
	// BindAddr is the listen address; port 0 picks a free port (see
	// LocalAddr). Required.
	BindAddr string
	// AdvertiseAddr is what LocalAddr reports, if the listen address is
	// not how peers reach this node. It is also what this node tells the
	// peers it connects to about where it listens (see Announce): set it
	// when BindAddr has an unspecified host (":7000", "0.0.0.0:7000"),
	// or a restart on a new address is not learned from the connections.
	AdvertiseAddr string
	// Peers are the initial peer addresses.
	Peers map[edict.ProcessID]string
	// TLS, if set, requires mutual TLS on every connection.
	TLS *TLSFiles
	// Logger receives connection events; slog.Default() if nil.
	Logger *slog.Logger

	// MaxFrameSize bounds a frame in either direction (default
	// DefaultMaxFrameSize, 16 MiB). A message whose frame would exceed it
	// is refused by Send; a peer that sends a larger frame is disconnected.
	MaxFrameSize int
	// AppendWindow is how many bulk frames (Append, FetchReply) may be in
	// flight to one peer: sent but not yet queued for the receiver's
	// runtime (default 64). It is what makes appends pipelined — a leader
	// need not wait for one append's reply to send the next — and what
	// bounds the memory a slow follower costs: when the window is full,
	// Send of an Append waits.
	AppendWindow int
	// ControlQueue bounds the queue of other messages to one peer (default
	// 1024).
	ControlQueue int
	// InboxSize bounds received messages not yet taken from Receive
	// (default 1024 control messages; appends are bounded by the windows).
	InboxSize int
	// MaxInboundConns bounds accepted connections (default 512).
	MaxInboundConns int
	// DialTimeout bounds a TCP connect (default 2s).
	DialTimeout time.Duration
	// HandshakeTimeout bounds TLS and the hello exchange (default 5s).
	HandshakeTimeout time.Duration
	// IdleTimeout closes an inbound connection with no frame for this long
	// (default 60s). Senders send a keepalive after a third of it.
	IdleTimeout time.Duration
	// FrameTimeout closes a connection that stalls mid-frame for this long
	// (default 10s), so a slow or hostile peer cannot hold a reader.
	FrameTimeout time.Duration
	// WriteTimeout closes a connection whose peer has not accepted our
	// writes for this long (default 10s).
	WriteTimeout time.Duration
	// SnapshotChunkSize is the frame size of a snapshot stream (default
	// 256 KiB, or less if MaxFrameSize is smaller) and the only buffer a
	// snapshot send holds.
	SnapshotChunkSize int
}

func (c *TCPConfig) withDefaults() (TCPConfig, error) {
	d := *c
	switch {
	case d.ID == edict.None:
		return d, errors.New("transport: TCPConfig.ID is required")
	case d.ClusterID == "" || len(d.ClusterID) > MaxClusterIDLen || !utf8.ValidString(d.ClusterID):
		return d, fmt.Errorf("transport: TCPConfig.ClusterID must be 1 to %d bytes of UTF-8", MaxClusterIDLen)
	case d.BindAddr == "":
		return d, errors.New("transport: TCPConfig.BindAddr is required")
	case len(d.AdvertiseAddr) > wire.MaxAddrLen || !utf8.ValidString(d.AdvertiseAddr):
		// Every hello carries it: peers would refuse each one.
		return d, fmt.Errorf("transport: TCPConfig.AdvertiseAddr must be at most %d bytes of UTF-8", wire.MaxAddrLen)
	}
	setDefault(&d.MaxFrameSize, DefaultMaxFrameSize)
	setDefault(&d.AppendWindow, 64)
	setDefault(&d.ControlQueue, 1024)
	setDefault(&d.InboxSize, 1024)
	setDefault(&d.MaxInboundConns, 512)
	setDefault(&d.DialTimeout, 2*time.Second)
	setDefault(&d.HandshakeTimeout, 5*time.Second)
	setDefault(&d.IdleTimeout, 60*time.Second)
	setDefault(&d.FrameTimeout, 10*time.Second)
	setDefault(&d.WriteTimeout, 10*time.Second)
	if d.MaxFrameSize < maxHandshakeFrame {
		return d, fmt.Errorf("transport: MaxFrameSize %d below the minimum of %d", d.MaxFrameSize, maxHandshakeFrame)
	}
	setDefault(&d.SnapshotChunkSize, min(256<<10, d.MaxFrameSize-1))
	if d.SnapshotChunkSize+1 > d.MaxFrameSize {
		return d, fmt.Errorf("transport: SnapshotChunkSize %d does not fit MaxFrameSize %d", d.SnapshotChunkSize, d.MaxFrameSize)
	}
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	return d, nil
}

func setDefault[T int | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// TCP is the production Transport: length-prefixed msgpack frames over
// TCP, optionally inside mutual TLS.
//
// Per peer it keeps two outbound connections, reused for as long as they
// work: a control lane for lease and other small messages, and a bulk lane
// for messages that carry entries (Append, FetchReply), whose acks bound
// the frames in flight (TCPConfig.AppendWindow).
// Each snapshot stream gets a connection of its own. Every connection
// starts with a handshake naming the cluster, the sender, the intended
// receiver and the lane; a mismatch is refused and logged with the reason.
// A connection is one-way for messages: replies travel on the replier's own
// outbound connection.
//
// Input is never trusted: frames are bounded (MaxFrameSize, and 1 KiB
// before the handshake), versioned and fully validated; a message must come
// from the process the connection's handshake named; reads time out when a
// peer is idle too long or stalls mid-frame. Any violation closes that one
// connection with a log line saying why.
type TCP struct {
	cfg   TCPConfig
	log   *slog.Logger
	ln    net.Listener
	tls   *tlsConfigs
	inbox *inbox
	snaps chan *wire.IncomingSnapshot
	addr  string
	// announced is the address hellos carry (hello.Addr): addr, or "" if
	// no peer could dial it. incarnation goes with it (Announce).
	announced   string
	incarnation atomic.Uint64
	watch       atomic.Pointer[func(edict.ProcessID, string, uint64)]

	closing   chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup
	inbound   chan struct{} // semaphore of MaxInboundConns

	mu    sync.Mutex
	peers map[edict.ProcessID]*peer
	conns map[net.Conn]struct{} // accepted and snapshot connections, for Close
	// heard is the newest address each peer announced, by incarnation.
	heard map[edict.ProcessID]announcement
}

// announcement is where a peer said it listens, and in which life.
type announcement struct {
	addr        string
	incarnation uint64
}

// NewTCP listens on cfg.BindAddr and returns a running transport.
func NewTCP(cfg TCPConfig) (*TCP, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	t := &TCP{
		cfg:     c,
		log:     c.Logger.With("component", "transport", "node", c.ID),
		inbox:   newInbox(c.InboxSize, c.AppendWindow),
		snaps:   make(chan *wire.IncomingSnapshot),
		closing: make(chan struct{}),
		inbound: make(chan struct{}, c.MaxInboundConns),
		peers:   map[edict.ProcessID]*peer{},
		conns:   map[net.Conn]struct{}{},
		heard:   map[edict.ProcessID]announcement{},
	}
	if c.TLS != nil {
		if t.tls, err = loadTLS(c.TLS); err != nil {
			t.inbox.close()
			return nil, err
		}
	}
	if t.ln, err = net.Listen("tcp", c.BindAddr); err != nil {
		t.inbox.close()
		return nil, fmt.Errorf("transport: listen on %s: %w", c.BindAddr, err)
	}
	t.addr = c.AdvertiseAddr
	t.announced = c.AdvertiseAddr
	if t.addr == "" {
		t.addr = t.ln.Addr().String()
		if ap, err := netip.ParseAddrPort(t.addr); err == nil && !ap.Addr().IsUnspecified() {
			t.announced = t.addr
		}
	}
	for id, addr := range c.Peers {
		t.AddPeer(id, addr)
	}
	t.wg.Add(1)
	go t.acceptLoop()
	t.log.Info("transport listening", "addr", t.addr, "tls", t.tls != nil)
	return t, nil
}

// ID implements Transport.
func (t *TCP) ID() edict.ProcessID { return t.cfg.ID }

// LocalAddr implements Transport.
func (t *TCP) LocalAddr() string { return t.addr }

// PeerAddr returns the address the transport reaches peer id at, if it
// knows id.
func (t *TCP) PeerAddr(id edict.ProcessID) (string, bool) {
	t.mu.Lock()
	p, ok := t.peers[id]
	t.mu.Unlock()
	if !ok {
		return "", false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.addr, true
}

// Announce sets the incarnation that this node's hellos carry beside its
// address from now on (a number higher in every later life of the node,
// such as edictlog.Node.Incarnation), and connects to every known peer at
// once, so that each learns where this node listens without waiting for
// a message to it: a peer that had it at an older address reaches it at
// the new one from then on. Connections already open keep the hello they
// were opened with. edictlog.Node calls it when it starts, before it sends
// anything.
func (t *TCP) Announce(incarnation uint64) {
	t.incarnation.Store(incarnation)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.isClosing() {
		return
	}
	for _, p := range t.peers {
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			p.control.connectNow()
		}()
	}
}

// WatchAddresses has f called with the address a peer says it listens at
// and the incarnation it says it is in, from the hello of a connection
// it opened to this node, whenever they differ from the last it said:
// only for a peer that proves the id it claims (without TLS any peer; with
// mutual TLS, one whose certificate names the id, TLSFiles), and never for
// an incarnation below one heard from the same id. f runs on the
// connection's goroutine before the connection carries anything: it must
// be quick and must not call the transport. A later call replaces f; nil
// stops the calls.
func (t *TCP) WatchAddresses(f func(id edict.ProcessID, addr string, incarnation uint64)) {
	if f == nil {
		t.watch.Store(nil)
		return
	}
	t.watch.Store(&f)
}

// heardAddress takes the address in an accepted hello from a peer of
// identity pi (WatchAddresses).
func (t *TCP) heardAddress(h hello, pi peerIdentity) {
	from := edict.ProcessID(h.From)
	if h.Addr == "" {
		return
	}
	if !pi.proves(from) {
		t.log.Debug("address not believed: the peer's certificate does not name its id", "peer", from, "addr", h.Addr)
		return
	}
	a := announcement{addr: h.Addr, incarnation: h.Incarnation}
	t.mu.Lock()
	prev, ok := t.heard[from]
	if ok && (a == prev || a.incarnation < prev.incarnation) {
		t.mu.Unlock()
		if a != prev {
			t.log.Info("address of an earlier life ignored", "peer", from, "addr", a.addr, "incarnation", a.incarnation, "newest", prev.incarnation)
		}
		return
	}
	t.heard[from] = a
	t.mu.Unlock()
	if f := t.watch.Load(); f != nil {
		(*f)(from, a.addr, a.incarnation)
	}
}

// Receive implements Transport.
func (t *TCP) Receive() <-chan wire.Message { return t.inbox.out }

// Snapshots implements Transport.
func (t *TCP) Snapshots() <-chan *wire.IncomingSnapshot { return t.snaps }

// AddPeer implements Transport. Changing a peer's address closes its
// connections; the next message dials the new address.
func (t *TCP) AddPeer(id edict.ProcessID, addr string) {
	if id == t.cfg.ID || id == edict.None {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.isClosing() {
		return
	}
	if p, ok := t.peers[id]; ok {
		p.setAddr(addr)
		return
	}
	t.peers[id] = newPeer(t, id, addr)
}

// RemovePeer implements Transport.
func (t *TCP) RemovePeer(id edict.ProcessID) {
	t.mu.Lock()
	p, ok := t.peers[id]
	delete(t.peers, id)
	t.mu.Unlock()
	if ok {
		p.close()
	}
}

// SetPeers implements Transport.
func (t *TCP) SetPeers(peers map[edict.ProcessID]string) {
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

func (t *TCP) peer(id edict.ProcessID) *peer {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.peers[id]
}

// Send implements Transport.
func (t *TCP) Send(ctx context.Context, to edict.ProcessID, m wire.Message) error {
	if t.isClosing() {
		return ErrClosed
	}
	if err := m.Address(t.cfg.ID, to); err != nil {
		return fmt.Errorf("transport: send: %w", err)
	}
	f, err := encodeMessageFrame(m, t.cfg.MaxFrameSize)
	if err != nil {
		return err
	}
	if to == t.cfg.ID {
		// Loopback still goes through the codec, so a process's messages to
		// itself are copies and meet the same checks as any other.
		body := f[frameHeaderSize:]
		cp, err := decodeMessage(body)
		if err != nil {
			return err
		}
		if !t.inbox.deliver(cp, ctx.Done()) {
			return fmt.Errorf("transport: send %v to self: %w", m.Kind(), context.Cause(ctx))
		}
		return nil
	}
	p := t.peer(to)
	if p == nil {
		return fmt.Errorf("%w %v", ErrUnknownPeer, to)
	}
	if m.Kind().Bulk() {
		return p.appends.enqueue(ctx, f)
	}
	return p.control.enqueue(ctx, f)
}

func (t *TCP) isClosing() bool {
	select {
	case <-t.closing:
		return true
	default:
		return false
	}
}

// Close implements Transport.
func (t *TCP) Close() error {
	t.closeOnce.Do(func() {
		close(t.closing)
		t.ln.Close()
		t.mu.Lock()
		peers := t.peers
		t.peers = map[edict.ProcessID]*peer{}
		for c := range t.conns {
			c.Close()
		}
		t.mu.Unlock()
		for _, p := range peers {
			p.close()
		}
		t.inbox.close()
		t.wg.Wait()
		close(t.snaps) // every sender to snaps was in wg
		t.log.Info("transport closed")
	})
	return nil
}

// track registers a connection for Close; it reports false if the
// transport is already closing (the caller then closes it).
func (t *TCP) track(c net.Conn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.isClosing() {
		return false
	}
	t.conns[c] = struct{}{}
	return true
}

func (t *TCP) untrack(c net.Conn) {
	t.mu.Lock()
	delete(t.conns, c)
	t.mu.Unlock()
}
