package bullysim

import (
	"fmt"
	"maps"
	"math/bits"
	"slices"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect/bully"
)

// The checkers below state the slides' assertions ("Specification of
// Leader Election", "Specification without Assumptions 8 and 9",
// "Solution (2/2)") over a snapshot of ground truth: the S(i) of every
// running process (a crashed process, S(i).s = Down, is absent) and, for
// Assertions 4 and 4′, the connectivity graph. Each returns nil when the
// assertion holds, else the violation.

// CheckAssertion1: any two Normal nodes agree on the coordinator.
func CheckAssertion1(states map[edict.ProcessID]bully.State) error {
	var first edict.ProcessID
	for _, i := range slices.Sorted(maps.Keys(states)) {
		if states[i].S != bully.Normal {
			continue
		}
		if first == edict.None {
			first = i
		} else if states[i].C != states[first].C {
			return fmt.Errorf("assertion 1: %v and %v are Normal with coordinators %v and %v", first, i, states[first].C, states[i].C)
		}
	}
	return nil
}

// CheckAssertion2 checks the state Assertion 2 promises: some i is Normal
// with S(i).c = i and every other running node is Normal with c = i. If
// want is not None, i must be want — Bully's stronger promise that the
// strongest running node wins.
func CheckAssertion2(states map[edict.ProcessID]bully.State, want edict.ProcessID) error {
	if len(states) == 0 {
		return nil
	}
	ids := slices.Sorted(maps.Keys(states))
	c := states[ids[0]].C
	if want != edict.None && c != want {
		return fmt.Errorf("assertion 2: %v's coordinator is %v, want %v", ids[0], c, want)
	}
	if s, ok := states[c]; !ok || s.S != bully.Normal || s.C != c {
		return fmt.Errorf("assertion 2: coordinator %v of %v is not a running Normal self-coordinator", c, ids[0])
	}
	for _, j := range ids {
		if states[j].S != bully.Normal || states[j].C != c {
			return fmt.Errorf("assertion 2: %v is %v with coordinator %v, want Normal with %v", j, states[j].S, states[j].C, c)
		}
	}
	return nil
}

// CheckAssertion3: Normal nodes of one group agree on the coordinator.
func CheckAssertion3(states map[edict.ProcessID]bully.State) error {
	first := map[bully.Group]edict.ProcessID{}
	for _, i := range slices.Sorted(maps.Keys(states)) {
		s := states[i]
		if s.S != bully.Normal {
			continue
		}
		if f, ok := first[s.G]; !ok {
			first[s.G] = i
		} else if states[f].C != s.C {
			return fmt.Errorf("assertion 3: %v and %v in group %v have coordinators %v and %v", f, i, s.G, states[f].C, s.C)
		}
	}
	return nil
}

// Graph is the connectivity graph of the running processes: Connected(a,
// b) says a and b can exchange messages within T (Stoller §5).
type Graph struct {
	Nodes     []edict.ProcessID
	Connected func(a, b edict.ProcessID) bool
}

// MaximalCliques returns the sets R of Assertion 4: pairwise connected,
// with no connected superset. Brute force: N is small here.
func (g Graph) MaximalCliques() [][]edict.ProcessID {
	n := len(g.Nodes)
	clique := g.cliqueMasks()
	var out [][]edict.ProcessID
	for m := uint(1); m < 1<<n; m++ {
		if !clique[m] {
			continue
		}
		maximal := true
		for k := 0; k < n && maximal; k++ {
			if m&(1<<k) == 0 && clique[m|1<<k] {
				maximal = false
			}
		}
		if maximal {
			out = append(out, g.members(m))
		}
	}
	return out
}

