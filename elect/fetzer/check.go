package fetzer

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect"
	"github.com/edictlog/edictlog/internal/detsim"
)

// This file checks the specification of §V — (T), (SO), (BI), (LS) — and
// the single leader of the majority mode (§X) against the simulator's
// ground truth after every step of every process. It is not test-only
// because Claims uses it.
//
// Ground truth, with the paper's predicates instantiated for detsim:
// connected(p, q, s, t) holds when both are up and on the same side of the
// partition throughout [s, t] (detsim delays are ≤ δ and the checked runs
// lose nothing); a stable partition (a Δ-partition, §IV) is a side of the
// partition, restricted to the processes that are up, since the last
// change of that set; Leader_p and supports^t(q, p) are as §IX defines
// them for the protocol: Leader?() and q ∈ supportSet_p.

// view is one process's state at a check: whether it is leader, and its
// support set.
type view struct {
	id      edict.ProcessID
	leader  bool
	support []edict.ProcessID
}

// world is a simulation of Electors with its checker.
type world struct {
	sim    *detsim.Sim
	base   Config
	kappa  time.Duration
	minSup int
	procs  map[edict.ProcessID]*watched

	group     map[edict.ProcessID]int // the partition; nil when healed
	connSince map[[2]edict.ProcessID]time.Duration
	// stable: each current stable partition (key) and when it formed.
	stable map[string]formation

	lastLeader map[edict.ProcessID]time.Duration
	wasLeader  map[edict.ProcessID]bool
	// starts is every start of a leadership, in order.
	starts []start

	checks     int
	violations []string
	// safetyOnly skips (T) and (BI), which hold only for connected
	// processes: for runs with message loss.
	safetyOnly bool
	// onCheck, if set, sees every checked state (for measurements).
	onCheck func(t time.Duration, views []view)
}

type formation struct {
	members []edict.ProcessID
	since   time.Duration
}

type start struct {
	at      time.Duration
	id      edict.ProcessID
	support []edict.ProcessID
}

// watched wraps an Elector so that the world checks after each step.
type watched struct {
	*Elector
	w    *world
	rate float64 // clock readings per virtual nanosecond
}

func (p *watched) learn(now edict.Time) {
	if t := p.w.sim.Now(); t > 0 {
		p.rate = float64(now.Nanos) / float64(t)
	}
}

func (p *watched) Tick(now edict.Time) {
	p.Elector.Tick(now)
	p.learn(now)
	p.w.step()
}

func (p *watched) Receive(now edict.Time, from edict.ProcessID, payload []byte) {
	p.Elector.Receive(now, from, payload)
	p.learn(now)
	p.w.step()
}

// reading estimates p's clock at the current virtual time.
func (p *watched) reading() edict.Time {
	return edict.Time{Incarnation: p.cfg.Incarnation, Nanos: int64(math.Round(float64(p.w.sim.Now()) * p.rate))}
}

// newWorld starts n Electors configured like base (ID, Members and
// Incarnation are filled in) on a simulator configured like sc.
// tweak, if given, adjusts each Elector before it starts.
func newWorld(n int, base Config, sc detsim.Config, tweak ...func(*Elector)) *world {
	w := &world{base: base, kappa: base.Kappa(), procs: map[edict.ProcessID]*watched{},
		connSince: map[[2]edict.ProcessID]time.Duration{}, stable: map[string]formation{},
		lastLeader: map[edict.ProcessID]time.Duration{}, wasLeader: map[edict.ProcessID]bool{}}
	sc.N = n
	sc.New = func(id edict.ProcessID, members []edict.ProcessID, inc uint64) elect.Protocol {
		c := base
		c.ID, c.Members, c.Incarnation = id, members, inc
		p := &watched{Elector: New(c), w: w, rate: 1}
		for _, f := range tweak {
			f(p.Elector)
		}
		w.procs[id] = p
		return p
	}
	w.sim = detsim.New(sc)
	w.minSup = w.procs[1].cfg.MinSupporters()
	w.topology()
	return w
}

func (w *world) partition(groups ...[]edict.ProcessID) {
	w.sim.Partition(groups...)
	w.group = map[edict.ProcessID]int{}
	for _, id := range w.sim.Members() {
		w.group[id] = -int(id)
	}
	for i, g := range groups {
		for _, id := range g {
			w.group[id] = i
		}
	}
	w.topology()
}

func (w *world) heal()                      { w.sim.Heal(); w.group = nil; w.topology() }
func (w *world) crash(id edict.ProcessID)   { w.sim.Crash(id); w.topology() }
func (w *world) recover(id edict.ProcessID) { w.sim.Recover(id); w.topology() }

func (w *world) side(id edict.ProcessID) int {
	if w.group == nil {
		return 0
	}
	return w.group[id]
}

