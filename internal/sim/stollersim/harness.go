// Package stollersim checks Stoller's leader elections (elect/stoller)
// against the paper in the simulator's ProtocolRun: SLE1 and ALE1 after
// every step of every process, SLE2 and ALE2′ with the paper's constants
// c_S and c_A, the failure detectors' completeness and accuracy, and the
// message counts after a leader crash, with negative controls; and
// Claims, the paper-versus-measured table of docs/detectors.md.
package stollersim

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect"
	"github.com/edictlog/edictlog/elect/stoller"
	"github.com/edictlog/edictlog/internal/sim"
)

// View is one node's part of a Snapshot: ground truth (Up) and the
// variables the specifications speak of.
type View struct {
	Up bool
	stoller.State
}

// Snapshot is the whole system at one step.
type Snapshot map[edict.ProcessID]View

// SLE1 (§3): operational nodes with status Norm agree on ldr.
func SLE1(s Snapshot) error {
	var first edict.ProcessID
	var ldr edict.ProcessID
	for _, id := range slices.Sorted(maps.Keys(s)) {
		v := s[id]
		if !v.Up || v.Status != stoller.Norm {
			continue
		}
		if first == edict.None {
			first, ldr = id, v.Ldr
		} else if v.Ldr != ldr {
			return fmt.Errorf("SLE1: %v has ldr %v, %v has ldr %v", first, ldr, id, v.Ldr)
		}
	}
	return nil
}

// ALE1 (§5): operational nodes with status Norm in the same group agree
// on ldr.
func ALE1(s Snapshot) error {
	ldr := map[stoller.Elid]edict.ProcessID{}
	for _, id := range slices.Sorted(maps.Keys(s)) {
		v := s[id]
		if !v.Up || v.Status != stoller.Norm {
			continue
		}
		if l, ok := ldr[v.Grp]; ok && l != v.Ldr {
			return fmt.Errorf("ALE1: group %v has leaders %v and %v (at %v)", v.Grp, l, v.Ldr, id)
		}
		ldr[v.Grp] = v.Ldr
	}
	return nil
}

// LdrElected is eq. (3): every operational node is Norm with an
// operational leader. With SLE1 that leader is common.
func LdrElected(s Snapshot) bool {
	n := 0
	for _, v := range s {
		if !v.Up {
			continue
		}
		n++
		if v.Status != stoller.Norm || !s[v.Ldr].Up {
			return false
		}
	}
	return n > 0
}

// LdrsElected is eq. (6): LdrElected, and each node is in its leader's
// group.
func LdrsElected(s Snapshot) bool {
	if !LdrElected(s) {
		return false
	}
	for _, v := range s {
		if v.Up && s[v.Ldr].Grp != v.Grp {
			return false
		}
	}
	return true
}

// Harness runs one algorithm in the simulator and checks a safety property
// (SLE1 or ALE1) and a liveness predicate (LdrElected or LdrsElected)
// against ground truth after every step of every process.
type Harness struct {
	Sim    *sim.ProtocolRun
	Safety func(Snapshot) error
	Live   func(Snapshot) bool

	insts map[edict.ProcessID]Instance
	down  map[edict.ProcessID]bool

	// Violation is the first safety violation seen.
	Violation error
	// Steps counts the snapshots checked.
	Steps int
	// Since is when the system last changed (crash, recovery,
	// partition); ElectedAt when Live last became true (or -1).
	// SLE2 and ALE2′ ask that Live hold by Since+c and remain true while
	// nothing changes; Live may come and go before that (§7: the
	// Asynchronous Bully may elect two leaders, then merge them on
	// Norm?). Relapse records Live becoming false after Since+Bound.
	Since, ElectedAt time.Duration
	Bound            time.Duration
	Relapse          error
	// retired sums the message counts of crashed instances.
	retired map[stoller.Kind]int
}

// Instance is what the harness runs: a Protocol whose State and
// message counts it can read (*Bully, *Async).
type Instance interface {
	elect.Protocol
	State() stoller.State
	Sent() map[stoller.Kind]int
}

