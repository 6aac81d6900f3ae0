package omegasim

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect/omega"
	"github.com/edictlog/edictlog/internal/sim"
)

// The scenarios behind Claims and the tests. All use δ = scenarioDelta
// with the simulator's delays in [1ms, δ], so that its links are the
// paper's (expiring, §6.1) links with this δ once they are good.
const scenarioDelta = 10 * time.Millisecond

// scenarioConfig spells out the figures' timings for δ (η = δ, timeout
// δ+η, omega.Config's defaults), so that the bounds below read the values
// the instances run with.
func scenarioConfig() omega.Config {
	return omega.Config{Delta: scenarioDelta, Eta: scenarioDelta, Timeout: 2 * scenarioDelta}
}

// electionBound is the longest a good period (no slow links, no further
// crashes) may stay leaderless after the leaders of the f rounds after a
// stable round crash together at t0, in c's δ, η, T (all set).
//
// ConstantTime: 9δ, Theorem 5 (§7), independent of f. The other figures
// come with no formula — the paper says only that their election time is
// "proportional to f" (§1.1 footnote 2, §7) — so theirs is derived here
// from the figures, and labelled so: the last (OK, r) reaches a process by
// t0+δ; each dead round costs a timeout T (Fig. 1 line 15); Fig. 1 names
// the next leader on entering its round (line 4): δ + f·T. Figs. 2 and 4
// wait for two OKs (line 15), sent η apart, each up to δ late: δ + f·T +
// η + δ.
//
// The paper's time is continuous; the simulator's advances in ticks of ε
// = sim.Resolution, and a timer fires at the first tick at which it is
// due. "timer > T" therefore fires at T+ε, not T: each timer in the chain
// adds ε, f of them for Fig. 1, f+1 (the f timeouts and the η between the
// two OKs) for Figs. 2 and 4. (internal/detsim, whose tick was 1ns, hid
// the same f ticks under a 1µs slack on the comparison.)
func electionBound(v omega.Variant, c omega.Config, f int) (time.Duration, string) {
	eps := sim.Resolution
	switch v {
	case omega.ConstantTime:
		return 9 * c.Delta, "9δ (Thm. 5, §7)"
	case omega.Fig1:
		return c.Delta + time.Duration(f)*(c.Timeout+eps), "δ+f·(T+ε) (derived from Fig. 1 l.4, 15; ε = 1µs tick)"
	}
	return 2*c.Delta + time.Duration(f)*(c.Timeout+eps) + c.Eta + eps, "2δ+f·(T+ε)+η+ε (derived from Fig. 2/4 l.15; ε = 1µs tick)"
}

// electionResult is what electionScenario measured.
type electionResult struct {
	first, second edict.ProcessID // leader before and after the crashes
	elect         time.Duration   // crash → agreed on a live leader
	elected       bool
	links         int   // directed links used in steady state
	linkErr       error // communication efficiency
	demotions     []string
	leaderKept    bool // the leader survived the recoveries
}

// electionScenario lets the group settle, crashes the leaders of rounds
// 0..f−1 (processes 1..f, the leader and the next f−1 in round order),
// measures the election time, counts links in steady state, then recovers
// the crashed — lower ids than the new leader — and checks k-stability.
func electionScenario(v omega.Variant, base omega.Config, n, f int, seed uint64) electionResult {
	r := newRun(v, base, sim.ProtocolConfig{N: n, Seed: seed})
	var res electionResult
	r.sim.RunFor(50 * scenarioDelta)
	res.first = r.leaderNow()
	r.crash(ids(1, f)...)
	res.elect, res.elected = r.sim.UntilAgreed(200 * scenarioDelta)
	r.sim.RunFor(20 * scenarioDelta)
	res.second = r.leaderNow()
	r.sim.ResetCounts()
	r.sim.RunFor(100 * scenarioDelta)
	res.links, res.linkErr = linksUsed(r.sim.Sent, res.second, n)
	r.recover(ids(1, f)...)
	r.sim.RunFor(100 * scenarioDelta)
	k := max(v.Stability(), 3)
	res.demotions = r.stability(k)
	res.leaderKept = res.second != edict.None && r.leaderNow() == res.second
	return res
}

