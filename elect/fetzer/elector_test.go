package fetzer

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/internal/detsim"
)

var kappa = Config{}.Kappa()

func ps(ids ...edict.ProcessID) []edict.ProcessID { return ids }

// clean fails the test with the checker's violations, if any.
func clean(t *testing.T, w *world) {
	t.Helper()
	w.finish()
	if len(w.violations) > 0 {
		t.Fatalf("%d violations, first: %s", len(w.violations), strings.Join(w.violations, "\n"))
	}
	if w.checks == 0 {
		t.Fatal("nothing was checked")
	}
}

// local is p's LocalLeader now.
func local(w *world, p edict.ProcessID) string {
	l, s, a := w.procs[p].LocalLeader(w.procs[p].reading())
	return fmt.Sprintf("%v %v %v", l, s, a)
}

// electedWithin: a leadership of want with support exactly support
// starts within κ of from.
func electedWithin(t *testing.T, w *world, from time.Duration, want edict.ProcessID, support []edict.ProcessID) {
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
			w := newWorld(n, Config{}, detsim.Config{Seed: uint64(n), Rho: DefaultRho})
			w.sim.RunFor(2 * kappa)
			electedWithin(t, w, 0, 1, w.sim.Members())
			if l, ok := w.sim.Agreed(); !ok || l != 1 {
				t.Fatalf("WeakLeader: %v", w.sim)
			}
			for _, p := range w.sim.Members() {
				if got, want := local(w, p), fmt.Sprintf("p1 %v true", w.sim.Members()); got != want {
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
	w := newWorld(5, Config{}, detsim.Config{Seed: 7, Rho: DefaultRho})
	w.sim.RunFor(time.Second)
	split := w.sim.Now()
	w.partition(ps(1, 2), ps(3, 4, 5))
	w.sim.RunFor(2 * kappa)
	electedWithin(t, w, split, 3, ps(3, 4, 5))
	for p, want := range map[edict.ProcessID]string{1: "p1 [p1 p2] false", 2: "p1 [p1 p2] false", 4: "p3 [p3 p4 p5] true"} {
		if got := local(w, p); got != want {
			t.Errorf("LocalLeader at %v = %s, want %s", p, got, want)
		}
	}
	w.heal()
	w.sim.RunFor(2 * kappa)
	if ls := w.leaders(); len(ls) != 1 || ls[0].id != 1 || len(ls[0].support) != 5 {
		t.Fatalf("after heal: %+v", ls)
	}
	split = w.sim.Now()
	w.partition(ps(1), ps(2, 3), ps(4, 5))
	w.sim.RunFor(2 * kappa)
	electedWithin(t, w, split, 2, ps(2, 3))
	electedWithin(t, w, split, 4, ps(4, 5))
	if got := local(w, 1); got != "p1 [p1] false" {
		t.Errorf("lone p1: %s", got)
	}
	w.heal()
	w.sim.RunFor(2 * kappa)
	if ls := w.leaders(); len(ls) != 1 || ls[0].id != 1 {
		t.Fatalf("after heal: %+v", ls)
	}
	clean(t, w)
}

// TestDrift: the same with clocks drifting by up to ρ = 0.5% (and the
// Electors told so).
func TestDrift(t *testing.T) {
	rho := 0.005
	w := newWorld(5, Config{Rho: rho}, detsim.Config{Seed: 3, Rho: rho})
	w.kappa = Config{Rho: rho}.Kappa()
	w.sim.RunFor(time.Second)
	w.partition(ps(1, 2, 3), ps(4, 5))
	w.sim.RunFor(2 * w.kappa)
	w.heal()
	w.sim.RunFor(2 * w.kappa)
	if ls := w.leaders(); len(ls) != 1 || ls[0].id != 1 {
		t.Fatalf("after heal: %+v", ls)
	}
	clean(t, w)
}

// TestMajorityMode (§X): only a majority side has a leader; with no
// majority anywhere there is none; never two at once (checked at every
// step).
func TestMajorityMode(t *testing.T) {
	c := Config{Majority: true}
	lock := c.withDefaults().LockTime
	w := newWorld(5, c, detsim.Config{Seed: 11, Rho: DefaultRho})
	w.sim.RunFor(time.Second)
	split := w.sim.Now()
	w.partition(ps(1, 2), ps(3, 4, 5))
	w.sim.RunFor(2 * kappa)
	electedWithin(t, w, split, 3, ps(3, 4, 5))
	for _, s := range w.starts {
		if s.at > split && s.id < 3 {
			t.Fatalf("minority leader %+v", s)
		}
	}
	if l, _, _ := w.procs[1].LocalLeader(w.procs[1].reading()); l != edict.None {
		t.Fatalf("minority process names %v", l)
	}
	w.partition(ps(1, 2), ps(3, 4), ps(5))
	w.sim.RunFor(lock)
	w.sim.RunFor(2 * kappa)
	if ls := w.leaders(); len(ls) != 0 {
		t.Fatalf("leaders without a majority: %+v", ls)
	}
	healed := w.sim.Now()
	w.heal()
	w.sim.RunFor(2 * kappa)
	electedWithin(t, w, healed, 1, w.sim.Members())
	clean(t, w)
}

// TestCrashRecover: the leader's crash elects the next smallest within κ;
// the recovered process (a new incarnation, which first waits lockTime)
// leads again.
func TestCrashRecover(t *testing.T) {
	w := newWorld(5, Config{}, detsim.Config{Seed: 5, Rho: DefaultRho})
	w.sim.RunFor(time.Second)
	crashed := w.sim.Now()
	w.crash(1)
	w.sim.RunFor(2 * kappa)
	electedWithin(t, w, crashed, 2, ps(2, 3, 4, 5))
	back := w.sim.Now()
	w.recover(1)
	w.sim.RunFor(3 * kappa)
	electedWithin(t, w, back, 1, w.sim.Members())
	clean(t, w)
}

// TestSafetyUnderLoss: with 10% loss, random partitions and crashes, the
// safety requirements (SO), (LS) and, in majority mode, one leader hold
// at every step. (T) and (BI) are promises about connected processes,
// which lossy ones are not.
func TestSafetyUnderLoss(t *testing.T) {
	for seed := uint64(1); seed <= 6; seed++ {
		for _, majority := range []bool{false, true} {
			w := newWorld(5, Config{Majority: majority}, detsim.Config{Seed: seed, Rho: DefaultRho, Loss: 0.1, MaxDelay: 12 * time.Millisecond})
			w.safetyOnly = true
			rng := rand.New(rand.NewPCG(seed, 1))
			for range 30 {
				w.sim.RunFor(time.Duration(rng.IntN(400)) * time.Millisecond)
				switch rng.IntN(4) {
				case 0:
					members := w.sim.Members()
					rng.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })
					k := 1 + rng.IntN(len(members)-1)
					w.partition(members[:k], members[k:])
				case 1:
					w.heal()
				case 2:
					w.crash(edict.ProcessID(1 + rng.IntN(5)))
				case 3:
					w.recover(edict.ProcessID(1 + rng.IntN(5)))
				}
			}
			w.sim.RunFor(time.Second)
			if len(w.starts) == 0 {
				t.Errorf("seed %d: no leader at all", seed)
			}
			clean(t, w)
		}
	}
}
