package sim

import (
	"os"
	"testing"
)

// TestTrace prints the ground-truth leader timeline of one seed (a log
// scenario's: every replog event); for
// debugging a replayed failure: EDICT_SIM_TRACE=scenario EDICT_SIM_SEED=n
// (and, for a log scenario, EDICT_SIM_TRACE_LEASE=1 to see every lease
// message and hand-over delivered).
func TestTrace(t *testing.T) {
	name := os.Getenv("EDICT_SIM_TRACE")
	if name == "" {
		t.Skip("set EDICT_SIM_TRACE=<scenario> and EDICT_SIM_SEED=<seed>")
	}
	var run func(seed uint64) any
	for _, sc := range Scenarios() {
		if sc.Name == name {
			run = func(seed uint64) any { return Run(sc, seed) }
		}
	}
	for _, sc := range LogScenarios() {
		if sc.Name == name {
			run = func(seed uint64) any { return RunLog(sc, seed) }
		}
	}
	if run == nil {
		t.Fatalf("no scenario %q", name)
	}
	traceHook = func(format string, args ...any) { t.Logf(format, args...) }
	defer func() { traceHook = nil }()
	for _, seed := range seedList(t, 1) {
		t.Log(run(seed))
	}
}
