package sim

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect"
)

// ProtocolConfig describes a run of weak leader elections (elect.Protocol)
// on their own, without the lease protocol around them: the world, clocks,
// network and timers of the lease and log runs, driving each process's
// Protocol instance directly, so that an algorithm's paper can be checked
// against ground truth (who is up, which links are cut, when every process
// changed its mind).
type ProtocolConfig struct {
	// N processes, ids 1..N.
	N int
	// New builds process id's instance; incarnation counts its starts
	// from 1 (a recovery is a new incarnation, with a new instance).
	New func(id edict.ProcessID, members []edict.ProcessID, incarnation uint64) elect.Protocol
	// MinDelay and MaxDelay bound a message's delay (default 1ms, 5ms).
	// Delays are whole microseconds at most MaxDelay when MaxDelay is.
	MinDelay, MaxDelay time.Duration
	// Loss is the probability that a message is lost.
	Loss float64
	// GST, if positive, is when the network turns good: from then on
	// nothing is lost, no link is cut or slow, and every message takes
	// [MinDelay, MaxDelay]. Zero: the faults last the whole run.
	GST time.Duration
	// Rho bounds the clocks' drift: each runs at a fixed rate drawn from
	// [1−Rho, 1+Rho], from a random offset.
	Rho  float64
	Seed uint64
	// FailureDetector, if positive, feeds every other running process
	// ProcessDown and ProcessUp observations that long after a crash or
	// recovery, all at the same instant (a perfect failure detector with
	// that detection time); zero feeds none.
	FailureDetector time.Duration
	// OnStep, if set, is called after every step of a running process —
	// a Tick, a message delivered, an observation — once its messages
	// have been sent: the place for checks against ground truth.
	OnStep func(id edict.ProcessID)
}

// Change is one process changing its opinion of the weak leader.
type Change struct {
	At       time.Duration
	Process  edict.ProcessID
	From, To edict.ProcessID
}

// ProtocolRun is one run of a ProtocolConfig. Like every run of this
// package it is deterministic: one seed, one run. Tests script it (crash,
// recover, cut links, run for a while) and read ground truth from it.
//
// Virtual time advances in whole microseconds (the world's quantum), so a
// timer fires at the first microsecond at which its process's clock
// reads at least the deadline, never before; RunFor and RunUntil stop on
// a microsecond too.
type ProtocolRun struct {
	cfg     ProtocolConfig
	w       *world
	sc      Scenario // the network's parameters
	net     *network
	procs   map[edict.ProcessID]*protoProc
	members []edict.ProcessID

	// Changes is every change of opinion, in order.
	Changes []Change
	// Sent counts messages handed to the network, per directed link
	// (lost ones included); Bytes their payload bytes.
	Sent  map[[2]edict.ProcessID]int
	Bytes int
}

type protoProc struct {
	id      edict.ProcessID
	clock   *clock
	inc     uint64
	p       elect.Protocol // nil while crashed
	tick    tickTimer
	next    edict.Time // the NextTick the timer is armed for
	opinion edict.ProcessID
}

// NewProtocolRun starts every process at virtual time 0.
func NewProtocolRun(cfg ProtocolConfig) *ProtocolRun {
	if cfg.MinDelay <= 0 {
		cfg.MinDelay = time.Millisecond
	}
	if cfg.MaxDelay < cfg.MinDelay {
		cfg.MaxDelay = max(cfg.MinDelay, 5*time.Millisecond)
	}
	r := &ProtocolRun{cfg: cfg, w: newWorld(cfg.Seed), procs: map[edict.ProcessID]*protoProc{},
		Sent: map[[2]edict.ProcessID]int{}}
	r.sc = Scenario{MinDelay: cfg.MinDelay, MaxDelay: cfg.MaxDelay, RoundTrip: 2 * cfg.MaxDelay,
		Loss: cfg.Loss, Rho: cfg.Rho, DriftFactor: 1}
	gst := int64(math.MaxInt64)
	if cfg.GST > 0 {
		gst = int64(cfg.GST)
	}
	r.net = &network{w: r.w, sc: &r.sc, gst: gst}
	for i := 1; i <= cfg.N; i++ {
		r.members = append(r.members, edict.ProcessID(i))
	}
	for _, id := range r.members {
		p := &protoProc{id: id, clock: newClock(float64(r.w.rng.Int64N(int64(time.Hour))), 1)}
		p.clock.setRate(0, r.sc.pickRate(r.w))
		r.procs[id] = p
	}
	for _, id := range r.members {
		r.start(r.procs[id])
	}
	return r
}