// topology updates the connected pairs and the stable partitions after a
// partition, heal, crash or recovery.
func (w *world) topology() {
	now := w.sim.Now()
	ms := w.sim.Members()
	for _, p := range ms {
		for _, q := range ms {
			k := [2]edict.ProcessID{p, q}
			if w.sim.Up(p) && w.sim.Up(q) && w.side(p) == w.side(q) {
				if _, ok := w.connSince[k]; !ok {
					w.connSince[k] = now
				}
			} else {
				delete(w.connSince, k)
			}
		}
	}
	sides := map[int][]edict.ProcessID{}
	for _, p := range ms {
		if w.sim.Up(p) {
			sides[w.side(p)] = append(sides[w.side(p)], p)
		}
	}
	stable := map[string]formation{}
	for _, g := range sides {
		k := fmt.Sprint(g)
		if f, ok := w.stable[k]; ok {
			stable[k] = f
		} else {
			stable[k] = formation{members: g, since: now}
		}
	}
	w.stable = stable
}

// step checks the current state of every process.
func (w *world) step() {
	if w.sim == nil {
		return // still being built
	}
	var views []view
	for _, id := range w.sim.Members() {
		p := w.procs[id]
		if !w.sim.Up(id) {
			continue
		}
		now := p.reading()
		views = append(views, view{id: id, leader: p.IsLeader(now), support: p.Support(now)})
	}
	w.check(w.sim.Now(), views)
}

func (w *world) fail(t time.Duration, format string, args ...any) {
	if len(w.violations) < 20 {
		w.violations = append(w.violations, fmt.Sprintf("t=%v: ", t)+fmt.Sprintf(format, args...))
	}
}

// check states the requirements of §V for views at virtual time t.
func (w *world) check(t time.Duration, views []view) {
	w.checks++
	supported := map[edict.ProcessID][]edict.ProcessID{} // supporter → leaders
	leaders := 0
	for _, v := range views {
		if !v.leader {
			w.wasLeader[v.id] = false
			continue
		}
		leaders++
		w.lastLeader[v.id] = t
		if !w.wasLeader[v.id] {
			w.wasLeader[v.id] = true
			w.starts = append(w.starts, start{at: t, id: v.id, support: slices.Clone(v.support)})
		}
		// (LS): a local leader supports itself.
		if !slices.Contains(v.support, v.id) {
			w.fail(t, "LS: leader %v not in its support set %v", v.id, v.support)
		}
		for _, q := range v.support {
			supported[q] = append(supported[q], v.id)
		}
		// (BI): a process connected to the leader for κ supports it.
		for _, q := range w.sim.Members() {
			since, ok := w.connSince[[2]edict.ProcessID{v.id, q}]
			if ok && !w.safetyOnly && q != v.id && t-since >= w.kappa && !slices.Contains(v.support, q) {
				w.fail(t, "BI: %v connected to leader %v since %v but not in %v", q, v.id, since, v.support)
			}
		}
		// §X: in majority mode a leader's logical partition is a majority.
		if len(v.support) < w.minSup {
			w.fail(t, "majority: leader %v with support %v below %d", v.id, v.support, w.minSup)
		}
	}
	// (SO): a process supports at most one process.
	for q, ls := range supported {
		if len(ls) > 1 {
			w.fail(t, "SO: %v supports %v", q, ls)
		}
	}
	if w.minSup > 1 && leaders > 1 {
		w.fail(t, "S: %d leaders in majority mode", leaders)
	}
	// (T): a stable partition of κ has had a leader within the last κ.
	for _, f := range w.stable {
		if w.safetyOnly || len(f.members) < w.minSup || t-f.since < w.kappa {
			continue
		}
		last := time.Duration(-1)
		for _, p := range f.members {
			if l, ok := w.lastLeader[p]; ok && l > last {
				last = l
			}
		}
		if last < 0 || t-last > w.kappa {
			w.fail(t, "T: stable partition %v (since %v) without a leader since %v", f.members, f.since, last)
		}
	}
	if w.onCheck != nil {
		w.onCheck(t, views)
	}
}

// finish checks (T) at the end of a run, when no step may follow.
func (w *world) finish() { w.check(w.sim.Now(), w.views()) }

func (w *world) views() []view {
	var views []view
	for _, id := range w.sim.Members() {
		if p := w.procs[id]; w.sim.Up(id) {
			now := p.reading()
			views = append(views, view{id: id, leader: p.IsLeader(now), support: p.Support(now)})
		}
	}
	return views
}

// firstStart is the first leadership that starts at or after from in
// group (any member), with its delay from from; ok false if none.
func (w *world) firstStart(from time.Duration, group []edict.ProcessID) (start, time.Duration, bool) {
	for _, s := range w.starts {
		if s.at >= from && slices.Contains(group, s.id) {
			return s, s.at - from, true
		}
	}
	return start{}, 0, false
}

// leaders is the current leaders.
func (w *world) leaders() []view {
	var out []view
	for _, v := range w.views() {
		if v.leader {
			out = append(out, v)
		}
	}
	return out
}
