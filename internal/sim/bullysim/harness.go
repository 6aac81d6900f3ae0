// Package bullysim checks Garcia-Molina's Bully and Invitation algorithms
// (elect/bully) against the Souto slides' assertions and Stoller's
// corrections, in the simulator's ProtocolRun: Assertions 1 and 3 after
// every step of every process, 2, 4 and 4′ once things settle, the
// election time and message bounds after a coordinator's crash, and
// Stoller's Appendix A counterexample, with negative controls; and Claims,
// the paper-versus-measured table of docs/detectors.md.
package bullysim

import (
	"slices"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect"
	"github.com/edictlog/edictlog/elect/bully"
	"github.com/edictlog/edictlog/internal/sim"
)

// stater is a Protocol whose S(i) the harness can read.
type stater interface {
	elect.Protocol
	State() bully.State
}

// world runs one algorithm in the simulator and checks an invariant after
// every step of every process, against the ground truth of who is running.
// Stoller's counterexample needs a non-transitive cut (1–2 and 2–3
// connected, 1–3 not): the simulator's cut links.
type world struct {
	sim   *sim.ProtocolRun
	inst  map[edict.ProcessID]stater
	check func(map[edict.ProcessID]bully.State) error
	// bad is the first violation of check, with when it happened.
	bad   error
	badAt time.Duration
	steps int
}

// newWorld starts the processes of cfg, each running the algorithm made
// by mk.
func newWorld(cfg sim.ProtocolConfig, mk func(bully.Config) stater, check func(map[edict.ProcessID]bully.State) error) *world {
	w := &world{inst: map[edict.ProcessID]stater{}, check: check}
	cfg.New = func(id edict.ProcessID, members []edict.ProcessID, inc uint64) elect.Protocol {
		p := mk(bully.Config{ID: id, Members: members, Incarnation: inc})
		w.inst[id] = p
		return p
	}
	cfg.OnStep = func(edict.ProcessID) { w.step() }
	w.sim = sim.NewProtocolRun(cfg)
	return w
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
func (w *world) states() map[edict.ProcessID]bully.State {
	out := map[edict.ProcessID]bully.State{}
	for _, id := range w.sim.Members() {
		if w.sim.Up(id) {
			out[id] = w.inst[id].State()
		}
	}
	return out
}

// cutLink cuts a–b both ways.
func (w *world) cutLink(a, b edict.ProcessID) {
	w.sim.Cut(a, b)
	w.sim.Cut(b, a)
}

func (w *world) partition(groups ...[]edict.ProcessID) { w.sim.Partition(groups...) }

func (w *world) heal() { w.sim.Heal() }

// graph is the connectivity graph of the running processes, as the
// simulator's links make it.
func (w *world) graph() Graph {
	var live []edict.ProcessID
	for _, id := range w.sim.Members() {
		if w.sim.Up(id) {
			live = append(live, id)
		}
	}
	return Graph{Nodes: live, Connected: func(a, b edict.ProcessID) bool {
		return w.sim.Connected(a, b) && w.sim.Connected(b, a)
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

// untilHolds runs until check holds of the states, looking every 10µs;
// it returns the time it took, or false at limit.
func (w *world) untilHolds(limit time.Duration, check func(map[edict.ProcessID]bully.State) error) (time.Duration, bool) {
	start := w.sim.Now()
	for w.sim.Now() < start+limit {
		if check(w.states()) == nil {
			return w.sim.Now() - start, true
		}
		w.sim.RunFor(10 * time.Microsecond)
	}
	return w.sim.Now() - start, check(w.states()) == nil
}