// MinCliqueCover is the size of a minimum clique cover (Assertion 4′ b).
func (g Graph) MinCliqueCover() int {
	n := len(g.Nodes)
	clique := g.cliqueMasks()
	full := uint(1)<<n - 1
	best := make([]int, 1<<n) // best[m]: fewest cliques partitioning m
	for m := uint(1); m <= full; m++ {
		best[m] = bits.OnesCount(m)
		low := m & -m // the lowest node must be in some clique: enumerate those
		for s := m; s > 0; s = (s - 1) & m {
			if s&low != 0 && clique[s] && best[m^s]+1 < best[m] {
				best[m] = best[m^s] + 1
			}
		}
	}
	return best[full]
}

func (g Graph) cliqueMasks() []bool {
	n := len(g.Nodes)
	clique := make([]bool, 1<<n)
	clique[0] = true
	for m := uint(1); m < 1<<n; m++ {
		hi := bits.Len(m) - 1
		rest := m &^ (1 << hi)
		ok := clique[rest]
		for k := 0; ok && k < hi; k++ {
			if rest&(1<<k) != 0 && !g.Connected(g.Nodes[k], g.Nodes[hi]) {
				ok = false
			}
		}
		clique[m] = ok
	}
	return clique
}

func (g Graph) members(m uint) []edict.ProcessID {
	var out []edict.ProcessID
	for k, id := range g.Nodes {
		if m&(1<<k) != 0 {
			out = append(out, id)
		}
	}
	return out
}

// CheckAssertion4 is Garcia-Molina's Assertion 4, evaluated on a final
// state: for every maximal pairwise-connected set R some i in R is
// coordinator of all of R, in one group. Stoller (Appendix A) shows the
// Invitation Algorithm violates it.
func CheckAssertion4(states map[edict.ProcessID]bully.State, g Graph) error {
	for _, r := range g.MaximalCliques() {
		ok := false
		for _, i := range r {
			all := true
			for _, j := range r {
				s := states[j]
				if s.S != bully.Normal || s.C != i || s.G != states[i].G {
					all = false
					break
				}
			}
			if all {
				ok = true
				break
			}
		}
		if !ok {
			desc := ""
			for _, j := range r {
				desc += fmt.Sprintf(" %v:%v/c=%v/g=%v", j, states[j].S, states[j].C, states[j].G)
			}
			return fmt.Errorf("assertion 4: R=%v has no coordinator in R for all of it:%s", r, desc)
		}
	}
	return nil
}

// CheckAssertion4Prime is the corrected Assertion 4′ ("Solution (2/2)";
// Stoller's ALE2 with ldrsElected), evaluated on a final state: (a) every
// node is Normal, in its coordinator's group, its coordinator running and
// reachable in E*; (b) there are no more groups than a minimum clique
// cover has cliques.
func CheckAssertion4Prime(states map[edict.ProcessID]bully.State, g Graph) error {
	groups := map[bully.Group]bool{}
	for _, i := range g.Nodes {
		s := states[i]
		c, up := states[s.C]
		switch {
		case s.S != bully.Normal:
			return fmt.Errorf("assertion 4′a: %v is %v", i, s.S)
		case !up:
			return fmt.Errorf("assertion 4′a: %v's coordinator %v is not running", i, s.C)
		case c.G != s.G:
			return fmt.Errorf("assertion 4′a: %v is in group %v, its coordinator %v in %v", i, s.G, s.C, c.G)
		case !g.reaches(i, s.C):
			return fmt.Errorf("assertion 4′a: %v cannot reach its coordinator %v", i, s.C)
		}
		groups[s.G] = true
	}
	if k := g.MinCliqueCover(); len(groups) > k {
		return fmt.Errorf("assertion 4′b: %d groups, a minimum clique cover has %d", len(groups), k)
	}
	return nil
}

// reaches is ⟨a, b⟩ ∈ E*.
func (g Graph) reaches(a, b edict.ProcessID) bool {
	seen := map[edict.ProcessID]bool{a: true}
	todo := []edict.ProcessID{a}
	for len(todo) > 0 {
		x := todo[0]
		todo = todo[1:]
		if x == b {
			return true
		}
		for _, y := range g.Nodes {
			if !seen[y] && g.Connected(x, y) {
				seen[y] = true
				todo = append(todo, y)
			}
		}
	}
	return false
}
