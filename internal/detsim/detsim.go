// Package detsim runs weak leader elections (elect.Protocol) in virtual
// time on a simulated network, so that each paper's claims can be tested
// against ground truth: who is up, who can reach whom, and when every
// process changed its mind.
//
// The simulation is deterministic: one seed, one run. Message delays are
// uniform in [MinDelay, MaxDelay]; a message may be lost (Loss); a
// partition drops every message across it; a crashed process loses its
// instance, and a recovered one starts a new instance with a higher
// incarnation. Each process's clock runs at its own rate within 1 ± Rho of
// virtual time, as the papers' timed models allow.
package detsim

import (
	"container/heap"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect"
)

// Config describes a simulation.
type Config struct {
	// N processes, ids 1..N.
	N int
	// New builds process id's instance; incarnation counts its starts
	// from 1 (a recovery is a new incarnation).
	New func(id edict.ProcessID, members []edict.ProcessID, incarnation uint64) elect.Protocol
	// MinDelay and MaxDelay bound a message's delay (default 1ms, 5ms).
	MinDelay, MaxDelay time.Duration
	// Loss is the probability that a message is lost.
	Loss float64
	// Rho bounds the clocks' drift: each runs at a fixed rate in 1 ± Rho.
	Rho  float64
	Seed uint64
	// FailureDetector, if positive, feeds every process ProcessDown and
	// ProcessUp observations that long after a crash or recovery (a
	// perfect failure detector with that detection time); zero feeds none.
	FailureDetector time.Duration
}

// Change is one process changing its opinion of the weak leader.
type Change struct {
	At       time.Duration
	Process  edict.ProcessID
	From, To edict.ProcessID
}

// Sim is one simulation.
type Sim struct {
	cfg     Config
	rng     *rand.Rand
	now     time.Duration
	seq     uint64
	events  eventHeap
	procs   map[edict.ProcessID]*proc
	members []edict.ProcessID
	group   map[edict.ProcessID]int // partition: a process's side; nil when healed

	// Changes is every change of opinion, in order.
	Changes []Change
	// Sent counts messages handed to the network, per directed link;
	// Bytes their payload bytes.
	Sent  map[[2]edict.ProcessID]int
	Bytes int
}

type proc struct {
	id          edict.ProcessID
	p           elect.Protocol // nil while crashed
	incarnation uint64
	rate        float64
	tickGen     uint64     // invalidates scheduled ticks
	tickAt      edict.Time // the tick scheduled (zero: none)
	opinion     edict.ProcessID
}

// New starts every process at virtual time 0.
func New(cfg Config) *Sim {
	if cfg.MinDelay <= 0 {
		cfg.MinDelay = time.Millisecond
	}
	if cfg.MaxDelay < cfg.MinDelay {
		cfg.MaxDelay = max(cfg.MinDelay, 5*time.Millisecond)
	}
	s := &Sim{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 0xde7)), procs: map[edict.ProcessID]*proc{},
		Sent: map[[2]edict.ProcessID]int{}}
	for i := 1; i <= cfg.N; i++ {
		s.members = append(s.members, edict.ProcessID(i))
	}
	for _, id := range s.members {
		rate := 1 + cfg.Rho*(2*s.rng.Float64()-1)
		s.procs[id] = &proc{id: id, rate: rate}
		s.start(s.procs[id])
	}
	return s
}

// Members are the process ids.
func (s *Sim) Members() []edict.ProcessID { return slices.Clone(s.members) }

// Now is the virtual time.
func (s *Sim) Now() time.Duration { return s.now }

// Up reports whether id is running.
func (s *Sim) Up(id edict.ProcessID) bool { return s.procs[id].p != nil }

// Protocol is id's running instance (nil while crashed), for tests that
// inspect an algorithm's own state.
func (s *Sim) Protocol(id edict.ProcessID) elect.Protocol { return s.procs[id].p }

// Opinion is id's current weak leader (None while crashed).
func (s *Sim) Opinion(id edict.ProcessID) edict.ProcessID { return s.procs[id].opinion }

// reading is id's clock at virtual time t.
func (s *Sim) reading(p *proc, t time.Duration) edict.Time {
	return edict.Time{Incarnation: p.incarnation, Nanos: int64(float64(t) * p.rate)}
}

// virtual is the first virtual time, not before now, at which p's clock
// reads at least r: rounding must never deliver a tick a nanosecond early,
// or a protocol that checks "now ≥ deadline" is ticked at the same instant
// forever.
func (s *Sim) virtual(p *proc, r edict.Time) time.Duration {
	if r.Incarnation != p.incarnation {
		return s.now
	}
	t := time.Duration(float64(r.Nanos) / p.rate)
	for s.reading(p, t).Nanos < r.Nanos {
		t++
	}
	return max(s.now, t)
}

func (s *Sim) start(p *proc) {
	p.incarnation++
	p.tickGen++
	p.tickAt = edict.Time{}
	p.p = s.cfg.New(p.id, s.Members(), p.incarnation)
	s.after(p)
}

// after drains p's outbox, reschedules its tick and records a change of
// opinion; called after every step of p.
func (s *Sim) after(p *proc) {
	if p.p == nil {
		s.note(p, edict.None)
		return
	}
	for _, o := range p.p.Outbox() {
		s.send(p.id, o)
	}
	if next := p.p.NextTick(); next != p.tickAt {
		p.tickGen++
		p.tickAt = next
		if !next.IsZero() {
			gen := p.tickGen
			s.at(s.virtual(p, next), func() {
				if p.p != nil && p.tickGen == gen {
					p.tickAt = edict.Time{}
					p.p.Tick(s.reading(p, s.now))
					s.after(p)
				}
			})
		}
	}
	s.note(p, p.p.WeakLeader(s.reading(p, s.now)))
}

