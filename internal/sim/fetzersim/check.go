// Package fetzersim checks Fetzer and Cristian's local leader election
// (elect/fetzer) against its paper in the simulator's ProtocolRun: the
// specification of §V — (T), (SO), (BI), (LS) — and the single leader of
// the majority mode (§X), checked against ground truth after every step of
// every process, with negative controls; and Claims, the paper-versus-
// measured table of docs/detectors.md.
//
// Ground truth, with the paper's predicates instantiated for the
// simulator: connected(p, q, s, t) holds when both are up and the links
// between them are not cut throughout [s, t] (delays are ≤ δ, and the runs
// that check (T) and (BI) lose nothing); a stable partition (a
// Δ-partition, §IV) is a set of up processes connected to each other and
// cut off from the rest, since the last change of that set; Leader_p and
// supports^t(q, p) are as §IX defines them for the protocol: Leader?() and
// q ∈ supportSet_p.
package fetzersim

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect"
	"github.com/edictlog/edictlog/elect/fetzer"
	"github.com/edictlog/edictlog/internal/sim"
)

// view is one process's state at a check: whether it is leader, and its
// support set.
type view struct {
	id      edict.ProcessID
	leader  bool
	support []edict.ProcessID
}

// World is a simulation of Electors with its checker.
type World struct {
	Sim    *sim.ProtocolRun
	base   fetzer.Config
	kappa  time.Duration
	minSup int
	procs  map[edict.ProcessID]*fetzer.Elector // the current instance of each

	connSince map[[2]edict.ProcessID]time.Duration
	// stable: each current stable partition (key) and when it formed.
	stable map[string]formation

	lastLeader map[edict.ProcessID]time.Duration
	wasLeader  map[edict.ProcessID]bool
	// starts is every start of a leadership, in order.
	starts []start

	checks     int
	violations []string
	// SafetyOnly skips (T) and (BI), which hold only for connected
	// processes: for runs with message loss.
	SafetyOnly bool
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

// NewWorld starts n Electors configured like base (ID, Members and
// Incarnation are filled in) on a simulator configured like sc, checked
// after every step. tweak, if given, adjusts each Elector before it
// starts.
func NewWorld(n int, base fetzer.Config, sc sim.ProtocolConfig, tweak ...func(*fetzer.Elector)) *World {
	w := &World{base: base, kappa: base.Kappa(), procs: map[edict.ProcessID]*fetzer.Elector{},
		connSince: map[[2]edict.ProcessID]time.Duration{}, stable: map[string]formation{},
		lastLeader: map[edict.ProcessID]time.Duration{}, wasLeader: map[edict.ProcessID]bool{}}
	sc.N = n
	sc.New = func(id edict.ProcessID, members []edict.ProcessID, inc uint64) elect.Protocol {
		c := base
		c.ID, c.Members, c.Incarnation = id, members, inc
		e := fetzer.New(c)
		for _, f := range tweak {
			f(e)
		}
		w.procs[id] = e
		return e
	}
	sc.OnStep = func(edict.ProcessID) { w.step() }
	w.Sim = sim.NewProtocolRun(sc)
	w.minSup = w.procs[1].Config().MinSupporters()
	w.topology()
	return w
}

// Partition, Heal, Crash and Recover change the simulation and the
// checker's idea of who is connected.
func (w *World) Partition(groups ...[]edict.ProcessID) { w.Sim.Partition(groups...); w.topology() }
func (w *World) Heal()                                 { w.Sim.Heal(); w.topology() }
func (w *World) Crash(id edict.ProcessID)              { w.Sim.Crash(id); w.topology() }
func (w *World) Recover(id edict.ProcessID)            { w.Sim.Recover(id); w.topology() }

// Violations are the first violations found (at most 20).
func (w *World) Violations() []string { return slices.Clone(w.violations) }

// Reports says whether the checker reported a violation of prop ("T",
// "SO", "BI", "LS", "majority", "S").
func (w *World) Reports(prop string) bool {
	for _, v := range w.violations {
		if strings.Contains(v, ": "+prop+":") {
			return true
		}
	}
	return false
}

// connected: both up, and the links both ways not cut.
func (w *World) connected(p, q edict.ProcessID) bool {
	return w.Sim.Up(p) && w.Sim.Up(q) && w.Sim.Connected(p, q) && w.Sim.Connected(q, p)
}

// topology updates the connected pairs and the stable partitions after a
// partition, heal, crash or recovery.
func (w *World) topology() {
	now := w.Sim.Now()
	ms := w.Sim.Members()
	for _, p := range ms {
		for _, q := range ms {
			k := [2]edict.ProcessID{p, q}
			if w.connected(p, q) {
				if _, ok := w.connSince[k]; !ok {
					w.connSince[k] = now
				}
			} else {
				delete(w.connSince, k)
			}
		}
	}
	// The stable partitions: the up processes grouped by connection (an
	// equivalence for the partitions these runs make).
	var sides [][]edict.ProcessID
	for _, p := range ms {
		if !w.Sim.Up(p) {
			continue
		}
		i := slices.IndexFunc(sides, func(g []edict.ProcessID) bool { return w.connected(g[0], p) })
		if i < 0 {
			sides = append(sides, nil)
			i = len(sides) - 1
		}
		sides[i] = append(sides[i], p)
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
func (w *World) step() {
	if w.Sim == nil {
		return // still being built
	}
	w.check(w.Sim.Now(), w.views())
}

func (w *World) fail(t time.Duration, format string, args ...any) {
	if len(w.violations) < 20 {
		w.violations = append(w.violations, fmt.Sprintf("t=%v: ", t)+fmt.Sprintf(format, args...))
	}
}

// check states the requirements of §V for views at virtual time t.
func (w *World) check(t time.Duration, views []view) {
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
		for _, q := range w.Sim.Members() {
			since, ok := w.connSince[[2]edict.ProcessID{v.id, q}]
			if ok && !w.SafetyOnly && q != v.id && t-since >= w.kappa && !slices.Contains(v.support, q) {
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
		if w.SafetyOnly || len(f.members) < w.minSup || t-f.since < w.kappa {
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

// Finish checks (T) at the end of a run, when no step may follow.
func (w *World) Finish() { w.check(w.Sim.Now(), w.views()) }

func (w *World) views() []view {
	var views []view
	for _, id := range w.Sim.Members() {
		if p := w.procs[id]; w.Sim.Up(id) {
			now := w.Sim.Reading(id)
			views = append(views, view{id: id, leader: p.IsLeader(now), support: p.Support(now)})
		}
	}
	return views
}

// local is p's LocalLeader now.
func (w *World) local(p edict.ProcessID) (edict.ProcessID, []edict.ProcessID, bool) {
	return w.procs[p].LocalLeader(w.Sim.Reading(p))
}

func scale(d time.Duration, f float64) time.Duration {
	return time.Duration(math.Round(float64(d) * f))
}

// firstStart is the first leadership that starts at or after from in
// group (any member), with its delay from from; ok false if none.
func (w *World) firstStart(from time.Duration, group []edict.ProcessID) (start, time.Duration, bool) {
	for _, s := range w.starts {
		if s.at >= from && slices.Contains(group, s.id) {
			return s, s.at - from, true
		}
	}
	return start{}, 0, false
}

// leaders is the current leaders.
func (w *World) leaders() []view {
	var out []view
	for _, v := range w.views() {
		if v.leader {
			out = append(out, v)
		}
	}
	return out
}
