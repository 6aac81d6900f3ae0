package fetzersim

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/edictlog/edictlog/elect/fetzer"
	"github.com/edictlog/edictlog/internal/sim"
)

// name is the Protocol's name in the claims table.
const name = "fetzer"

// Claims runs, for N = 3, 5, 7, 9, one simulation with the defaults (delays
// 1–5ms, ρ = 1e-4, no loss): a cold start, a steady second, a split into
// a minority {1..⌊N/2⌋} and a majority, and a heal; then the majority mode
// under the same split. Every step is checked against (T), (SO), (BI) and
// (LS) (check.go). It returns the paper's claims beside the measurements.
func Claims(seed uint64) []sim.Claim {
	var rows []sim.Claim
	for _, n := range []int{3, 5, 7, 9} {
		rows = append(rows, claimsFor(n, seed)...)
	}
	return rows
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond)) }

func claimsFor(n int, seed uint64) []sim.Claim {
	base := fetzer.Config{}
	kappa := base.Kappa()
	row := func(prop, paper, measured string, holds bool) sim.Claim {
		return sim.Claim{Algorithm: name, Property: prop, N: n, Paper: paper, Measured: measured, Holds: holds}
	}
	var rows []sim.Claim
	w := NewWorld(n, base, sim.ProtocolConfig{Seed: seed + uint64(n), Rho: fetzer.DefaultRho})
	c := w.procs[1].Config() // base with its defaults
	all := w.Sim.Members()

	// Cold start: all processes form one stable partition at 0.
	w.Sim.RunFor(time.Second)
	first, took, ok := w.firstStart(0, all)
	rows = append(rows, row("election time from start",
		fmt.Sprintf("≤ κ = %s (§IX C.1)", ms(kappa)),
		fmt.Sprintf("%s, leader %v, support %v", ms(took), first.id, first.support),
		ok && took <= kappa && first.id == 1 && len(first.support) == n))

	// Steady state: one Election to N−1 and N−1 replies per round (§XII);
	// the election time of a round (§XI, Fig. 25) is the slowest reply.
	leader := w.procs[1]
	before := leader.Stats()
	w.Sim.ResetCounts()
	w.Sim.RunFor(time.Second)
	after := leader.Stats()
	rounds := after.Elections - before.Elections
	total, _ := w.Sim.Messages()
	renewed := after.Renewed - before.Renewed
	var mean time.Duration
	if renewed > 0 {
		mean = (after.RenewalTime - before.RenewalTime) / time.Duration(renewed)
	}
	perRound := float64(total) / float64(max(rounds, 1))
	replies := float64(after.Replies-before.Replies) / float64(max(rounds, 1))
	abs := func(x int) int { return max(x, -x) }
	rows = append(rows, row("messages per round",
		fmt.Sprintf("1 broadcast (%d datagrams) + %d replies = %d (§XII)", n-1, n-1, 2*(n-1)),
		fmt.Sprintf("%.2f over %d rounds", perRound, rounds),
		rounds > 0 && abs(total-2*(n-1)*rounds) <= 2*(n-1))) // the window cuts one round
	// Fig. 26's linear growth is, by §XI, the candidate handling N−1
	// replies; the simulator charges nothing for handling, so the row
	// holds when the replies per round are N−1 (linear) and a round stays
	// within the release timer 2Δ(1+ρ). The measured time is reported as
	// it is: the slowest of N−1 round trips, growing sub-linearly.
	bound := scale(2*c.Delta, 1+c.Rho)
	rows = append(rows, row("election time vs N (Fig. 26)",
		"linear in N (§XI, Fig. 26), mainly from the N−1 replies the candidate handles; each round ≤ 2Δ(1+ρ) = "+ms(bound),
		fmt.Sprintf("%.2f replies per round; mean round %s over %d renewals (no processing cost is simulated: only the slowest of N−1 delays grows)", replies, ms(mean), renewed),
		abs(renewed-rounds) <= 1 && abs(after.Replies-before.Replies-(n-1)*rounds) <= n-1 && mean <= bound))

	// Split: a minority {1..⌊N/2⌋} keeping the old leader and a majority
	// that must elect its smallest id within κ (§IX C.1, Fig. 27).
	minority, majority := all[:n/2], all[n/2:]
	split := w.Sim.Now()
	w.Partition(minority, majority)
	w.Sim.RunFor(2 * kappa)
	s, took, ok := w.firstStart(split, majority)
	rows = append(rows, row("re-election after a partition split",
		fmt.Sprintf("majority side elects min = %v within κ = %s (§IX C.1)", majority[0], ms(kappa)),
		fmt.Sprintf("%v elected after %s with support %v", s.id, ms(took), s.support),
		ok && took <= kappa && s.id == majority[0] && slices.Equal(s.support, majority)))
	lid, lsup, auth := w.local(1)
	mid, msup, mauth := w.local(majority[0])
	rows = append(rows, row("minority local leader non-authoritative",
		"each stable partition has a local leader (§V T); only a majority's is authoritative (Nerio §10.3)",
		fmt.Sprintf("minority: %v %v authoritative=%v; majority: %v %v authoritative=%v", lid, lsup, auth, mid, msup, mauth),
		lid == 1 && slices.Equal(lsup, minority) && !auth && mid == majority[0] && slices.Equal(msup, majority) && mauth))

	// Heal: within κ the old minority leader 1 leads all (BI, §IX D).
	healed := w.Sim.Now()
	merged := time.Duration(-1)
	w.onCheck = func(t time.Duration, views []view) {
		var ls []view
		for _, v := range views {
			if v.leader {
				ls = append(ls, v)
			}
		}
		if merged < 0 && len(ls) == 1 && ls[0].id == 1 && len(ls[0].support) == n {
			merged = t - healed
		}
	}
	w.Heal()
	w.Sim.RunFor(2 * kappa)
	w.onCheck = nil
	ls := w.leaders()
	rows = append(rows, row("one leader after a heal",
		fmt.Sprintf("two leaders in a merged partition for at most κ = %s (§VI Fig. 16, BI)", ms(kappa)),
		fmt.Sprintf("1 leads all %d after %s; leaders now %d", n, ms(merged), len(ls)),
		merged >= 0 && merged <= kappa && len(ls) == 1 && ls[0].id == 1))
	w.Finish()
	rows = append(rows, propertyRows(n, w, row)...)

	// Majority mode (§X): only the majority side has a leader.
	m := NewWorld(n, fetzer.Config{Majority: true}, sim.ProtocolConfig{Seed: seed + uint64(n) + 100, Rho: c.Rho})
	m.Sim.RunFor(time.Second)
	split = m.Sim.Now()
	m.Partition(minority, majority)
	m.Sim.RunFor(3 * kappa)
	s, took, ok = m.firstStart(split, majority)
	_, _, minorityLed := m.firstStart(split+time.Nanosecond, minority)
	m.Finish()
	rows = append(rows, row("majority mode: only the majority has a leader",
		fmt.Sprintf("minNumSupporters = %d; at most one leader; majority elects within κ (§X)", n/2+1),
		fmt.Sprintf("majority: %v after %s; minority leaders after split: %v; violations: %d in %d checks", s.id, ms(took), minorityLed, len(m.violations), m.checks),
		ok && took <= kappa && !minorityLed && len(m.violations) == 0))
	return rows
}

// propertyRows reports the checker's verdict on (T), (SO), (BI), (LS).
func propertyRows(n int, w *World, row func(string, string, string, bool) sim.Claim) []sim.Claim {
	count := func(prefix string) int {
		k := 0
		for _, v := range w.violations {
			if strings.Contains(v, ": "+prefix) {
				k++
			}
		}
		return k
	}
	var rows []sim.Claim
	for _, p := range []struct{ name, paper string }{
		{"T", "a stable partition for κ has a leader within κ (§V)"},
		{"SO", "a process supports at most one process (§V, §IX A)"},
		{"BI", "a process connected to a leader for κ supports it (§V, §IX D)"},
		{"LS", "a leader supports itself (§V, §IX B)"},
	} {
		k := count(p.name + ":")
		rows = append(rows, row("("+p.name+")", p.paper,
			fmt.Sprintf("%d violations in %d checks (start, split, heal)", k, w.checks), k == 0 && w.checks > 0))
	}
	return rows
}
