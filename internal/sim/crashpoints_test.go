package sim

import (
	"flag"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edictlog/edictlog/edict"
)

// TestCrashPoints is the crash-point explorer (crashpoints.go): for each
// of CrashPointScenarios, a seed is run once to number every process's
// durability boundaries, then again once per boundary, crashing that
// process there, and every checker runs on what the crash left. Every
// boundary of the first EDICT_CRASH_SEEDS seeds (default 1) is crashed;
// of the next EDICT_CRASH_SAMPLE seeds (default 0), EDICT_CRASH_PER_SEED
// random boundaries each (default 40).
//
//	go test ./internal/sim/ -run TestCrashPoints -count=1 -v
//	EDICT_CRASH_SEEDS=20 EDICT_CRASH_SAMPLE=200 go test ./internal/sim/ -run TestCrashPoints -count=1 -timeout 2h
//
// EDICT_CRASH_NO_SEND_CHECK=1 switches the send-time check off, to see
// what the crashes alone show.
func TestCrashPoints(t *testing.T) {
	exhaustive := envInt(t, "EDICT_CRASH_SEEDS", 1)
	sampled := envInt(t, "EDICT_CRASH_SAMPLE", 0)
	perSeed := envInt(t, "EDICT_CRASH_PER_SEED", 40)
	noSend := os.Getenv("EDICT_CRASH_NO_SEND_CHECK") != ""
	for _, sc := range CrashPointScenarios() {
		t.Run(sc.Name, func(t *testing.T) {
			t.Parallel()
			var runs, points atomic.Int64
			for seed := uint64(1); seed <= uint64(exhaustive+sampled); seed++ {
				if s := os.Getenv("EDICT_SIM_SEED"); s != "" && s != strconv.FormatUint(seed, 10) {
					continue
				}
				res, counts := CountCrashPoints(sc, seed, noSend)
				if res.Violation != "" {
					t.Fatalf("%v (no crash placed)\nreplay: EDICT_SIM_SEED=%d go test ./internal/sim/ -run 'TestCrashPoints/%s$' -count=1 -v", res, seed, sc.Name)
				}
				cps := allCrashPoints(counts)
				points.Add(int64(len(cps)))
				if seed > uint64(exhaustive) {
					rng := rand.New(rand.NewPCG(seed, 7))
					rng.Shuffle(len(cps), func(i, j int) { cps[i], cps[j] = cps[j], cps[i] })
					cps = cps[:min(perSeed, len(cps))]
				}
				for i, cp := range cps {
					if nearDeadline(t, i, len(cps)) {
						break
					}
					res := RunLogCrashingAt(sc, seed, cp, 0, noSend)
					runs.Add(1)
					if res.Violation != "" {
						t.Fatalf("crash at %s\n%v\nreplay: go test ./internal/sim/ -run 'TestCrashPoint$' -count=1 -v -args -scenario=%s -seed=%d -at=%d -k=%d",
							res.CrashedAt, res, sc.Name, seed, cp.At, cp.K)
					}
				}
			}
			t.Logf("%s: %d crash runs (of %d boundaries in %d+%d seeds), no violation", sc.Name, runs.Load(), points.Load(), exhaustive, sampled)
		})
	}
}

// allCrashPoints lists every boundary of every process, in a fixed order.
func allCrashPoints(counts map[edict.ProcessID]int) []CrashPoint {
	var cps []CrashPoint
	for _, p := range slices.Sorted(func(yield func(edict.ProcessID) bool) {
		for p := range counts {
			if !yield(p) {
				return
			}
		}
	}) {
		for k := 1; k <= counts[p]; k++ {
			cps = append(cps, CrashPoint{At: p, K: k})
		}
	}
	return cps
}

func envInt(t *testing.T, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 0 {
		t.Fatalf("%s=%q: want a number", name, s)
	}
	return v
}

var (
	cpScenario = flag.String("scenario", "", "TestCrashPoint: the scenario")
	cpSeed     = flag.Int("seed", 0, "TestCrashPoint: the seed")
	cpAt       = flag.Int("at", 0, "TestCrashPoint: the process to crash")
	cpK        = flag.Int("k", 0, "TestCrashPoint: at its k-th boundary")
)

// TestCrashPoint replays one crash point of TestCrashPoints, with the
// trace of what the crash struck.
func TestCrashPoint(t *testing.T) {
	if *cpScenario == "" {
		t.Skip("replays one crash point: -args -scenario= -seed= -at= -k=")
	}
	for _, sc := range CrashPointScenarios() {
		if sc.Name == *cpScenario {
			traceHook = func(format string, args ...any) { t.Logf(format, args...) }
			defer func() { traceHook = nil }()
			start := time.Now()
			res := RunLogCrashingAt(sc, uint64(*cpSeed), CrashPoint{At: edict.ProcessID(*cpAt), K: *cpK}, 0, os.Getenv("EDICT_CRASH_NO_SEND_CHECK") != "")
			t.Logf("crash at %s\n%v (%v)", res.CrashedAt, res, time.Since(start))
			if res.Violation != "" {
				t.Fail()
			}
			return
		}
	}
	t.Fatalf("no crash-point scenario %q", *cpScenario)
}