// NewHarness starts the nodes of sc, each built by build(cfg) from a
// Config with ID, Members and Incarnation filled in.
func NewHarness(sc sim.ProtocolConfig, build func(stoller.Config) Instance, safety func(Snapshot) error, live func(Snapshot) bool) *Harness {
	h := &Harness{Safety: safety, Live: live, insts: map[edict.ProcessID]Instance{},
		down: map[edict.ProcessID]bool{}, ElectedAt: -1, Bound: -1, retired: map[stoller.Kind]int{}}
	sc.New = func(id edict.ProcessID, members []edict.ProcessID, inc uint64) elect.Protocol {
		if old := h.insts[id]; old != nil {
			for k, v := range old.Sent() {
				h.retired[k] += v
			}
		}
		p := build(stoller.Config{ID: id, Members: members, Incarnation: inc})
		h.insts[id] = p
		return p
	}
	sc.OnStep = func(edict.ProcessID) { h.step() }
	h.Sim = sim.NewProtocolRun(sc)
	h.step()
	return h
}

// Snapshot is the current state of every node.
func (h *Harness) Snapshot() Snapshot {
	s := Snapshot{}
	for id, p := range h.insts {
		up := !h.down[id]
		v := View{Up: up}
		if up {
			v.State = p.State()
		}
		s[id] = v
	}
	return s
}

func (h *Harness) step() {
	h.Steps++
	s := h.Snapshot()
	if h.Violation == nil {
		if err := h.Safety(s); err != nil {
			h.Violation = fmt.Errorf("t=%v: %w", h.Sim.Now(), err)
		}
	}
	live := h.Live(s)
	switch {
	case live && h.ElectedAt < 0:
		h.ElectedAt = h.Sim.Now()
	case !live && h.ElectedAt >= 0:
		if h.Bound > 0 && h.Sim.Now() > h.Since+h.Bound && h.Relapse == nil {
			h.Relapse = fmt.Errorf("t=%v: left the elected state while stable, after c", h.Sim.Now())
		}
		h.ElectedAt = -1
	}
}

// changed marks a change of the system: liveness is measured afresh.
func (h *Harness) changed() {
	h.Since, h.ElectedAt, h.Relapse = h.Sim.Now(), -1, nil
	h.step()
}

// Crash crashes id; Recover restarts it; Partition and Heal change
// connectivity. Each starts a new interval of stability.
func (h *Harness) Crash(id edict.ProcessID) {
	h.Sim.Crash(id)
	h.down[id] = true
	h.changed()
}

func (h *Harness) Recover(id edict.ProcessID) {
	delete(h.down, id)
	h.Sim.Recover(id)
	h.changed()
}

func (h *Harness) Partition(groups ...[]edict.ProcessID) {
	h.Sim.Partition(groups...)
	h.changed()
}

func (h *Harness) Heal() {
	h.Sim.Heal()
	h.changed()
}

// Elected is how long after the last change Live became true, if it did.
func (h *Harness) Elected() (time.Duration, bool) {
	if h.ElectedAt < 0 {
		return 0, false
	}
	return h.ElectedAt - h.Since, true
}

// Sent sums the messages of each kind sent by every Instance so far.
func (h *Harness) Sent() map[stoller.Kind]int {
	out := map[stoller.Kind]int{}
	for k, v := range h.retired {
		out[k] += v
	}
	for _, p := range h.insts {
		for k, v := range p.Sent() {
			out[k] += v
		}
	}
	return out
}

// Leader is the leader every up node names, if they all name one.
func (h *Harness) Leader() edict.ProcessID {
	s := h.Snapshot()
	ids := slices.Sorted(maps.Keys(s))
	ldr := edict.None
	for _, id := range ids {
		if v := s[id]; v.Up {
			if ldr != edict.None && v.Ldr != ldr {
				return edict.None
			}
			ldr = v.Ldr
		}
	}
	return ldr
}

// electionMessages sums the election algorithm's own kinds in a count.
func electionMessages(m map[stoller.Kind]int) int {
	n := 0
	for k, v := range m {
		if k.Election() && k != stoller.NormQ {
			n += v
		}
	}
	return n
}

// diff is a−b per kind.
func diff(a, b map[stoller.Kind]int) map[stoller.Kind]int {
	out := map[stoller.Kind]int{}
	for k, v := range a {
		out[k] = v - b[k]
	}
	return out
}

// Describe lists every node's state, and the instance and its failure
// detector field by field, for failure messages.
func (h *Harness) Describe() string {
	out := ""
	s := h.Snapshot()
	for _, id := range slices.Sorted(maps.Keys(s)) {
		out += fmt.Sprintf("%v: %+v\n", id, s[id])
		if !s[id].Up {
			continue
		}
		out += fmt.Sprintf("   %+v\n", h.insts[id])
		if n, ok := h.insts[id].(interface {
			FD() stoller.FailureDetector
		}); ok {
			out += fmt.Sprintf("   fd %+v\n", n.FD())
		}
	}
	return out
}
