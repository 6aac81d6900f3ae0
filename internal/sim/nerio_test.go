package sim

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edictlog/edictlog/wire"
)

// seeds returns how many seeds to run: EDICT_SIM_SEEDS, or def.
func seeds(t testing.TB, def int) int {
	if s := os.Getenv("EDICT_SIM_SEEDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("EDICT_SIM_SEEDS=%q: want a positive number", s)
		}
		return n
	}
	return def
}

// seedList is 1..n, or just EDICT_SIM_SEED when replaying one seed.
func seedList(t testing.TB, def int) []uint64 {
	if s := os.Getenv("EDICT_SIM_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("EDICT_SIM_SEED=%q: want a number", s)
		}
		return []uint64{n}
	}
	n := seeds(t, def)
	out := make([]uint64, n)
	for i := range out {
		out[i] = uint64(i + 1)
	}
	return out
}

// nearDeadline reports, before the i-th of n seeds, whether the test
// binary's deadline (go test's -timeout, 10 minutes by default) is near,
// and says so: on a busy machine the simulator's seeds can take longer
// than the default allows, and the seeds already run have been checked.
// CI gives a longer timeout and so runs every seed.
func nearDeadline(t *testing.T, i, n int) bool {
	dl, ok := t.Deadline()
	if !ok || time.Until(dl) > 90*time.Second {
		return false
	}
	t.Logf("stopped after %d of %d seeds: the test binary's deadline is %v away (go test -timeout)", i, n, time.Until(dl).Round(time.Second))
	return true
}

// TestNerio runs every scenario on many seeds and checks Leader
// Uniqueness, Edict Validity and Ordering, invariants (14) and (16), leader
// verification, and after GST Leader Stability and Eventual Election.
func TestNerio(t *testing.T) {
	var total, events, checks, pairs atomic.Int64
	start := time.Now()
	for _, sc := range Scenarios() {
		t.Run(sc.Name, func(t *testing.T) {
			t.Parallel()
			var ev, ch, pr, el, prom, rs, term int64
			byType := map[wire.LeaseType]int{}
			list := seedList(t, 300)
			for i, seed := range list {
				if nearDeadline(t, i, len(list)) {
					list = list[:i]
					break
				}
				res := Run(sc, seed)
				if res.Violation != "" {
					t.Fatalf("%v\nreplay: EDICT_SIM_SEED=%d go test ./internal/sim/ -run 'TestNerio/%s$' -count=1 -v", res, seed, sc.Name)
				}
				ev += int64(res.Events)
				ch += int64(res.Checks)
				pr += int64(res.Pairs)
				el += int64(res.Elections)
				prom += int64(res.Promises)
				rs += int64(res.Restarts)
				term += int64(res.Terminations)
				for k, v := range res.ByType {
					byType[k] += v
				}
			}
			total.Add(int64(len(list)))
			events.Add(ev)
			checks.Add(ch)
			pairs.Add(pr)
			t.Logf("%s: %d seeds, %d events, %d checks, %d edict pairs ordered, %d elections, %d verification promises, %d restarts, %d epoch terminations learned; election bound after GST %v; messages %v",
				sc.Name, len(list), ev, ch, pr, el, prom, rs, term, bound(sc), byType)
		})
	}
	t.Cleanup(func() {
		fmt.Printf("TestNerio: checked %d seeds, %d events, %d checks, %d edict pairs in %v\n",
			total.Load(), events.Load(), checks.Load(), pairs.Load(), time.Since(start).Round(time.Millisecond))
	})
}

// TestBasicSeedRate reports how many seeds of the basic scenario one core
// checks per minute. It asserts nothing about time (machines are noisy);
// BenchmarkBasicSeed gives the precise figure.
func TestBasicSeedRate(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	sc := Scenarios()[0]
	const n = 50
	start := time.Now()
	for seed := uint64(1000); seed < 1000+n; seed++ {
		if res := Run(sc, seed); res.Violation != "" {
			t.Fatal(res)
		}
	}
	per := time.Since(start) / n
	t.Logf("basic scenario: %v per seed, %.0f seeds/minute on one core", per, float64(time.Minute)/float64(per))
}

func BenchmarkBasicSeed(b *testing.B) {
	sc := Scenarios()[0]
	for i := 0; b.Loop(); i++ {
		if res := Run(sc, uint64(i+1)); res.Violation != "" {
			b.Fatal(res)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Minutes(), "seeds/min")
}

// TestNegativeControl breaks the model's assumptions and requires the
// checker to catch the violation. A control that stops finding its
// violation is a failing test: it means the checker can no longer fail.
func TestNegativeControl(t *testing.T) {
	controls := []struct {
		name string
		sc   Scenario
		want []string // the violation must be one of these
	}{
		{
			name: "drift-beyond-rho",
			// Renewing half an interval early, not ¾ (the default): a
			// drift beyond ρ shows when a renewal fails and a lease runs
			// its course, and the earlier renewal leaves fewer such runs.
			sc:   Scenario{Name: "drift-beyond-rho", DriftFactor: 300, DriftExtreme: true, Loss: 0.05, RenewLead: 100 * time.Millisecond},
			want: []string{"invariant (14)", "Leader Uniqueness", "Edict Validity"},
		},
		{
			name: "forget-grant-without-quarantine",
			// Granters forget only by a restart, and a leader keeps its
			// quorum unless most of them forget within one lease: three
			// processes, crashing often and briefly.
			sc:   Scenario{Name: "forget-grant", N: 3, Crashes: true, CrashEvery: 100 * time.Millisecond, MaxDowntime: 60 * time.Millisecond, ForgetOnRestart: true, Competing: true},
			want: []string{"invariant (14)", "Leader Uniqueness", "Edict Validity"},
		},
		{
			name: "edicts-past-expiry",
			sc:   Scenario{Name: "rogue-leader", RogueLeader: true, Transfers: true, Crashes: true},
			want: []string{"Edict Validity"},
		},
	}
	for _, ctl := range controls {
		t.Run(ctl.name, func(t *testing.T) {
			t.Parallel()
			for seed := uint64(1); seed <= 1000; seed++ {
				res := Run(ctl.sc, seed)
				if res.Violation == "" {
					continue
				}
				for _, w := range ctl.want {
					if strings.Contains(res.Violation, w) {
						t.Logf("caught after %d seeds: %s", seed, res.Violation)
						return
					}
				}
				t.Fatalf("seed %d: caught an unexpected violation: %s", seed, res.Violation)
			}
			t.Fatalf("the checker found no violation in 1000 seeds: it can no longer fail")
		})
	}
}

func bound(sc Scenario) time.Duration {
	d := sc.withDefaults()
	return d.ElectionBound()
}
