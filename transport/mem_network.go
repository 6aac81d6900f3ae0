package transport

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/edictlog/edictlog/edict"
)

// Faults is what a Network does to the messages on one directed link.
// Every field may be changed while messages flow.
type Faults struct {
	// Cut: the link delivers nothing. Cutting one direction only is a
	// one-way partition.
	Cut bool
	// Drop is the probability that a message is lost.
	Drop float64
	// Duplicate is the probability that a message is delivered twice.
	Duplicate float64
	// DelayMin and DelayMax bound a uniform delay per delivered copy. With
	// a range, later messages may overtake earlier ones.
	DelayMin, DelayMax time.Duration
	// Reorder is the probability that a message is held back by up to
	// ReorderDelay (default 5ms) more, so that later ones overtake it.
	Reorder      float64
	ReorderDelay time.Duration
}

// Stats counts what a Network did with the messages sent on it.
type Stats struct {
	Sent       uint64 // Send calls that reached the network
	Delivered  uint64 // copies handed to a receiver's inbox
	Dropped    uint64 // lost to Faults.Drop
	Cut        uint64 // lost to a cut link
	Duplicated uint64 // extra copies made by Faults.Duplicate
	Reordered  uint64 // messages held back by Faults.Reorder
	Lost       uint64 // lost at the receiver: closed, or its inbox full
}

type link struct{ from, to edict.ProcessID }

// Network connects Mem transports and injects faults between them. Fault
// decisions come from one seeded source, so a test that sends the same
// messages in the same order sees the same drops, duplicates and delays;
// timing itself is real time (for virtual time use internal/sim).
type Network struct {
	mu       sync.Mutex
	rng      *rand.Rand
	nodes    map[edict.ProcessID]*Mem
	links    map[link]Faults
	defaults Faults
	stats    Stats
}

// NewNetwork returns an empty, fault-free network.
func NewNetwork(seed uint64) *Network {
	return &Network{
		rng:   rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		nodes: map[edict.ProcessID]*Mem{},
		links: map[link]Faults{},
	}
}

// Node attaches process id and returns its transport. Every process on
// the network is added as a peer of every other. Calling Node for an id
// whose transport was closed starts it anew (a restart); for a live one it
// is an error.
func (n *Network) Node(id edict.ProcessID) (*Mem, error) {
	if id == edict.None {
		return nil, fmt.Errorf("transport: process id 0 is reserved")
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if old, ok := n.nodes[id]; ok && !old.isClosing() {
		return nil, fmt.Errorf("transport: %v is already on this network", id)
	}
	m := &Mem{
		net:     n,
		id:      id,
		inbox:   newInbox(1024, 1024),
		snaps:   make(chan *IncomingSnapshot),
		closing: make(chan struct{}),
		peers:   map[edict.ProcessID]string{},
	}
	for other, om := range n.nodes {
		m.AddPeer(other, memAddr(other))
		om.AddPeer(id, memAddr(id))
	}
	n.nodes[id] = m
	return m, nil
}

// SetDefaultFaults sets the faults of every link without its own.
func (n *Network) SetDefaultFaults(f Faults) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.defaults = f
}

// SetFaults sets the faults of the link from → to.
func (n *Network) SetFaults(from, to edict.ProcessID, f Faults) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.links[link{from, to}] = f
}

// Faults returns the faults in force on the link from → to.
func (n *Network) Faults(from, to edict.ProcessID) Faults {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.faultsLocked(from, to)
}

func (n *Network) faultsLocked(from, to edict.ProcessID) Faults {
	if f, ok := n.links[link{from, to}]; ok {
		return f
	}
	return n.defaults
}

// Cut cuts the link from → to only: to stops hearing from, while from
// still hears to.
func (n *Network) Cut(from, to edict.ProcessID) {
	n.mu.Lock()
	defer n.mu.Unlock()
	f := n.faultsLocked(from, to)
	f.Cut = true
	n.links[link{from, to}] = f
}

// Partition cuts every link, both ways, between processes of different
// groups. Processes in no group keep their links.
func (n *Network) Partition(groups ...[]edict.ProcessID) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for i, g := range groups {
		for j, h := range groups {
			if i == j {
				continue
			}
			for _, a := range g {
				for _, b := range h {
					f := n.faultsLocked(a, b)
					f.Cut = true
					n.links[link{a, b}] = f
				}
			}
		}
	}
}

// Isolate cuts id off from every other process, both ways.
func (n *Network) Isolate(id edict.ProcessID) {
	n.mu.Lock()
	var others []edict.ProcessID
	for o := range n.nodes {
		if o != id {
			others = append(others, o)
		}
	}
	n.mu.Unlock()
	n.Partition([]edict.ProcessID{id}, others)
}

// Heal removes every fault, on every link and the defaults.
func (n *Network) Heal() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.links = map[link]Faults{}
	n.defaults = Faults{}
}

// Stats returns the counters so far.
func (n *Network) Stats() Stats {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.stats
}

// send applies the link's faults to one encoded message body.
func (n *Network) send(from, to edict.ProcessID, body []byte) {
	n.mu.Lock()
	n.stats.Sent++
	f := n.faultsLocked(from, to)
	dst := n.nodes[to]
	var delays []time.Duration
	switch {
	case f.Cut:
		n.stats.Cut++
	case f.Drop > 0 && n.rng.Float64() < f.Drop:
		n.stats.Dropped++
	default:
		copies := 1
		if f.Duplicate > 0 && n.rng.Float64() < f.Duplicate {
			copies = 2
			n.stats.Duplicated++
		}
		for range copies {
			d := f.DelayMin
			if f.DelayMax > f.DelayMin {
				d += time.Duration(n.rng.Int64N(int64(f.DelayMax-f.DelayMin) + 1))
			}
			if f.Reorder > 0 && n.rng.Float64() < f.Reorder {
				hold := f.ReorderDelay
				if hold <= 0 {
					hold = 5 * time.Millisecond
				}
				d += time.Duration(n.rng.Int64N(int64(hold)) + 1)
				n.stats.Reordered++
			}
			delays = append(delays, d)
		}
	}
	n.mu.Unlock()
	for _, d := range delays {
		// Each copy is decoded on its own: a duplicate is a distinct
		// message, as it would be off the wire.
		if d == 0 {
			n.deliver(dst, body)
			continue
		}
		time.AfterFunc(d, func() { n.deliver(dst, body) })
	}
}

func (n *Network) deliver(dst *Mem, body []byte) {
	ok := false
	if dst != nil {
		// Send decoded body once already; decoding is deterministic.
		if m, err := decodeMessage(body); err == nil {
			ok = dst.inbox.tryDeliver(m)
		}
	}
	n.mu.Lock()
	if ok {
		n.stats.Delivered++
	} else {
		n.stats.Lost++
	}
	n.mu.Unlock()
}

// streamTo returns the receiver of a snapshot stream and its delay, or
// false if the link is cut or the receiver is down.
func (n *Network) streamTo(from, to edict.ProcessID) (*Mem, time.Duration, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	f := n.faultsLocked(from, to)
	dst := n.nodes[to]
	if f.Cut || dst == nil || dst.isClosing() {
		return nil, 0, false
	}
	d := f.DelayMin
	if f.DelayMax > f.DelayMin {
		d += time.Duration(n.rng.Int64N(int64(f.DelayMax-f.DelayMin) + 1))
	}
	return dst, d, true
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
