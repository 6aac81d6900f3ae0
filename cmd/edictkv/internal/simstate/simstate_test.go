package simstate

import (
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/internal/sim"
)

// seeds is the seeds to run: EDICT_SIM_SEED alone, or 1..EDICT_SIM_SEEDS
// (def if unset).
func seeds(t *testing.T, def int) []uint64 {
	if s := os.Getenv("EDICT_SIM_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("EDICT_SIM_SEED=%q: want a number", s)
		}
		return []uint64{n}
	}
	n := envInt(t, "EDICT_SIM_SEEDS", def)
	out := make([]uint64, n)
	for i := range out {
		out[i] = uint64(i + 1)
	}
	return out
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

// nearDeadline reports whether the test binary's deadline is near, and
// says so: the seeds run until then are checked.
func nearDeadline(t *testing.T, i, n int) bool {
	dl, ok := t.Deadline()
	if !ok || time.Until(dl) > 90*time.Second {
		return false
	}
	t.Logf("stopped after %d of %d seeds: the test binary's deadline is %v away (go test -timeout)", i, n, time.Until(dl).Round(time.Second))
	return true
}

// logScenarios are the simulator's log scenarios and the crash-point
// explorer's, each run with edictkv's state; a scenario that differs from
// an earlier one only in the state it keeps on disk (DiskState, which
// every run here has) is the same run, and left out.
func logScenarios() []sim.LogScenario {
	return distinct(slices.Concat(sim.LogScenarios(), sim.CrashPointScenarios()))
}

// distinct leaves out of scs each scenario that differs from an earlier
// one only in its name and the state it keeps on disk.
func distinct(scs []sim.LogScenario) []sim.LogScenario {
	var out, seen []sim.LogScenario
	for _, sc := range scs {
		key := sc
		key.Name, key.DiskState, key.State = "", true, nil
		if slices.ContainsFunc(seen, func(k sim.LogScenario) bool { return reflect.DeepEqual(k, key) }) {
			continue
		}
		seen = append(seen, key)
		out = append(out, sc)
	}
	return out
}

// TestLog runs edictkv's state under every log scenario of the simulator
// (TestLog's there) and the crash-point explorer's scenarios, 5 seeds
// each by default (EDICT_SIM_SEEDS=n for n): the simulator's checks of
// the log and the registers, and the Checker's of every replica's
// history, every answer and every read. A failure prints its replay; a
// scenario goes on to its next seed, up to five failures.
func TestLog(t *testing.T) {
	var runs, ops, modelOps, committed atomic.Int64
	var wmu sync.Mutex
	var watches watchStats
	start := time.Now()
	for _, sc := range logScenarios() {
		t.Run(sc.Name, func(t *testing.T) {
			t.Parallel()
			list := seeds(t, 5)
			var o, mo, c, snaps, failed int
			var ws watchStats
			for i, seed := range list {
				if nearDeadline(t, i, len(list)) || failed == 5 {
					list = list[:i]
					break
				}
				esc := Scenario(sc, seed)
				var ck *Checker
				esc.Model = func() sim.Model { ck = NewChecker(seed); return ck }
				res := sim.RunLog(esc, seed)
				ws.add(ck.WatchStats())
				if res.Violation != "" {
					// The sweep goes on, to tell one bad seed from many.
					t.Errorf("%v\nreplay: EDICT_SIM_SEED=%d go test ./cmd/edictkv/internal/simstate/ -run 'TestLog/%s$' -count=1 -v", res, seed, sc.Name)
					failed++
					continue
				}
				o, mo, c, snaps = o+res.Ops, mo+res.ModelOps, c+res.Committed, snaps+res.Snapshots
			}
			runs.Add(int64(len(list)))
			ops.Add(int64(o))
			modelOps.Add(int64(mo))
			committed.Add(int64(c))
			wmu.Lock()
			watches.add(ws)
			wmu.Unlock()
			t.Logf("%s: %d seeds, %d register operations and %d of the workload's checked, %d entries committed, %d snapshots installed; %v",
				sc.Name, len(list), o, mo, c, snaps, ws)
		})
	}
	t.Cleanup(func() {
		fmt.Printf("simstate TestLog: %d runs, %d register operations, %d workload operations, %d committed entries in %v; %v\n",
			runs.Load(), ops.Load(), modelOps.Load(), committed.Load(), time.Since(start).Round(time.Millisecond), watches)
	})
}

