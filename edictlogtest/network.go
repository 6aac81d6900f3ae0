package edictlogtest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/edictlog/edictlog/edict"
)

// Link is what one direction of the link between two processes does to
// the messages and snapshot streams it carries. The zero Link is a
// perfect link: no loss, no delay.
type Link struct {
	// Cut loses everything: messages sent while it is set, messages in
	// flight when it is set (at once, as a connection breaks), and
	// snapshot streams, which fail; a cut of
	// the way back loses a stream's result, which the receiver has acted
	// on: its sender sees a failure.
	Cut bool
	// Drop is the probability in [0, 1] that a message is lost, drawn
	// per message. A snapshot stream is refused with this probability
	// when it starts (a failed dial); once started it is a reliable
	// stream, as a TCP connection is, which only a cut breaks.
	Drop float64
	// MinDelay and MaxDelay bound a message's delay, drawn uniformly
	// between them per message (MaxDelay below MinDelay is taken as
	// MinDelay). Messages of one lane (control, or bulk appends) are
	// delivered in the order they were sent, as on one TCP connection:
	// a message waits for the one before it. A snapshot stream is
	// delayed once at its start, and its result once at its end.
	MinDelay, MaxDelay time.Duration
}

func (l Link) validate() error {
	switch {
	case l.Drop < 0 || l.Drop > 1 || l.Drop != l.Drop:
		return fmt.Errorf("edictlogtest: Link.Drop %v outside [0, 1]", l.Drop)
	case l.MinDelay < 0 || l.MaxDelay < 0:
		return errors.New("edictlogtest: negative Link delay")
	}
	return nil
}

// NetworkConfig configures a Network. Zero fields take the defaults named
// on each; they are those of package transport's TCP, so that a Node sees
// the same bounds in tests as in production.
type NetworkConfig struct {
	// Seed seeds the draws of drops and delays (default 1). Delivery
	// still depends on goroutine scheduling: a seed makes faults alike
	// from run to run, not runs identical.
	Seed uint64
	// ControlQueue bounds the control messages (lease messages, replies,
	// probes) queued from one process to another (default 1024).
	ControlQueue int
	// AppendWindow bounds the bulk messages (Append, FetchReply) in
	// flight from one process to another: sent but not yet queued for the
	// receiver's runtime (default 64). Send of a bulk message waits for
	// room, up to its context, as TCP's does.
	AppendWindow int
	// InboxSize bounds the control messages received and not yet taken
	// from Receive (default 1024); received appends are bounded by the
	// senders' windows.
	InboxSize int
	// SnapshotChunkSize is the size of the pieces a snapshot stream is
	// carried in (default 64 KiB).
	SnapshotChunkSize int
	// SnapshotTakeTimeout is how long an incoming snapshot stream waits
	// for the receiver to take it from Snapshots before the sender is
	// told "receiver busy" (default 5s, TCP's HandshakeTimeout).
	SnapshotTakeTimeout time.Duration
}

func (c NetworkConfig) withDefaults() NetworkConfig {
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.ControlQueue <= 0 {
		c.ControlQueue = 1024
	}
	if c.AppendWindow <= 0 {
		c.AppendWindow = 64
	}
	if c.InboxSize <= 0 {
		c.InboxSize = 1024
	}
	if c.SnapshotChunkSize <= 0 {
		c.SnapshotChunkSize = 64 << 10
	}
	if c.SnapshotTakeTimeout <= 0 {
		c.SnapshotTakeTimeout = 5 * time.Second
	}
	return c
}

type pair struct{ from, to edict.ProcessID }

// Network connects in-memory Transports, by address, and injects faults
// per directed link between two processes. Faults are set by process id,
// so they hold across a process's restarts. It is safe for concurrent use.
type Network struct {
	cfg NetworkConfig

	mu        sync.Mutex
	rng       *rand.Rand
	def       Link
	links     map[pair]Link
	isolated  map[edict.ProcessID]bool
	endpoints map[string]*Transport // open transports by address
	stats     map[pair]*LinkStats
	closed    bool
	// changed is closed, and replaced, whenever faults change: messages
	// waiting out a delay check whether their link was cut.
	changed chan struct{}
}