// scenario1 is §5's problem scenario 1 for n processes (paper ids 0, 1,
// 2 are our 1, 2, n): the links to and from process n are slow, so it
// times out on round 0, sends (START, 1) to process 2 (and, in Fig. 2,
// (STOP, 0) to process 1), and crashes at C = 3δ, after which process 1
// is accessible. The link n → 2 stays slow and delivers at M = 60δ. On
// reliable links (Figs. 1, 2) n's messages are delivered late: to 2 at
// M, to the others just after n crashed, at C+δ/2. Figs. 4 and 4+5
// assume expiring links (§6.1), which drop a message older than δ, so
// there n's links are cut. Nothing reaches n. It returns the k-stability
// violations, k = max(variant's k, 3).
func scenario1(v omega.Variant, n int, seed uint64) (*run, []string) {
	c, m := 3*scenarioDelta, 60*scenarioDelta
	last := edict.ProcessID(n)
	r := newRun(v, scenarioConfig(), sim.ProtocolConfig{N: n, Seed: seed})
	for _, p := range ids(1, n-1) {
		r.sim.Cut(p, last)
		switch {
		case v >= omega.Stable6:
			r.sim.Cut(last, p)
		case p == 2:
			r.sim.Slow(last, p, m)
		default:
			r.sim.Slow(last, p, c+scenarioDelta/2)
		}
	}
	r.sim.RunUntil(c)
	r.crash(last)
	r.gst = c
	r.goodFrom[2] = m
	r.sim.RunUntil(m + 40*scenarioDelta)
	return r, r.stability(max(v.Stability(), 3))
}

// omegaScenario is a bad period followed by a good one: until GST = 100δ
// every link loses 20% of messages, the group is split in two during
// [10δ, 50δ], and ⌊(n−1)/2⌋ random processes crash at random times, half
// of them recovering before GST. Clocks drift (ρ = 10⁻³). It returns the
// run, how long after GST the last change of leader came, and whether Ω
// held from GST + 100δ to the end (GST + 300δ).
func omegaScenario(v omega.Variant, n int, seed uint64) (*run, time.Duration, error) {
	d := scenarioDelta
	gst := 100 * d
	r := newRun(v, scenarioConfig(), sim.ProtocolConfig{N: n, Seed: seed, Rho: 1e-3, Loss: 0.2, GST: gst})
	rng := rand.New(rand.NewPCG(seed, 0x0e9a))
	type act struct {
		at     time.Duration
		do     func()
		reason string
	}
	acts := []act{
		{10 * d, func() { r.sim.Partition(ids(1, n/2), ids(n/2+1, n)) }, "partition"},
		{50 * d, r.sim.Heal, "heal"},
	}
	for i, p := range rng.Perm(n)[:(n-1)/2] {
		id := edict.ProcessID(p + 1)
		at := time.Duration(rng.Int64N(int64(80 * d)))
		acts = append(acts, act{at, func() { r.crash(id) }, fmt.Sprint("crash ", id)})
		if i%2 == 0 {
			acts = append(acts, act{at + 10*d, func() { r.recover(id) }, fmt.Sprint("recover ", id)})
		}
	}
	for len(acts) > 0 {
		next := 0
		for i, a := range acts {
			if a.at < acts[next].at {
				next = i
			}
		}
		r.sim.RunUntil(acts[next].at)
		acts[next].do()
		acts = append(acts[:next], acts[next+1:]...)
	}
	end := gst + 300*d
	r.sim.RunUntil(end)
	settle, prev := time.Duration(0), edict.None
	for _, pt := range r.leaders() {
		if pt.at > gst && pt.leader != prev {
			settle = pt.at - gst
		}
		prev = pt.leader
	}
	return r, settle, r.omega(gst + 100*d)
}
