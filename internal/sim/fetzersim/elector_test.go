package fetzersim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect/fetzer"
	"github.com/edictlog/edictlog/internal/sim"
)

var kappa = fetzer.Config{}.Kappa()

func ps(ids ...edict.ProcessID) []edict.ProcessID { return ids }

// clean fails the test with the checker's violations, if any.
func clean(t *testing.T, w *World) {
	t.Helper()
	w.Finish()
	if len(w.violations) > 0 {
		t.Fatalf("%d violations, first: %s", len(w.violations), strings.Join(w.violations, "\n"))
	}
	if w.checks == 0 {
		t.Fatal("nothing was checked")
	}
}

// local is p's LocalLeader now.
func local(w *World, p edict.ProcessID) string {
	l, s, a := w.local(p)
	return fmt.Sprintf("%v %v %v", l, s, a)
}

// electedWithin: a leadership of want with support exactly support
// starts within κ of from.
func electedWithin(t *testing.T, w *World, from time.Duration, want edict.ProcessID, support []edict.ProcessID) {
	t.Helper()
	for _, s := range w.starts {
		if s.at >= from && s.id == want {
			if s.at-from > kappa || !slices.Equal(s.support, support) {
				t.Fatalf("%v elected after %v (κ = %v) with %v, want %v", want, s.at-from, kappa, s.support, support)
			}
			return
		}
	}
	t.Fatalf("%v not elected after %v: %v", want, from, w.starts)
}

// TestColdStart: (T) from the start for N = 1..9, the smallest id leads
// everyone, and every process's WeakLeader and LocalLeader agree.
func TestColdStart(t *testing.T) {
	for _, n := range []int{1, 2, 3, 5, 7, 9} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			w := NewWorld(n, fetzer.Config{}, sim.ProtocolConfig{Seed: uint64(n), Rho: fetzer.DefaultRho})
			w.Sim.RunFor(2 * kappa)
			electedWithin(t, w, 0, 1, w.Sim.Members())
			if l, ok := w.Sim.Agreed(); !ok || l != 1 {
				t.Fatalf("WeakLeader: %v", w.Sim)
			}
			for _, p := range w.Sim.Members() {
				if got, want := local(w, p), fmt.Sprintf("p1 %v true", w.Sim.Members()); got != want {
					t.Errorf("LocalLeader at %v = %s, want %s", p, got, want)
				}
			}
			clean(t, w)
		})
	}
}

// TestSplitAndHeal: after a split each side elects its smallest id within
// κ; the minority's leader is not authoritative; after the heal one leader
// leads all within κ; a three-way split gives three local leaders.
func TestSplitAndHeal(t *testing.T) {
	w := NewWorld(5, fetzer.Config{}, sim.ProtocolConfig{Seed: 7, Rho: fetzer.DefaultRho})
	w.Sim.RunFor(time.Second)
	split := w.Sim.Now()
	w.Partition(ps(1, 2), ps(3, 4, 5))
	w.Sim.RunFor(2 * kappa)
	electedWithin(t, w, split, 3, ps(3, 4, 5))
	for p, want := range map[edict.ProcessID]string{1: "p1 [p1 p2] false", 2: "p1 [p1 p2] false", 4: "p3 [p3 p4 p5] true"} {
		if got := local(w, p); got != want {
			t.Errorf("LocalLeader at %v = %s, want %s", p, got, want)
		}
	}
	w.Heal()
	w.Sim.RunFor(2 * kappa)
	if ls := w.leaders(); len(ls) != 1 || ls[0].id != 1 || len(ls[0].support) != 5 {
		t.Fatalf("after heal: %+v", ls)
	}
	split = w.Sim.Now()
	w.Partition(ps(1), ps(2, 3), ps(4, 5))
	w.Sim.RunFor(2 * kappa)
	electedWithin(t, w, split, 2, ps(2, 3))
	electedWithin(t, w, split, 4, ps(4, 5))
	if got := local(w, 1); got != "p1 [p1] false" {
		t.Errorf("lone p1: %s", got)
	}
	w.Heal()
	w.Sim.RunFor(2 * kappa)
	if ls := w.leaders(); len(ls) != 1 || ls[0].id != 1 {
		t.Fatalf("after heal: %+v", ls)
	}
	clean(t, w)
}

