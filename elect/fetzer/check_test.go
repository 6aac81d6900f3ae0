package fetzer

import (
	"strings"
	"testing"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/internal/detsim"
)

// reports: the checker reported a violation of prop.
func reports(w *world, prop string) bool {
	for _, v := range w.violations {
		if strings.Contains(v, ": "+prop+":") {
			return true
		}
	}
	return false
}

// TestCheckerNegative feeds the checker broken histories: each must be
// reported as the violation it is, and a correct one must not.
func TestCheckerNegative(t *testing.T) {
	fresh := func(c Config) *world {
		w := newWorld(3, c, detsim.Config{Seed: 1})
		w.lastLeader = map[edict.ProcessID]time.Duration{} // forget the real run
		return w
	}
	at := kappa + time.Second // everything has been connected for κ
	all := ps(1, 2, 3)
	for _, tc := range []struct {
		name, prop string
		c          Config
		views      []view
	}{
		{"two leaders share a supporter", "SO", Config{}, []view{{id: 1, leader: true, support: ps(1, 3)}, {id: 2, leader: true, support: ps(2, 3)}}},
		{"leader without itself", "LS", Config{}, []view{{id: 1, leader: true, support: ps(2, 3)}}},
		{"leader unsupported by a connected process", "BI", Config{}, []view{{id: 1, leader: true, support: ps(1, 2)}}},
		{"stable partition without a leader", "T", Config{}, []view{{id: 1}, {id: 2}, {id: 3}}},
		{"minority leader in majority mode", "majority", Config{Majority: true}, []view{{id: 1, leader: true, support: ps(1)}}},
		{"two leaders in majority mode", "S", Config{Majority: true}, []view{{id: 1, leader: true, support: ps(1, 2)}, {id: 3, leader: true, support: ps(3)}}},
	} {
		w := fresh(tc.c)
		w.check(at, tc.views)
		if !reports(w, tc.prop) {
			t.Errorf("%s: %s not reported: %v", tc.name, tc.prop, w.violations)
		}
	}
	// The positive control: one leader supported by all.
	w := fresh(Config{})
	w.check(at, []view{{id: 1, leader: true, support: all}, {id: 2}, {id: 3}})
	if len(w.violations) > 0 {
		t.Errorf("correct history reported: %v", w.violations)
	}
}

// TestBrokenInstances runs deliberately broken Electors: the checker must
// catch each in a run where the real one is clean (TestSplitAndHeal). The
// broken instance for (SO) is in TestLiteralRelease.
func TestBrokenInstances(t *testing.T) {
	run := func(tweak func(*Elector)) *world {
		w := newWorld(5, Config{}, detsim.Config{Seed: 7, Rho: DefaultRho}, tweak)
		w.sim.RunFor(time.Second)
		w.partition(ps(1, 2), ps(3, 4, 5))
		w.sim.RunFor(2 * kappa)
		w.heal()
		w.sim.RunFor(2 * kappa)
		w.finish()
		return w
	}
	for _, tc := range []struct {
		prop  string
		tweak func(*Elector)
	}{
		{"BI", func(e *Elector) { e.broken.alone = true }},
		{"T", func(e *Elector) { e.broken.mute = true }},
	} {
		if w := run(tc.tweak); !reports(w, tc.prop) {
			t.Errorf("broken instance for %s not caught: %v", tc.prop, w.violations)
		}
	}
}

// TestLiteralRelease: Fig. 31 read literally — a leader whose renewal
// failed stays leader yet releases its supporters (and itself) — breaks
// (SO) in this lossy run of splits and heals; the Elector as built, which
// steps down first (doc.go, "Failed renewal"), does not. This is also the
// (SO) checker's negative control on a broken instance.
func TestLiteralRelease(t *testing.T) {
	run := func(tweak ...func(*Elector)) *world {
		w := newWorld(5, Config{}, detsim.Config{Seed: 8, Rho: DefaultRho, Loss: 0.05}, tweak...)
		w.safetyOnly = true
		for range 10 {
			w.sim.RunFor(500 * time.Millisecond)
			w.partition(ps(1, 2), ps(3, 4, 5))
			w.sim.RunFor(500 * time.Millisecond)
			w.heal()
		}
		w.finish()
		return w
	}
	if w := run(func(e *Elector) { e.broken.literal = true }); !reports(w, "SO") {
		t.Errorf("literal Fig. 31 not caught breaking SO: %v", w.violations)
	}
	if w := run(); len(w.violations) > 0 {
		t.Errorf("as built: %v", w.violations)
	}
}