// TestCrashPoints is the crash-point explorer (internal/sim's
// TestCrashPoints) with edictkv's state: a seed of each of its scenarios
// (those that differ only in DiskState once)
// is run once to number every process's durability boundaries, then
// again crashing a process at one of them — its state losing what its
// store had not committed — with every check on. By default
// EDICT_CRASH_PER_SEED (12) random boundaries of EDICT_CRASH_SEEDS (1)
// seeds; EDICT_CRASH_ALL=1 crashes every boundary.
func TestCrashPoints(t *testing.T) {
	nseeds := envInt(t, "EDICT_CRASH_SEEDS", 1)
	perSeed := envInt(t, "EDICT_CRASH_PER_SEED", 12)
	all := os.Getenv("EDICT_CRASH_ALL") == "1"
	for _, sc := range distinct(sim.CrashPointScenarios()) {
		t.Run(sc.Name, func(t *testing.T) {
			t.Parallel()
			runs, points := 0, 0
			for seed := uint64(1); seed <= uint64(nseeds); seed++ {
				if s := os.Getenv("EDICT_SIM_SEED"); s != "" && s != strconv.FormatUint(seed, 10) {
					continue
				}
				esc := Scenario(sc, seed)
				res, counts := sim.CountCrashPoints(esc, seed, false)
				if res.Violation != "" {
					t.Fatalf("%v (no crash placed)\nreplay: EDICT_SIM_SEED=%d go test ./cmd/edictkv/internal/simstate/ -run 'TestCrashPoints/%s$' -count=1 -v", res, seed, sc.Name)
				}
				cps := crashPoints(counts)
				points += len(cps)
				if !all {
					rng := rand.New(rand.NewPCG(seed, 7))
					rng.Shuffle(len(cps), func(i, j int) { cps[i], cps[j] = cps[j], cps[i] })
					cps = cps[:min(perSeed, len(cps))]
				}
				for i, cp := range cps {
					if nearDeadline(t, i, len(cps)) {
						break
					}
					res := sim.RunLogCrashingAt(esc, seed, cp, 0, false)
					runs++
					if res.Violation != "" {
						t.Fatalf("crash at %s\n%v\nreplay: EDICT_CRASH_SCENARIO=%s EDICT_SIM_SEED=%d EDICT_CRASH_AT=%d EDICT_CRASH_K=%d go test ./cmd/edictkv/internal/simstate/ -run 'TestCrashPoint$' -count=1 -v",
							res.CrashedAt, res, sc.Name, seed, cp.At, cp.K)
					}
				}
			}
			t.Logf("%s: %d crash runs (of %d boundaries in %d seeds), no violation", sc.Name, runs, points, nseeds)
		})
	}
}

// crashPoints lists every boundary of every process, in a fixed order.
func crashPoints(counts map[edict.ProcessID]int) []sim.CrashPoint {
	var cps []sim.CrashPoint
	for _, p := range slices.Sorted(func(yield func(edict.ProcessID) bool) {
		for p := range counts {
			if !yield(p) {
				return
			}
		}
	}) {
		for k := 1; k <= counts[p]; k++ {
			cps = append(cps, sim.CrashPoint{At: p, K: k})
		}
	}
	return cps
}

// TestCrashPoint replays one crash of TestCrashPoints: EDICT_CRASH_SCENARIO,
// EDICT_SIM_SEED, EDICT_CRASH_AT (the process) and EDICT_CRASH_K (its
// boundary).
func TestCrashPoint(t *testing.T) {
	name := os.Getenv("EDICT_CRASH_SCENARIO")
	if name == "" {
		t.Skip("replays one crash point: EDICT_CRASH_SCENARIO, EDICT_SIM_SEED, EDICT_CRASH_AT, EDICT_CRASH_K")
	}
	seed := uint64(envInt(t, "EDICT_SIM_SEED", 1))
	cp := sim.CrashPoint{At: edict.ProcessID(envInt(t, "EDICT_CRASH_AT", 1)), K: envInt(t, "EDICT_CRASH_K", 1)}
	for _, sc := range sim.CrashPointScenarios() {
		if sc.Name == name {
			res := sim.RunLogCrashingAt(Scenario(sc, seed), seed, cp, 0, false)
			t.Logf("crash at %s\n%v", res.CrashedAt, res)
			if res.Violation != "" {
				t.Fail()
			}
			return
		}
	}
	t.Fatalf("no crash-point scenario %q", name)
}
