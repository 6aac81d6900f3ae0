package stoller

import (
	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect"
)

// Bully is the Bully_FD algorithm of §4, Figure 1: Garcia-Molina's Bully
// algorithm with its time-outs replaced by a failure detector. It is for
// synchronous systems (reliable FIFO links, bounded delay δ, an accurate
// and complete FD) and satisfies SLE1 and SLE2 there with c = c_S (eq. 5).
type Bully struct {
	node
	down map[edict.ProcessID]bool // lesser nodes reported down in stage 1
}

var _ elect.Protocol = (*Bully)(nil)

// NewBully returns node cfg.ID's Bully_FD instance; by default its FD is
// the Oracle, fed with ProcessDown/ProcessUp observations.
func NewBully(cfg Config) *Bully {
	b := &Bully{down: map[edict.ProcessID]bool{}}
	b.init(cfg, NewOracle, b)
	return b
}

// recovery is "On recovery": incarn was incremented by the caller.
func (b *Bully) recovery(now edict.Time) { b.startStage1(now) }

func (b *Bully) startStage1(now edict.Time) {
	b.status = Elec1
	b.elid = b.newElid()
	clear(b.down)
	if len(b.lesser()) == 0 {
		b.startStage2(now)
		return
	}
	for _, j := range b.lesser() {
		b.fd.Start(now, j)
	}
}

func (b *Bully) startStage2(now edict.Time) {
	b.status = Elec2
	b.acks = nil
	b.pendack = b.self
	b.continStage2(now)
}

func (b *Bully) message(now edict.Time, from edict.ProcessID, m Message) {
	switch m.Kind {
	case Halt:
		// Halting(t, j).
		delete(b.down, from)
		b.fd.Start(now, from)
		b.elid = m.Elid
		b.status = Wait
		b.send(from, Message{Kind: Ack, Elid: m.Elid})
	case Ack:
		b.onAck(now, from, m.Elid)
	case Ldr:
		b.onLdr(now, from, m.Elid)
	case NormQ:
		if b.status != Norm {
			b.send(from, Message{Kind: NotNorm, Elid: m.Elid})
		}
	case NotNorm:
		if b.status == Norm && b.ldr == b.id() && m.Elid == b.elid {
			b.startStage1(now)
		}
	}
}

func (b *Bully) downSig(now edict.Time, j edict.ProcessID) {
	if j < b.id() { // j ∈ lesser(i)
		b.down[j] = true // the figure's "down ⊕= i" is a typo for j
		switch {
		case b.status == Norm && j == b.ldr, b.status == Wait && j == b.elid.Node:
			b.startStage1(now)
		case b.status == Elec1 && b.allLesserDown():
			b.startStage2(now)
		}
		return
	}
	if b.status == Elec2 && j == b.pending() {
		b.continStage2(now)
	}
}

func (b *Bully) allLesserDown() bool {
	for _, j := range b.lesser() {
		if !b.down[j] {
			return false
		}
	}
	return true
}