// TestDrift: the same with clocks drifting by up to ρ = 0.5% (and the
// Electors told so).
func TestDrift(t *testing.T) {
	rho := 0.005
	w := NewWorld(5, fetzer.Config{Rho: rho}, sim.ProtocolConfig{Seed: 3, Rho: rho})
	w.kappa = fetzer.Config{Rho: rho}.Kappa()
	w.Sim.RunFor(time.Second)
	w.Partition(ps(1, 2, 3), ps(4, 5))
	w.Sim.RunFor(2 * w.kappa)
	w.Heal()
	w.Sim.RunFor(2 * w.kappa)
	if ls := w.leaders(); len(ls) != 1 || ls[0].id != 1 {
		t.Fatalf("after heal: %+v", ls)
	}
	clean(t, w)
}

// TestMajorityMode (§X): only a majority side has a leader; with no
// majority anywhere there is none; never two at once (checked at every
// step).
func TestMajorityMode(t *testing.T) {
	c := fetzer.Config{Majority: true}
	w := NewWorld(5, c, sim.ProtocolConfig{Seed: 11, Rho: fetzer.DefaultRho})
	lock := w.procs[1].Config().LockTime
	w.Sim.RunFor(time.Second)
	split := w.Sim.Now()
	w.Partition(ps(1, 2), ps(3, 4, 5))
	w.Sim.RunFor(2 * kappa)
	electedWithin(t, w, split, 3, ps(3, 4, 5))
	for _, s := range w.starts {
		if s.at > split && s.id < 3 {
			t.Fatalf("minority leader %+v", s)
		}
	}
	if l, _, _ := w.local(1); l != edict.None {
		t.Fatalf("minority process names %v", l)
	}
	w.Partition(ps(1, 2), ps(3, 4), ps(5))
	w.Sim.RunFor(lock)
	w.Sim.RunFor(2 * kappa)
	if ls := w.leaders(); len(ls) != 0 {
		t.Fatalf("leaders without a majority: %+v", ls)
	}
	healed := w.Sim.Now()
	w.Heal()
	w.Sim.RunFor(2 * kappa)
	electedWithin(t, w, healed, 1, w.Sim.Members())
	clean(t, w)
}

// TestCrashRecover: the leader's crash elects the next smallest within κ;
// the recovered process (a new incarnation, which first waits lockTime)
// leads again.
func TestCrashRecover(t *testing.T) {
	w := NewWorld(5, fetzer.Config{}, sim.ProtocolConfig{Seed: 5, Rho: fetzer.DefaultRho})
	w.Sim.RunFor(time.Second)
	crashed := w.Sim.Now()
	w.Crash(1)
	w.Sim.RunFor(2 * kappa)
	electedWithin(t, w, crashed, 2, ps(2, 3, 4, 5))
	back := w.Sim.Now()
	w.Recover(1)
	w.Sim.RunFor(3 * kappa)
	electedWithin(t, w, back, 1, w.Sim.Members())
	clean(t, w)
}

// TestSafetyUnderLoss: with 10% loss, random partitions and crashes, the
// safety requirements (SO), (LS) and, in majority mode, one leader hold
// at every step. (T) and (BI) are promises about connected processes,
// which lossy ones are not.
func TestSafetyUnderLoss(t *testing.T) {
	for seed := uint64(1); seed <= 6; seed++ {
		for _, majority := range []bool{false, true} {
			w := NewWorld(5, fetzer.Config{Majority: majority}, sim.ProtocolConfig{Seed: seed, Rho: fetzer.DefaultRho, Loss: 0.1, MaxDelay: 12 * time.Millisecond})
			w.SafetyOnly = true
			rng := rand.New(rand.NewPCG(seed, 1))
			for range 30 {
				w.Sim.RunFor(time.Duration(rng.IntN(400)) * time.Millisecond)
				switch rng.IntN(4) {
				case 0:
					members := w.Sim.Members()
					rng.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })
					k := 1 + rng.IntN(len(members)-1)
					w.Partition(members[:k], members[k:])
				case 1:
					w.Heal()
				case 2:
					w.Crash(edict.ProcessID(1 + rng.IntN(5)))
				case 3:
					w.Recover(edict.ProcessID(1 + rng.IntN(5)))
				}
			}
			w.Sim.RunFor(time.Second)
			if len(w.starts) == 0 {
				t.Errorf("seed %d: no leader at all", seed)
			}
			clean(t, w)
		}
	}
}