// Members are the process ids.
func (r *ProtocolRun) Members() []edict.ProcessID { return slices.Clone(r.members) }

// Now is the virtual time.
func (r *ProtocolRun) Now() time.Duration { return time.Duration(r.w.now) }

// Up reports whether id is running.
func (r *ProtocolRun) Up(id edict.ProcessID) bool { return r.procs[id].p != nil }

// Protocol is id's running instance (nil while crashed).
func (r *ProtocolRun) Protocol(id edict.ProcessID) elect.Protocol { return r.procs[id].p }

// Opinion is id's current weak leader (None while crashed).
func (r *ProtocolRun) Opinion(id edict.ProcessID) edict.ProcessID { return r.procs[id].opinion }

// Reading is id's clock now, in its current incarnation.
func (r *ProtocolRun) Reading(id edict.ProcessID) edict.Time {
	p := r.procs[id]
	return p.clock.read(r.w.now, p.inc)
}

// Connected reports whether a message sent now on the directed link
// from → to can arrive: the link is not cut (Partition, Cut). Whether
// the processes are up is Up's question.
func (r *ProtocolRun) Connected(from, to edict.ProcessID) bool {
	return from == to || r.w.now >= r.net.gst || !r.net.isBlocked(from, to)
}

func (r *ProtocolRun) start(p *protoProc) {
	p.inc++
	p.tick.reset()
	p.next = edict.Time{}
	p.p = r.cfg.New(p.id, r.Members(), p.inc)
	r.after(p)
}

// after sends p's outbox, re-arms its timer and records a change of
// opinion; called after every step of p.
func (r *ProtocolRun) after(p *protoProc) {
	if p.p == nil {
		r.note(p, edict.None)
		return
	}
	for _, o := range p.p.Outbox() {
		r.send(p.id, o)
	}
	if next := p.p.NextTick(); next != p.next || !p.tick.pending {
		p.next = next
		p.tick.reset()
		if !next.IsZero() {
			inc := p.inc
			p.tick.arm(r.w, p.clock, p.inc, next, 0, func() bool { return p.p != nil && p.inc == inc }, func() {
				p.p.Tick(p.clock.read(r.w.now, p.inc))
				r.stepped(p)
			})
		}
	}
	r.note(p, p.p.WeakLeader(p.clock.read(r.w.now, p.inc)))
}

// stepped finishes a step of p: after, then the config's check.
func (r *ProtocolRun) stepped(p *protoProc) {
	r.after(p)
	if r.cfg.OnStep != nil && p.p != nil {
		r.cfg.OnStep(p.id)
	}
}

func (r *ProtocolRun) note(p *protoProc, leader edict.ProcessID) {
	if leader != p.opinion {
		r.Changes = append(r.Changes, Change{At: r.Now(), Process: p.id, From: p.opinion, To: leader})
		p.opinion = leader
	}
}

func (r *ProtocolRun) send(from edict.ProcessID, o elect.Outgoing) {
	to, ok := r.procs[o.To]
	if !ok || o.To == from {
		return
	}
	r.Sent[[2]edict.ProcessID{from, o.To}]++
	r.Bytes += len(o.Payload)
	payload := slices.Clone(o.Payload)
	inc := to.inc
	r.net.send(from, o.To, func() {
		// A message sent to an earlier incarnation is lost with it.
		if to.p == nil || to.inc != inc {
			return
		}
		to.p.Receive(to.clock.read(r.w.now, to.inc), from, payload)
		r.stepped(to)
	})
}

// Crash stops id now.
func (r *ProtocolRun) Crash(id edict.ProcessID) {
	p := r.procs[id]
	if p.p == nil {
		return
	}
	p.p = nil
	p.tick.reset()
	r.after(p)
	r.observeAll(elect.ProcessDown, id)
}

