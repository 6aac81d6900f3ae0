package bully

import (
	"slices"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect"
	"github.com/edictlog/edictlog/internal/detsim"
)

// stater is a Protocol whose S(i) the harness can read.
type stater interface {
	elect.Protocol
	State() State
}

// world runs one algorithm in detsim and checks an invariant after every
// step of every process, against the ground truth of who is running.
//
// detsim can only partition the processes into groups; Stoller's
// counterexample needs a non-transitive cut (1–2 and 2–3 connected, 1–3
// not). world adds per-link cuts by dropping, in a wrapper around each
// instance, what arrives over a cut link (detsim still counts it as sent).
type world struct {
	sim   *detsim.Sim
	inst  map[edict.ProcessID]stater
	cut   map[[2]edict.ProcessID]bool
	side  map[edict.ProcessID]int // detsim partition as last set; nil when healed
	check func(map[edict.ProcessID]State) error
	// bad is the first violation of check, with when it happened.
	bad   error
	badAt time.Duration
	steps int
}

// newWorld starts n processes of the algorithm made by mk.
func newWorld(cfg detsim.Config, mk func(Config) stater, check func(map[edict.ProcessID]State) error) *world {
	w := &world{inst: map[edict.ProcessID]stater{}, cut: map[[2]edict.ProcessID]bool{}, check: check}
	cfg.New = func(id edict.ProcessID, members []edict.ProcessID, inc uint64) elect.Protocol {
		p := mk(Config{ID: id, Members: members, Incarnation: inc})
		w.inst[id] = p
		return &watched{stater: p, w: w, id: id}
	}
	w.sim = detsim.New(cfg)
	return w
}

// watched wraps an instance: it drops what arrives over a cut link and
// runs the world's check after each step.
type watched struct {
	stater
	w  *world
	id edict.ProcessID
}

func (p *watched) Tick(now edict.Time) { p.stater.Tick(now); p.w.step() }
func (p *watched) Observe(o elect.Observation) {
	p.stater.Observe(o)
	p.w.step()
}
func (p *watched) Receive(now edict.Time, from edict.ProcessID, b []byte) {
	if p.w.cut[[2]edict.ProcessID{from, p.id}] {
		return
	}
	p.stater.Receive(now, from, b)
	p.w.step()
}

func (w *world) step() {
	w.steps++
	if w.bad != nil || w.check == nil {
		return
	}
	if err := w.check(w.states()); err != nil {
		w.bad, w.badAt = err, w.sim.Now()
	}
}

// states is S(i) of every running process.
func (w *world) states() map[edict.ProcessID]State {
	out := map[edict.ProcessID]State{}
	for _, id := range w.sim.Members() {
		if w.sim.Up(id) {
			out[id] = w.inst[id].State()
		}
	}
	return out
}

// cutLink cuts a–b both ways.
func (w *world) cutLink(a, b edict.ProcessID) {
	w.cut[[2]edict.ProcessID{a, b}] = true
	w.cut[[2]edict.ProcessID{b, a}] = true
}

func (w *world) partition(groups ...[]edict.ProcessID) {
	w.sim.Partition(groups...)
	w.side = map[edict.ProcessID]int{}
	for _, id := range w.sim.Members() {
		w.side[id] = -int(id)
	}
	for i, g := range groups {
		for _, id := range g {
			w.side[id] = i
		}
	}
}

func (w *world) heal() { w.sim.Heal(); w.side = nil }

// graph is the connectivity graph of the running processes.
func (w *world) graph() Graph {
	var live []edict.ProcessID
	for _, id := range w.sim.Members() {
		if w.sim.Up(id) {
			live = append(live, id)
		}
	}
	return Graph{Nodes: live, Connected: func(a, b edict.ProcessID) bool {
		if a == b {
			return true
		}
		if w.side != nil && w.side[a] != w.side[b] {
			return false
		}
		return !w.cut[[2]edict.ProcessID{a, b}]
	}}
}

// highestUp is the strongest running process.
func (w *world) highestUp() edict.ProcessID {
	ids := w.sim.Members()
	slices.Reverse(ids)
	for _, id := range ids {
		if w.sim.Up(id) {
			return id
		}
	}
	return edict.None
}

// untilHolds runs until check holds of the states, looking after every
// event; it returns the time it took, or false at limit.
func (w *world) untilHolds(limit time.Duration, check func(map[edict.ProcessID]State) error) (time.Duration, bool) {
	start := w.sim.Now()
	for w.sim.Now() < start+limit {
		if check(w.states()) == nil {
			return w.sim.Now() - start, true
		}
		w.sim.RunFor(10 * time.Microsecond)
	}
	return w.sim.Now() - start, check(w.states()) == nil
}
