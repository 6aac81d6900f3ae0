package omegasim

import (
	"fmt"
	"time"

	"github.com/edictlog/edictlog/elect/omega"
	"github.com/edictlog/edictlog/internal/sim"
)

// variants are the four algorithms, in the paper's order.
var variants = []omega.Variant{omega.Fig1, omega.Stable3, omega.Stable6, omega.ConstantTime}

// theorem is the result that claims Ω (and stability) for v.
func theorem(v omega.Variant) string {
	switch v {
	case omega.Fig1:
		return "Thm. 1"
	case omega.Stable3:
		return "Thm. 2"
	case omega.Stable6:
		return "Thm. 4"
	}
	return "Thm. 5"
}

// Claims measures each variant for N = 3, 5, 7, 9 (δ = 10ms, delays in
// [1ms, δ]) against the paper: election time after the leader crashes
// alone and with the next ⌊(N−1)/2⌋−1 round leaders, links used in steady
// state, stability against recovered lower ids and against §5's problem
// scenario 1, and Ω after a bad period.
func Claims(seed uint64) []sim.Claim {
	var out []sim.Claim
	for _, v := range variants {
		for _, n := range []int{3, 5, 7, 9} {
			out = append(out, claimsFor(v, n, seed)...)
		}
	}
	return out
}

func claimsFor(v omega.Variant, n int, seed uint64) []sim.Claim {
	row := func(prop, paper, measured string, holds bool) sim.Claim {
		return sim.Claim{Algorithm: v.String(), Property: prop, N: n, Paper: paper, Measured: measured, Holds: holds}
	}
	var out []sim.Claim
	fs := []int{1}
	if f := (n - 1) / 2; f > 1 {
		fs = append(fs, f)
	}
	var steady electionResult
	for _, f := range fs {
		res := electionScenario(v, scenarioConfig(), n, f, seed)
		bound, why := electionBound(v, scenarioConfig(), f)
		out = append(out, row(fmt.Sprintf("election time, %d leader(s) crash", f),
			fmt.Sprintf("≤ %s = %v", why, bound),
			fmt.Sprintf("%v (p%d → p%d)", res.elect.Round(time.Microsecond), res.first, res.second),
			res.elected && res.elect <= bound))
		steady = res
	}
	out = append(out, row("links used in steady state",
		fmt.Sprintf("n−1 = %d, from the leader (§3.2)", n-1),
		fmt.Sprintf("%d, all from p%d", steady.links, steady.second),
		steady.linkErr == nil && steady.links == n-1))
	k := max(v.Stability(), 3)
	claim := fmt.Sprintf("no demotion of a leader accessible for %dδ (%s)", k, theorem(v))
	if v == omega.Fig1 {
		claim = "not claimed: Fig. 1 is not stable (§5); shown for comparison"
	}
	out = append(out, row("stability: crashed lower ids recover",
		claim,
		fmt.Sprintf("%d demotions; p%d kept: %v", len(steady.demotions), steady.second, steady.leaderKept),
		len(steady.demotions) == 0 && steady.leaderKept))
	_, viol := scenario1(v, n, seed)
	if v == omega.Fig1 {
		out = append(out, row("stability: §5 problem scenario 1",
			"the accessible leader is demoted (§5: Fig. 1 is not stable)",
			fmt.Sprintf("%d demotions %v", len(viol), viol), len(viol) > 0))
	} else {
		out = append(out, row("stability: §5 problem scenario 1",
			fmt.Sprintf("%d-stable (%s): no demotion", k, theorem(v)),
			fmt.Sprintf("%d demotions %v", len(viol), viol), len(viol) == 0))
	}
	r, settle, err := omegaScenario(v, n, seed)
	measured := fmt.Sprintf("p%d from GST+%v", r.leaderNow(), settle.Round(time.Microsecond))
	if err != nil {
		measured = err.Error()
	}
	paper := fmt.Sprintf("Ω: one correct leader forever (%s)", theorem(v))
	if v <= omega.Stable3 {
		paper += "; run exceeds its reliable-link model (loss before GST)"
	}
	out = append(out, row("Ω after loss, partition, crashes", paper, measured, err == nil))
	return out
}
