package sim

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edictlog/edictlog/internal/replog"
)

// TestLog runs the replicated log with a KV state machine under every log
// scenario and checks log safety at every event (logcheck.go: one entry per
// committed index, durable on a quorum of its epoch; acceptedReign and
// epochs that never go back; one lease holder), linearizability of writes,
// CAS, lease and follower reads with porcupine, stale reads against some
// earlier state, and progress after GST.
func TestLog(t *testing.T) {
	var total, ops, committed atomic.Int64
	start := time.Now()
	for _, sc := range LogScenarios() {
		t.Run(sc.Name, func(t *testing.T) {
			t.Parallel()
			var o, c, w, u, snaps, gaps, kept int
			var longest, gapTotal time.Duration
			reads := map[replog.ReadLevel]int{}
			def := 100
			if sc.Seeds > 0 {
				def = sc.Seeds
			}
			list := seedList(t, def)
			for i, seed := range list {
				if nearDeadline(t, i, len(list)) {
					list = list[:i]
					break
				}
				res := RunLog(sc, seed)
				if res.Violation != "" {
					t.Fatalf("%v\nreplay: EDICT_SIM_SEED=%d go test ./internal/sim/ -run 'TestLog/%s$' -count=1 -v", res, seed, sc.Name)
				}
				o, c, w, u, snaps = o+res.Ops, c+res.Committed, w+res.Writes, u+res.Unknown, snaps+res.Snapshots
				gaps, longest, kept, gapTotal = gaps+res.Gaps, max(longest, res.LongestGap), kept+res.Kept, gapTotal+res.GapTotal
				for l, n := range res.Reads {
					reads[l] += n
				}
			}
			total.Add(int64(len(list)))
			ops.Add(int64(o))
			committed.Add(int64(c))
			t.Logf("%s: %d seeds, %d operations checked (%d writes acknowledged, %d unknown, reads %v), %d entries committed, %d snapshots installed",
				sc.Name, len(list), o, w, u, reads, c, snaps)
			if sc.GapBound > 0 {
				mean := time.Duration(0)
				if gaps > 0 {
					mean = (gapTotal / time.Duration(gaps)).Round(time.Microsecond)
				}
				t.Logf("%s: %d membership changes kept their leader throughout; %d handed it over, leaderless for %v on average, the longest %v (bound %v)", sc.Name, kept, gaps, mean, longest, sc.GapBound)
			}
		})
	}
	t.Cleanup(func() {
		fmt.Printf("TestLog: checked %d seeds, %d client operations, %d committed entries in %v\n",
			total.Load(), ops.Load(), committed.Load(), time.Since(start).Round(time.Millisecond))
	})
}

// TestNegativeControlLog shows porcupine catching what the model forbids:
// lease reads served while clocks drift beyond ρ, and stale reads checked
// as if they were linearizable.
func TestNegativeControlLog(t *testing.T) {
	controls := []struct {
		name string
		sc   LogScenario
		want string
	}{
		{"lease-reads-with-drift-beyond-rho", LogScenario{Scenario: Scenario{Name: "log-drift-beyond-rho", N: 3, DriftFactor: 1000, DriftExtreme: true, Partitions: true},
			Levels: []replog.ReadLevel{replog.ReadLease}}, "porcupine found no linearization|leader uniqueness"},
		{"stale-reads-as-linearizable", LogScenario{Scenario: Scenario{Name: "log-stale-as-linearizable", Partitions: true},
			Levels: []replog.ReadLevel{replog.ReadStale}, StaleAsLinearizable: true}, "porcupine found no linearization"},
		// Issue 16: a runtime that waits for its disk loses its lease to
		// a slow one; log-slow-disk's check must see it.
		{"blocking-disk", LogScenario{Scenario: Scenario{Name: "log-slow-disk-blocking", N: 3}, SlowDisks: 3, SlowFsync: 250 * time.Millisecond,
			StableLeader: true, BlockingDisk: true}, "a second reign began|no write was acknowledged"},
	}
	for _, ctl := range controls {
		t.Run(ctl.name, func(t *testing.T) {
			t.Parallel()
			for seed := uint64(1); seed <= 100; seed++ {
				res := RunLog(ctl.sc, seed)
				if res.Violation == "" {
					continue
				}
				if !regexp.MustCompile(ctl.want).MatchString(res.Violation) {
					t.Fatalf("seed %d: caught an unexpected violation: %s", seed, res.Violation)
				}
				t.Logf("caught after %d seeds: %s", seed, res.Violation)
				return
			}
			t.Fatal("no violation in 100 seeds: the check can no longer fail")
		})
	}
}

// TestLogKnownBugs runs the scenarios that fail today (see
// KnownBugLogScenarios), when EDICT_SIM_KNOWN_BUGS=1: they are the next
// work, kept runnable rather than forgotten.
func TestLogKnownBugs(t *testing.T) {
	if os.Getenv("EDICT_SIM_KNOWN_BUGS") != "1" {
		t.Skip("known failing scenarios (see KnownBugLogScenarios); EDICT_SIM_KNOWN_BUGS=1 runs them")
	}
	for _, sc := range KnownBugLogScenarios() {
		t.Run(sc.Name, func(t *testing.T) {
			def := 100
			if sc.Seeds > 0 {
				def = sc.Seeds
			}
			for _, seed := range seedList(t, def) {
				if res := RunLog(sc, seed); res.Violation != "" {
					t.Fatalf("%v\nreplay: EDICT_SIM_KNOWN_BUGS=1 EDICT_SIM_SEED=%d go test ./internal/sim/ -run 'TestLogKnownBugs/%s$' -count=1 -v", res, seed, sc.Name)
				}
			}
		})
	}
}

// TestLogHunt runs one log scenario over many seeds without stopping at
// the first violation and tallies what fires, for measuring faults and
// checkers (the negative control): EDICT_SIM_HUNT=<scenario>
// EDICT_SIM_SEEDS=<n>.
func TestLogHunt(t *testing.T) {
	name := os.Getenv("EDICT_SIM_HUNT")
	if name == "" {
		t.Skip("set EDICT_SIM_HUNT=<log scenario> (and EDICT_SIM_SEEDS)")
	}
	var sc *LogScenario
	for _, s := range append(LogScenarios(), KnownBugLogScenarios()...) {
		if s.Name == name {
			sc = &s
		}
	}
	if sc == nil {
		t.Fatalf("no log scenario %q", name)
	}
	kinds := map[string][]uint64{}
	list := seedList(t, 100)
	for _, seed := range list {
		res := RunLog(*sc, seed)
		if res.Violation == "" {
			continue
		}
		k := violationKind(res.Violation)
		if len(kinds[k]) == 0 {
			t.Logf("first %q at seed %d: %s", k, seed, res.Violation)
		}
		kinds[k] = append(kinds[k], seed)
	}
	for k, seeds := range kinds {
		t.Logf("%s: %d of %d seeds: %v", k, len(seeds), len(list), seeds)
	}
}

// violationKind names the checker a violation message comes from: its
// text after the time, up to the first detail.
func violationKind(v string) string {
	if i := strings.Index(v, ": "); i >= 0 && strings.HasPrefix(v, "t=") {
		v = v[i+2:]
	}
	for _, k := range []string{
		"acceptedReign went back", "active epoch went back", "leader uniqueness", "hold it durably", "holds no entry there",
		"was committed there", "applied as", "porcupine", "panic", "no write was acknowledged",
		"a gap", "stale read",
	} {
		if strings.Contains(v, k) {
			return k
		}
	}
	if len(v) > 60 {
		v = v[:60]
	}
	return v
}