func (s *Sim) note(p *proc, leader edict.ProcessID) {
	if leader != p.opinion {
		s.Changes = append(s.Changes, Change{At: s.now, Process: p.id, From: p.opinion, To: leader})
		p.opinion = leader
	}
}

func (s *Sim) send(from edict.ProcessID, o elect.Outgoing) {
	to, ok := s.procs[o.To]
	if !ok || o.To == from {
		return
	}
	s.Sent[[2]edict.ProcessID{from, o.To}]++
	s.Bytes += len(o.Payload)
	if s.cfg.Loss > 0 && s.rng.Float64() < s.cfg.Loss {
		return
	}
	if s.cut(from, o.To) {
		return
	}
	d := s.cfg.MinDelay + time.Duration(s.rng.Int64N(int64(s.cfg.MaxDelay-s.cfg.MinDelay)+1))
	payload := slices.Clone(o.Payload)
	inc := to.incarnation
	s.at(s.now+d, func() {
		// A message sent to an earlier incarnation, or across a partition
		// made while it was in flight, is lost.
		if to.p == nil || to.incarnation != inc || s.cut(from, o.To) {
			return
		}
		to.p.Receive(s.reading(to, s.now), from, payload)
		s.after(to)
	})
}

func (s *Sim) cut(a, b edict.ProcessID) bool {
	return s.group != nil && s.group[a] != s.group[b]
}

// Crash stops id now.
func (s *Sim) Crash(id edict.ProcessID) {
	p := s.procs[id]
	if p.p == nil {
		return
	}
	p.p = nil
	s.after(p)
	s.observeAll(elect.ProcessDown, id)
}

// Recover restarts id now with a new instance.
func (s *Sim) Recover(id edict.ProcessID) {
	p := s.procs[id]
	if p.p != nil {
		return
	}
	s.start(p)
	s.observeAll(elect.ProcessUp, id)
}

// observeAll tells every other running process of a crash or recovery,
// after the failure detector's delay.
func (s *Sim) observeAll(kind elect.ObservationKind, id edict.ProcessID) {
	if s.cfg.FailureDetector <= 0 {
		return
	}
	s.at(s.now+s.cfg.FailureDetector, func() {
		for _, q := range s.members {
			p := s.procs[q]
			if q == id || p.p == nil {
				continue
			}
			p.p.Observe(elect.Observation{Kind: kind, Process: id, At: s.reading(p, s.now)})
			s.after(p)
		}
	})
}

// Partition splits the processes into groups that cannot exchange
// messages; a process in no group is alone.
func (s *Sim) Partition(groups ...[]edict.ProcessID) {
	s.group = map[edict.ProcessID]int{}
	for _, id := range s.members {
		s.group[id] = -int(id) // alone unless listed
	}
	for i, g := range groups {
		for _, id := range g {
			s.group[id] = i
		}
	}
}

// Heal ends the partition.
func (s *Sim) Heal() { s.group = nil }

// RunFor advances virtual time by d.
func (s *Sim) RunFor(d time.Duration) { s.RunUntil(s.now + d) }

// RunUntil processes every event up to virtual time t.
func (s *Sim) RunUntil(t time.Duration) {
	for len(s.events) > 0 && s.events[0].at <= t {
		e := heap.Pop(&s.events).(*event)
		s.now = e.at
		e.do()
	}
	s.now = max(s.now, t)
}

// Agreed reports whether every running process names the same running
// process, and which.
func (s *Sim) Agreed() (edict.ProcessID, bool) {
	leader := edict.None
	for _, id := range s.members {
		p := s.procs[id]
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
	return leader, leader != edict.None && s.Up(leader)
}

// AgreedAmong is Agreed restricted to the processes of group.
func (s *Sim) AgreedAmong(group []edict.ProcessID) (edict.ProcessID, bool) {
	leader := edict.None
	for _, id := range group {
		p := s.procs[id]
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
	return leader, leader != edict.None && s.Up(leader) && slices.Contains(group, leader)
}

// UntilAgreed runs until every running process agrees on a running
// leader, checking every step; it returns how long that took, or false if
// it did not happen within limit.
func (s *Sim) UntilAgreed(limit time.Duration) (time.Duration, bool) {
	start := s.now
	for {
		if _, ok := s.Agreed(); ok {
			return s.now - start, true
		}
		if len(s.events) == 0 || s.events[0].at > start+limit {
			s.RunUntil(start + limit)
			_, ok := s.Agreed()
			return s.now - start, ok
		}
		e := heap.Pop(&s.events).(*event)
		s.now = e.at
		e.do()
	}
}

// Messages is how many messages were sent in all, and how many directed
// links carried at least one.
func (s *Sim) Messages() (total, links int) {
	for _, n := range s.Sent {
		total += n
		if n > 0 {
			links++
		}
	}
	return total, links
}

// ResetCounts forgets the message counts, to measure from now.
func (s *Sim) ResetCounts() {
	s.Sent = map[[2]edict.ProcessID]int{}
	s.Bytes = 0
}

// String describes every process's state, for failure messages.
func (s *Sim) String() string {
	out := fmt.Sprintf("t=%v", s.now)
	for _, id := range s.members {
		p := s.procs[id]
		state := "down"
		if p.p != nil {
			state = fmt.Sprintf("leader=%d", p.opinion)
		}
		out += fmt.Sprintf(" p%d:%s", id, state)
	}
	return out
}

type event struct {
	at  time.Duration
	seq uint64
	do  func()
}

func (s *Sim) at(t time.Duration, do func()) {
	s.seq++
	heap.Push(&s.events, &event{at: t, seq: s.seq, do: do})
}

type eventHeap []*event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(*event)) }
func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}
