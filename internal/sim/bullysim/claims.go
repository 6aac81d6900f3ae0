package bullysim

import (
	"fmt"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect/bully"
	"github.com/edictlog/edictlog/internal/sim"
)

// Claims measures the slides' and Stoller's claims for N = 3, 5, 7, 9 in
// simulator runs derived from seed, one row per claim and size.
func Claims(seed uint64) []sim.Claim {
	var rows []sim.Claim
	for _, n := range []int{3, 5, 7, 9} {
		rows = append(rows, bullyClaims(n, seed)...)
		rows = append(rows, invitationClaims(n, seed)...)
	}
	return rows
}

func bullyClaims(n int, seed uint64) []sim.Claim {
	row := func(prop, paper, measured string, holds bool) sim.Claim {
		return sim.Claim{Algorithm: "bully", Property: prop, N: n, Paper: paper, Measured: measured, Holds: holds}
	}
	var rows []sim.Claim
	for _, fd := range []time.Duration{0, 3 * time.Millisecond} {
		r := runBullyCrash(n, seed, fd)
		suffix, msgPaper := "", fmt.Sprintf("O(N²) (slides: Concurrent Executions; Stoller §7: N²+O(N)); this implementation ≤ N²+4N−9 = %d", CrashMessages(n, false))
		if fd > 0 {
			suffix = fmt.Sprintf(" (failure detector %v)", fd)
			msgPaper = fmt.Sprintf("worst case, every survivor told at once: (N−2)(N+3) = %d exactly", CrashMessages(n, true))
		}
		holds := r.messages <= CrashMessages(n, fd > 0)
		if fd > 0 {
			holds = r.messages == CrashMessages(n, true)
		}
		rows = append(rows,
			row("messages after a leader crash"+suffix, msgPaper, fmt.Sprint(r.messages), r.elected && holds),
			row("election time after a leader crash"+suffix,
				fmt.Sprintf("≤ %v (Assertion 2's constant for T=%v, CheckPeriod=%v; cf. Stoller eq. 5)", r.bound.Round(time.Microsecond), bully.DefaultT, bully.DefaultCheckPeriod),
				fmt.Sprint(r.elapsed), r.elected && r.elapsed <= r.bound))
	}
	c := runBullyChurn(n, seed, 0)
	rows = append(rows,
		row("Assertion 1", "at any time, Normal nodes agree on the coordinator", checked(c.a1, c.steps), c.a1 == nil),
		row("Assertion 2", "after failures stop, all running nodes Normal under one coordinator (here: the strongest)",
			fmt.Sprintf("%s after %v, coordinator %v of %d running", result(c.a2), c.settle, c.leader, c.running), c.a2 == nil && c.running > 0))
	return rows
}

func invitationClaims(n int, seed uint64) []sim.Claim {
	row := func(prop, paper, measured string, holds bool) sim.Claim {
		return sim.Claim{Algorithm: "invitation", Property: prop, N: n, Paper: paper, Measured: measured, Holds: holds}
	}
	p := runInvitationPartition(n, seed)
	a4, a4p := stollerScenario(n, seed, true)
	return []sim.Claim{
		row("Assertion 3", "at any time, Normal nodes of one group agree on the coordinator", checked(p.a3, p.steps), p.a3 == nil),
		row("Assertion 4 (partition healed)", "connected nodes end in one group under one of them", result(p.a4), p.a4 == nil),
		row("Assertion 4′ (partition healed)", "Stoller's ALE2: all Normal in their coordinator's group, ≤ min clique cover groups", result(p.a4p), p.a4p == nil),
		row("Assertion 4 (Stoller App. A)", "violated when connectivity is not transitive (Stoller App. A)", result(a4), a4 != nil && a4p == nil),
		row("Assertion 4′ (Stoller App. A)", "holds in the same run (slides: Solution (2/2))", result(a4p), a4p == nil),
	}
}

func checked(err error, steps int) string {
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("held at all %d steps", steps)
}

func result(err error) string {
	if err != nil {
		return err.Error()
	}
	return "held"
}

type churnRun struct {
	steps   int
	running int
	leader  edict.ProcessID
	settle  time.Duration
	a1, a2  error
}

// runBullyChurn crashes and recovers random processes 30 times, checking
// Assertion 1 at every step; then waits for Assertion 2.
func runBullyChurn(n int, seed uint64, fd time.Duration) churnRun {
	w := newWorld(sim.ProtocolConfig{N: n, Seed: seed, Rho: 1e-3, FailureDetector: fd},
		func(c bully.Config) stater { return bully.NewBully(c) }, CheckAssertion1)
	rng := seed
	for range 30 {
		rng = rng*6364136223846793005 + 1442695040888963407
		id := edict.ProcessID(rng>>33%uint64(n) + 1)
		if w.sim.Up(id) {
			if len(w.states()) > 1 { // keep one running: Assertion 2 is vacuous on none
				w.sim.Crash(id)
			}
		} else {
			w.sim.Recover(id)
		}
		w.sim.RunFor(time.Duration(rng>>40%40) * time.Millisecond)
	}
	var r churnRun
	var ok bool
	r.settle, ok = w.untilHolds(2*time.Second, func(s map[edict.ProcessID]bully.State) error {
		return CheckAssertion2(s, w.highestUp())
	})
	w.sim.RunFor(500 * time.Millisecond)
	r.a2 = CheckAssertion2(w.states(), w.highestUp())
	if !ok && r.a2 == nil {
		r.a2 = fmt.Errorf("assertion 2: not reached within 2s")
	}
	r.a1, r.steps = w.bad, w.steps
	r.running, r.leader = len(w.states()), w.highestUp()
	return r
}

type partitionRun struct {
	steps        int
	a3, a4, a4p  error
	merged       bool
	healedSettle time.Duration
}

// runInvitationPartition forms one group, splits it in two halves, heals,
// and checks that the groups merged: Assertion 3 at every step, 4 and 4′
// at the end.
func runInvitationPartition(n int, seed uint64) partitionRun {
	w := newWorld(sim.ProtocolConfig{N: n, Seed: seed, Rho: 1e-3},
		func(c bully.Config) stater { return bully.NewInvitation(c) }, CheckAssertion3)
	holds4p := func(s map[edict.ProcessID]bully.State) error { return CheckAssertion4Prime(s, w.graph()) }
	w.untilHolds(2*time.Second, holds4p)
	var a, b []edict.ProcessID
	for _, id := range w.sim.Members() {
		if int(id) <= n/2 {
			a = append(a, id)
		} else {
			b = append(b, id)
		}
	}
	w.partition(a, b)
	w.untilHolds(2*time.Second, holds4p)
	w.heal()
	var r partitionRun
	r.healedSettle, _ = w.untilHolds(3*time.Second, holds4p)
	w.sim.RunFor(500 * time.Millisecond)
	s, g := w.states(), w.graph()
	r.a4, r.a4p = CheckAssertion4(s, g), CheckAssertion4Prime(s, g)
	r.merged = CheckAssertion2(s, edict.None) == nil
	r.a3, r.steps = w.bad, w.steps
	return r
}