// LinkStats counts what became of the messages sent over one direction of
// a link, snapshot streams included.
type LinkStats struct {
	// Sent is what Send accepted (queued, or lost at once to a fault).
	Sent uint64
	// Delivered reached the receiver's inbox.
	Delivered uint64
	// Dropped were lost to Link.Drop.
	Dropped uint64
	// Cut were lost to a cut (Link.Cut, Partition, Isolate), sent or in
	// flight.
	Cut uint64
	// Unreachable were sent to an address no open transport of the
	// addressee holds (it was killed, or moved), or lost when either end
	// closed while they were in flight.
	Unreachable uint64
	// Full were refused by Send for want of room in the queue or window
	// before its context ended.
	Full uint64
	// Snapshots counts streams started; SnapshotsFailed those that did not
	// deliver their result.
	Snapshots, SnapshotsFailed uint64
}

// NewNetwork returns an empty network with no faults.
func NewNetwork(cfg NetworkConfig) *Network {
	cfg = cfg.withDefaults()
	return &Network{
		cfg:       cfg,
		rng:       rand.New(rand.NewPCG(cfg.Seed, 0x6e6574)),
		links:     map[pair]Link{},
		isolated:  map[edict.ProcessID]bool{},
		endpoints: map[string]*Transport{},
		stats:     map[pair]*LinkStats{},
		changed:   make(chan struct{}),
	}
}

// changes returns a channel closed at the next change of faults.
func (n *Network) changes() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.changed
}

// changedLocked wakes whoever waits on changes; n.mu is held.
func (n *Network) changedLocked() {
	close(n.changed)
	n.changed = make(chan struct{})
}

// DefaultAddr is the address Cluster gives process id, and NewTransport
// when given none.
func DefaultAddr(id edict.ProcessID) string { return fmt.Sprintf("mem:%d", uint64(id)) }

// NewTransport attaches a transport for process id at addr (DefaultAddr(id)
// if empty). An address is held by one open transport at a time: a
// restarted process opens a new transport at the same address once the
// old one is closed, or at another address, as a process restarted on a
// new port.
func (n *Network) NewTransport(id edict.ProcessID, addr string) (*Transport, error) {
	if id == edict.None {
		return nil, errors.New("edictlogtest: NewTransport for process 0")
	}
	if addr == "" {
		addr = DefaultAddr(id)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, errors.New("edictlogtest: network closed")
	}
	if o, ok := n.endpoints[addr]; ok {
		return nil, fmt.Errorf("edictlogtest: address %q is held by the open transport of %v", addr, o.id)
	}
	t := newTransport(n, id, addr)
	n.endpoints[addr] = t
	return t, nil
}

// Close closes every transport attached and refuses new ones.
func (n *Network) Close() {
	n.mu.Lock()
	n.closed = true
	ts := make([]*Transport, 0, len(n.endpoints))
	for _, t := range n.endpoints {
		ts = append(ts, t)
	}
	n.mu.Unlock()
	for _, t := range ts {
		t.Close()
	}
}

func (n *Network) detach(t *Transport) {
	n.mu.Lock()
	if n.endpoints[t.addr] == t {
		delete(n.endpoints, t.addr)
	}
	n.mu.Unlock()
}

func (n *Network) lookup(addr string) *Transport {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.endpoints[addr]
}

// SetLink sets the faults of the link from → to, replacing what was set
// for it before (Partition, Cut, Drop, Delay included; Isolate is kept
// apart and still applies). It panics on a Drop outside [0, 1] or a
// negative delay, as Drop and Delay do: a test's own mistake.
func (n *Network) SetLink(from, to edict.ProcessID, l Link) {
	if err := l.validate(); err != nil {
		panic(err)
	}
	n.mu.Lock()
	n.links[pair{from, to}] = l
	n.changedLocked()
	n.mu.Unlock()
}

// SetDefault sets the faults of every link that has none of its own
// (SetLink, Cut, Drop, Delay, Partition give a link its own).
func (n *Network) SetDefault(l Link) {
	if err := l.validate(); err != nil {
		panic(err)
	}
	n.mu.Lock()
	n.def = l
	n.changedLocked()
	n.mu.Unlock()
}

// Link returns the faults in force on the link from → to.
func (n *Network) Link(from, to edict.ProcessID) Link {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.linkLocked(from, to)
}

func (n *Network) linkLocked(from, to edict.ProcessID) Link {
	l, ok := n.links[pair{from, to}]
	if !ok {
		l = n.def
	}
	if n.isolated[from] || n.isolated[to] {
		l.Cut = true
	}
	return l
}

func (n *Network) update(from, to edict.ProcessID, f func(*Link)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	l, ok := n.links[pair{from, to}]
	if !ok {
		l = n.def
	}
	f(&l)
	if err := l.validate(); err != nil {
		panic(err)
	}
	n.links[pair{from, to}] = l
	n.changedLocked()
}

