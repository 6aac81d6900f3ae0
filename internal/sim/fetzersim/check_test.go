package fetzersim

import (
	"testing"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect/fetzer"
	"github.com/edictlog/edictlog/internal/sim"
)

// TestCheckerNegative feeds the checker broken histories: each must be
// reported as the violation it is, and a correct one must not. (Broken
// Electors in real runs, the other negative controls, are in
// elect/fetzer's broken_test.go: they need the package's test hooks.)
func TestCheckerNegative(t *testing.T) {
	fresh := func(c fetzer.Config) *World {
		w := NewWorld(3, c, sim.ProtocolConfig{Seed: 1})
		w.lastLeader = map[edict.ProcessID]time.Duration{} // forget the real run
		return w
	}
	at := kappa + time.Second // everything has been connected for κ
	all := ps(1, 2, 3)
	for _, tc := range []struct {
		name, prop string
		c          fetzer.Config
		views      []view
	}{
		{"two leaders share a supporter", "SO", fetzer.Config{}, []view{{id: 1, leader: true, support: ps(1, 3)}, {id: 2, leader: true, support: ps(2, 3)}}},
		{"leader without itself", "LS", fetzer.Config{}, []view{{id: 1, leader: true, support: ps(2, 3)}}},
		{"leader unsupported by a connected process", "BI", fetzer.Config{}, []view{{id: 1, leader: true, support: ps(1, 2)}}},
		{"stable partition without a leader", "T", fetzer.Config{}, []view{{id: 1}, {id: 2}, {id: 3}}},
		{"minority leader in majority mode", "majority", fetzer.Config{Majority: true}, []view{{id: 1, leader: true, support: ps(1)}}},
		{"two leaders in majority mode", "S", fetzer.Config{Majority: true}, []view{{id: 1, leader: true, support: ps(1, 2)}, {id: 3, leader: true, support: ps(3)}}},
	} {
		w := fresh(tc.c)
		w.check(at, tc.views)
		if !w.Reports(tc.prop) {
			t.Errorf("%s: %s not reported: %v", tc.name, tc.prop, w.violations)
		}
	}
	// The positive control: one leader supported by all.
	w := fresh(fetzer.Config{})
	w.check(at, []view{{id: 1, leader: true, support: all}, {id: 2}, {id: 3}})
	if len(w.violations) > 0 {
		t.Errorf("correct history reported: %v", w.violations)
	}
}