// Recover restarts id now with a new instance.
func (r *ProtocolRun) Recover(id edict.ProcessID) {
	p := r.procs[id]
	if p.p != nil {
		return
	}
	r.start(p)
	r.observeAll(elect.ProcessUp, id)
}

// observeAll tells every other running process of a crash or recovery,
// after the failure detector's delay.
func (r *ProtocolRun) observeAll(kind elect.ObservationKind, id edict.ProcessID) {
	if r.cfg.FailureDetector <= 0 {
		return
	}
	r.w.after(r.cfg.FailureDetector, func() {
		for _, q := range r.members {
			p := r.procs[q]
			if q == id || p.p == nil {
				continue
			}
			p.p.Observe(elect.Observation{Kind: kind, Process: id, At: p.clock.read(r.w.now, p.inc)})
			r.stepped(p)
		}
	})
}

// Partition splits the processes into groups that cannot exchange
// messages (a process in no group is alone), replacing every cut link.
// Messages already under way still arrive.
func (r *ProtocolRun) Partition(groups ...[]edict.ProcessID) { r.net.split(r.members, groups...) }

// Cut drops every message sent from now on over the directed link
// from → to, until Heal or a Partition.
func (r *ProtocolRun) Cut(from, to edict.ProcessID) { r.net.block(from, to) }

// Heal ends the partition and every cut.
func (r *ProtocolRun) Heal() { r.net.heal() }

// Slow makes the directed link from → to deliver nothing sent on it
// before virtual time until (a slow link that loses nothing), unless GST
// comes first.
func (r *ProtocolRun) Slow(from, to edict.ProcessID, until time.Duration) {
	r.net.slowUntil(from, to, int64(until))
}

// RunFor advances virtual time by d.
func (r *ProtocolRun) RunFor(d time.Duration) { r.RunUntil(r.Now() + d) }

// RunUntil runs every event up to virtual time t, rounded up to a
// microsecond, and stops there.
func (r *ProtocolRun) RunUntil(t time.Duration) {
	end := quantize(int64(t))
	for r.w.step(end) {
	}
	r.w.now = max(r.w.now, end)
}

// Agreed reports whether every running process names the same running
// process, and which.
func (r *ProtocolRun) Agreed() (edict.ProcessID, bool) { return r.AgreedAmong(r.members) }

// AgreedAmong is Agreed restricted to the processes of group: the
// leader they agree on must be one of them.
func (r *ProtocolRun) AgreedAmong(group []edict.ProcessID) (edict.ProcessID, bool) {
	leader := edict.None
	for _, id := range group {
		p := r.procs[id]
		if p.p == nil {
			continue
		}
		if leader == edict.None {
			leader = p.opinion
		}
		if p.opinion != leader {
			return edict.None, false
		}
	}
	return leader, leader != edict.None && r.Up(leader) && slices.Contains(group, leader)
}

// UntilAgreed runs until every running process agrees on a running
// leader, looking after every event; it returns how long that took, or
// false if it did not happen within limit.
func (r *ProtocolRun) UntilAgreed(limit time.Duration) (time.Duration, bool) {
	start := r.Now()
	end := quantize(int64(start + limit))
	for {
		if _, ok := r.Agreed(); ok {
			return r.Now() - start, true
		}
		if !r.w.step(end) {
			r.w.now = max(r.w.now, end)
			_, ok := r.Agreed()
			return r.Now() - start, ok
		}
	}
}

// Messages is how many messages were sent in all, and how many directed
// links carried at least one.
func (r *ProtocolRun) Messages() (total, links int) {
	for _, n := range r.Sent {
		total += n
		if n > 0 {
			links++
		}
	}
	return total, links
}

// ResetCounts forgets the message counts, to measure from now.
func (r *ProtocolRun) ResetCounts() {
	r.Sent = map[[2]edict.ProcessID]int{}
	r.Bytes = 0
}

// String describes every process's state, for failure messages.
func (r *ProtocolRun) String() string {
	out := fmt.Sprintf("t=%v", r.Now())
	for _, id := range r.members {
		p := r.procs[id]
		state := "down"
		if p.p != nil {
			state = fmt.Sprintf("leader=%d", p.opinion)
		}
		out += fmt.Sprintf(" p%d:%s", id, state)
	}
	return out
}