// Cut cuts the link from → to, one direction only: to hears nothing from
// from, while from still hears to.
func (n *Network) Cut(from, to edict.ProcessID) {
	n.update(from, to, func(l *Link) { l.Cut = true })
}

// Uncut restores the link from → to, keeping its drop and delay.
func (n *Network) Uncut(from, to edict.ProcessID) {
	n.update(from, to, func(l *Link) { l.Cut = false })
}

// Partition cuts every link between a process of a and one of b, both
// ways. Links within a, within b, and to processes in neither are kept.
func (n *Network) Partition(a, b []edict.ProcessID) {
	for _, p := range a {
		for _, q := range b {
			if p != q {
				n.Cut(p, q)
				n.Cut(q, p)
			}
		}
	}
}

// Isolate cuts id off from every process, both ways, until Rejoin or
// Heal, whatever SetLink says of its links.
func (n *Network) Isolate(id edict.ProcessID) {
	n.mu.Lock()
	n.isolated[id] = true
	n.changedLocked()
	n.mu.Unlock()
}

// Rejoin ends Isolate(id).
func (n *Network) Rejoin(id edict.ProcessID) {
	n.mu.Lock()
	delete(n.isolated, id)
	n.changedLocked()
	n.mu.Unlock()
}

// Drop makes the link from → to lose each message with probability p.
func (n *Network) Drop(from, to edict.ProcessID, p float64) {
	n.update(from, to, func(l *Link) { l.Drop = p })
}

// Delay delays each message on the link from → to by a time drawn
// uniformly from [min, max].
func (n *Network) Delay(from, to edict.ProcessID, min, max time.Duration) {
	n.update(from, to, func(l *Link) { l.MinDelay, l.MaxDelay = min, max })
}

// Heal removes every fault: cuts, partitions, isolation, drops and delays,
// the default Link's included.
func (n *Network) Heal() {
	n.mu.Lock()
	n.def = Link{}
	clear(n.links)
	clear(n.isolated)
	n.changedLocked()
	n.mu.Unlock()
}

// Stats returns what became of the messages on the link from → to.
func (n *Network) Stats(from, to edict.ProcessID) LinkStats {
	n.mu.Lock()
	defer n.mu.Unlock()
	if s := n.stats[pair{from, to}]; s != nil {
		return *s
	}
	return LinkStats{}
}

// Addrs returns the addresses of the open transports, by process.
func (n *Network) Addrs() map[edict.ProcessID][]string {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := map[edict.ProcessID][]string{}
	for addr, t := range n.endpoints {
		out[t.id] = append(out[t.id], addr)
	}
	for id := range out {
		slices.Sort(out[id])
	}
	return out
}

func (n *Network) count(from, to edict.ProcessID, f func(*LinkStats)) {
	n.mu.Lock()
	s := n.stats[pair{from, to}]
	if s == nil {
		s = &LinkStats{}
		n.stats[pair{from, to}] = s
	}
	f(s)
	n.mu.Unlock()
}

// fate is what the network decides for one message at send.
type fate uint8

const (
	fateDeliver fate = iota
	fateDropped
	fateCut
)

// decide draws a message's fate and delay on the link from → to, and
// counts it as sent (and as lost, if it is).
func (n *Network) decide(from, to edict.ProcessID) (fate, time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	l := n.linkLocked(from, to)
	s := n.stats[pair{from, to}]
	if s == nil {
		s = &LinkStats{}
		n.stats[pair{from, to}] = s
	}
	s.Sent++
	switch {
	case l.Cut:
		s.Cut++
		return fateCut, 0
	case l.Drop > 0 && n.rng.Float64() < l.Drop:
		s.Dropped++
		return fateDropped, 0
	}
	return fateDeliver, n.drawDelay(l)
}

func (n *Network) drawDelay(l Link) time.Duration {
	d := l.MinDelay
	if l.MaxDelay > l.MinDelay {
		d += time.Duration(n.rng.Int64N(int64(l.MaxDelay-l.MinDelay) + 1))
	}
	return d
}

// delay draws a delay on the link from → to, for what is not subject to
// its drops (a snapshot stream's result).
func (n *Network) delay(from, to edict.ProcessID) time.Duration {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.drawDelay(n.linkLocked(from, to))
}

// isCut reports whether the link from → to is cut now: a message in
// flight is lost to a cut made after it was sent.
func (n *Network) isCut(from, to edict.ProcessID) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.linkLocked(from, to).Cut
}
