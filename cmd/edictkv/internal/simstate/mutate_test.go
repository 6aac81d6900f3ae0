//go:build edictmutate

package simstate

import (
	"testing"

	"github.com/edictlog/edictlog/cmd/edictkv/internal/mvcc"
	"github.com/edictlog/edictlog/internal/sim"
)

// TestMutations is the store's negative control: with one of its rules
// switched off (mvcc/mutation.go), the runs of TestLog must find a
// violation, and the same seed with the rule in force must not.
//
//	go test -tags edictmutate ./cmd/edictkv/internal/simstate/ -run TestMutations -count=1 -v
//
// EDICT_MUTATE_SEEDS sets the seeds per scenario (default 5).
//
// It runs each rule with the whole Checker, and a rule of the store's
// history once more with the workload's reads and the watch clients left
// out, where only the checks of the replicas' histories (at applies,
// starts, installs and the end) can see it. The watch rules only
// watchers can see.
func TestMutations(t *testing.T) {
	n := envInt(t, "EDICT_MUTATE_SEEDS", 5)
	for _, m := range []struct {
		rule    string
		history bool // a rule of the history: caught without reads nor watchers too
	}{
		{mvcc.RuleCompactKeepsNewest, true},
		{mvcc.RuleWatchCatchUpWhole, false},
		{mvcc.RuleWatchRestoreUnsynced, false},
	} {
		for _, noReads := range []bool{false, true} {
			if noReads && !m.history {
				continue
			}
			rule := m.rule
			name, replay := rule, "TestLog"
			if noReads {
				name, replay = rule+"/history-alone", "TestMutationHistoryAlone"
			}
			t.Run(name, func(t *testing.T) {
				run := func(sc sim.LogScenario, seed uint64) sim.LogResult {
					esc := Scenario(sc, seed)
					esc.Model = func() sim.Model { c := NewChecker(seed); c.noReads = noReads; return c }
					return sim.RunLog(esc, seed)
				}
				for seed := uint64(1); seed <= uint64(n); seed++ {
					for _, sc := range logScenarios() {
						mvcc.Mutate(rule)
						res := run(sc, seed)
						mvcc.Mutate("")
						if res.Violation == "" {
							continue
						}
						if base := run(sc, seed); base.Violation != "" {
							t.Fatalf("%s seed %d violates with the rule in force too: %s", sc.Name, seed, base.Violation)
						}
						t.Logf("mvcc/%s caught by %s, seed %d: %s\nreplay: EDICT_MUTATE=%s EDICT_SIM_SEED=%d go test -tags edictmutate ./cmd/edictkv/internal/simstate/ -run '%s/%s$' -count=1 -v",
							rule, sc.Name, seed, res.Violation, rule, seed, replay, sc.Name)
						return
					}
				}
				t.Fatalf("mvcc/%s: no violation in %d seeds of %d scenarios: the checks cannot tell the rule from its absence", rule, n, len(logScenarios()))
			})
		}
	}
}

// TestMutationHistoryAlone is TestLog with the workload's reads and the
// watch clients left out, to replay what TestMutations found with the
// history checks alone.
func TestMutationHistoryAlone(t *testing.T) {
	for _, sc := range logScenarios() {
		t.Run(sc.Name, func(t *testing.T) {
			for _, seed := range seeds(t, 5) {
				esc := Scenario(sc, seed)
				esc.Model = func() sim.Model { c := NewChecker(seed); c.noReads = true; return c }
				if res := sim.RunLog(esc, seed); res.Violation != "" {
					t.Fatalf("%v", res)
				}
			}
		})
	}
}
