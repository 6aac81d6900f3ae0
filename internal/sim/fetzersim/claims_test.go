package fetzersim

import (
	"testing"
	"time"

	"github.com/edictlog/edictlog/elect/fetzer"
	"github.com/edictlog/edictlog/internal/sim"
)

// TestClaims: every row of the claims table holds.
func TestClaims(t *testing.T) {
	for _, r := range Claims(1) {
		t.Logf("N=%d %-45s | %s | %s | %v", r.N, r.Property, r.Paper, r.Measured, r.Holds)
		if !r.Holds {
			t.Errorf("N=%d %s does not hold: paper %s, measured %s", r.N, r.Property, r.Paper, r.Measured)
		}
	}
}

// TestClaimsSeeds: the table holds for other seeds too.
func TestClaimsSeeds(t *testing.T) {
	for seed := uint64(2); seed <= 6; seed++ {
		for _, r := range Claims(seed) {
			if !r.Holds {
				t.Errorf("seed %d N=%d %s: paper %s, measured %s", seed, r.N, r.Property, r.Paper, r.Measured)
			}
		}
	}
}

// TestElectionTimeVsN measures the election time of §XI (broadcast to
// leadership, over renewals) for N = 3, 5, 7, 9 over ten seconds. The
// paper's linear growth (Fig. 26) comes from the candidate's processing
// of N−1 replies, which the simulator does not charge for; what remains
// is the slowest of N−1 round trips, which must grow with N and stay
// within 2Δ(1+ρ).
func TestElectionTimeVsN(t *testing.T) {
	bound := scale(2*fetzer.DefaultDelta, 1+fetzer.DefaultRho)
	var prev time.Duration
	for _, n := range []int{3, 5, 7, 9} {
		w := NewWorld(n, fetzer.Config{}, sim.ProtocolConfig{Seed: 42, Rho: fetzer.DefaultRho})
		w.Sim.ResetCounts()
		w.Sim.RunFor(10 * time.Second)
		s := w.procs[1].Stats()
		mean := s.RenewalTime / time.Duration(s.Renewed)
		total, _ := w.Sim.Messages()
		t.Logf("N=%d: first election %v, mean renewal %v over %d, %.2f messages and %.2f replies per round",
			n, w.starts[0].at, mean, s.Renewed, float64(total)/float64(s.Elections), float64(s.Replies)/float64(s.Elections))
		if mean > bound || mean <= prev {
			t.Errorf("N=%d: mean renewal %v (previous %v, bound %v)", n, mean, prev, bound)
		}
		prev = mean
		clean(t, w)
	}
}
