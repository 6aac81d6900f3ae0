package gossip

import (
	"slices"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect"
)

// view is what the detector knows, and the weak-leader rule over it. It
// has no locks, goroutines or clocks of its own, so the rule is tested
// directly (view_test.go); Detector guards it with a mutex.
type view struct {
	self    edict.ProcessID
	epoch   uint64
	members []edict.ProcessID // sorted; empty admits every node of epoch
	nodes   map[edict.ProcessID]*node
	down    map[edict.ProcessID]bool // ProcessDown from another detector
	lapsed  map[edict.ProcessID]bool // our grant to it lapsed unrenewed
	leader  edict.ProcessID          // from LeaderSeen
	until   edict.Time               // leader stays a hint until then
	hintTTL time.Duration
}

// node is one memberlist member as last gossiped.
type node struct {
	meta  Meta
	addr  string // gossip address
	alive bool   // memberlist considers it alive (alive or suspect)
}

func newView(self edict.ProcessID, epoch uint64, members []edict.ProcessID, hintTTL time.Duration) view {
	v := view{self: self, nodes: map[edict.ProcessID]*node{}, down: map[edict.ProcessID]bool{}, lapsed: map[edict.ProcessID]bool{}, hintTTL: hintTTL}
	v.setEpoch(epoch, members)
	return v
}

func (v *view) setEpoch(epoch uint64, members []edict.ProcessID) {
	v.epoch = epoch
	v.members = slices.Clone(members)
	slices.Sort(v.members)
	v.members = slices.Compact(v.members)
}

func (v *view) observe(o elect.Observation) {
	switch o.Kind {
	case elect.ProcessUp:
		delete(v.down, o.Process)
	case elect.ProcessDown:
		v.down[o.Process] = true
		if v.leader == o.Process {
			v.leader = edict.None
		}
	case elect.Campaigned:
		delete(v.lapsed, o.Process)
	case elect.LeaseLapsed:
		v.lapsed[o.Process] = true
		if v.leader == o.Process {
			v.leader = edict.None
		}
	case elect.LeaderSeen:
		delete(v.lapsed, o.Process)
		v.leader = o.Process
		v.until = o.At.Add(v.hintTTL)
	}
}

// member reports whether p belongs to the current epoch's member set.
func (v *view) member(p edict.ProcessID) bool {
	if len(v.members) == 0 {
		return true
	}
	_, ok := slices.BinarySearch(v.members, p)
	return ok
}

// eligible: p may be the weak leader — a member of the epoch that
// memberlist considers alive, that gossips the current epoch, and that is
// not suspected: not reported down, and no lease of ours to it lapsed
// unrenewed since we last heard from it (docs/protocol.md, "Leases"). This process is
// always alive to itself.
func (v *view) eligible(p edict.ProcessID) bool {
	if p == edict.None || !v.member(p) {
		return false
	}
	if p == v.self {
		return true
	}
	n := v.nodes[p]
	return n != nil && n.alive && n.meta.Epoch == v.epoch && !v.down[p] && !v.lapsed[p]
}

// weakLeader names who should try for the lease at now:
//
//  1. the process we last saw hold the lease, within the hint TTL, if it
//     is eligible — stability: a lower id that comes back does not unseat
//     a live leader;
//  2. else the lowest eligible process that gossips itself as leader (we
//     may not be granting to it, but others are);
//  3. else the lowest eligible member of the epoch.
func (v *view) weakLeader(now edict.Time) edict.ProcessID {
	if v.leader != edict.None && now.Before(v.until) && v.eligible(v.leader) {
		return v.leader
	}
	claim := edict.None
	for id, n := range v.nodes {
		if n.meta.Leader == id && (claim == edict.None || id < claim) && v.eligible(id) {
			claim = id
		}
	}
	if claim != edict.None {
		return claim
	}
	if len(v.members) > 0 {
		for _, p := range v.members {
			if v.eligible(p) {
				return p
			}
		}
		return edict.None
	}
	best := edict.None
	if v.eligible(v.self) {
		best = v.self
	}
	for id := range v.nodes {
		if (best == edict.None || id < best) && v.eligible(id) {
			best = id
		}
	}
	return best
}

// hint is the leader this node advertises at now: its LeaderSeen while
// it lasts.
func (v *view) hint(now edict.Time) edict.ProcessID {
	if v.leader != edict.None && now.Before(v.until) {
		return v.leader
	}
	return edict.None
}
