package bullysim

import (
	"errors"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect/bully"
	"github.com/edictlog/edictlog/internal/sim"
)

// CrashBound is how long after the coordinator crashes every running
// process is Normal again under the strongest running one, if nothing
// else fails — the constant of Assertion 2 (Stoller's c_S, eq. 5) for this
// implementation. Without a failure detector (fd = 0), writing U = T +
// Processing and stage = 2U:
//
//	U             the coordinator's last AreYouNormal still arriving
//	+ CheckPeriod + stage   the failure suspector's TIMEOUT
//	+ stage       the AreYouThere probe of the coordinator times out
//	+ stage       phase 1: nobody stronger answers
//	+ stage       phase 2 step 1: HaltAcks (all come when nothing fails)
//	+ U + U       reorganization (NewCoordinator, then Ready) and Ready's delay
//
// With a failure detector of latency fd the strongest survivor knows
// every stronger node is down and skips phase 1: fd + stage + 2U.
// (Stoller's eq. 5 has (n−1) stages where this has one: Bully_FD halts the
// weaker nodes one at a time, this implementation all at once.) Local
// timers run at rates within 1 ± rho, so the total is divided by 1 − rho.
func CrashBound(cfg bully.Config, fd time.Duration, rho float64) time.Duration {
	stage := cfg.Stage() // 2U, defaults applied
	u := stage / 2
	check := cfg.CheckPeriod
	if check <= 0 {
		check = bully.DefaultCheckPeriod
	}
	d := fd + stage + 2*u
	if fd <= 0 {
		d = u + check + 4*stage + 2*u
	}
	return time.Duration(float64(d) / (1 - rho))
}

// CrashMessages bounds the messages sent from a coordinator's crash until
// the new coordinator's Ready, for n processes, when nothing else fails.
// Every survivor i may run one election: phase 1 sends n−i AreYouThere
// (n−1−i with a failure detector, which spares the dead n), answered by
// the n−1−i live stronger nodes; the winner n−1 then sends Halt,
// NewCoordinator and Ready to, and gets HaltAck from, the n−2 others.
// Without a failure detector each survivor also probes the coordinator
// once and may answer one AreYouNormal still in flight at the crash:
//
//	no detector:  Σ(n−i) + Σ(n−1−i) + 4(n−2) + 2(n−1) = n² + 4n − 9
//	detector:     2·Σ(n−1−i) + 4(n−2) = (n−2)(n+3), reached exactly when all
//	              survivors learn of the crash at once (the simulator's
//	              failure detector).
//
// Both are the slides' O(N²) ("Bully Algorithm: Concurrent Executions";
// Stoller §7: N² + O(N) in the worst case).
func CrashMessages(n int, detector bool) int {
	if n < 2 {
		return 0
	}
	if detector {
		return (n - 2) * (n + 3)
	}
	return n*n + 4*n - 9
}

// runBullyCrash is one run: n processes elect, the coordinator n crashes,
// and the run measures until all survivors are Normal under n−1.
type crashRun struct {
	elapsed  time.Duration
	elected  bool
	messages int
	bound    time.Duration
	a1, a2   error
}

func runBullyCrash(n int, seed uint64, fd time.Duration) crashRun {
	const rho = 1e-3
	w := newWorld(sim.ProtocolConfig{N: n, Seed: seed, Rho: rho, FailureDetector: fd},
		func(c bully.Config) stater { return bully.NewBully(c) }, CheckAssertion1)
	w.untilHolds(time.Second, func(s map[edict.ProcessID]bully.State) error { return CheckAssertion2(s, edict.ProcessID(n)) })
	// Crash at a seed-dependent phase of the Check period.
	w.sim.RunFor(time.Duration(seed%20) * time.Millisecond)
	w.sim.ResetCounts()
	w.sim.Crash(edict.ProcessID(n))
	r := crashRun{bound: CrashBound(bully.Config{ID: 1, Members: w.sim.Members()}, fd, rho)}
	r.elapsed, r.elected = w.untilHolds(10*r.bound, func(s map[edict.ProcessID]bully.State) error {
		return CheckAssertion2(s, edict.ProcessID(n-1))
	})
	r.messages, _ = w.sim.Messages()
	w.sim.RunFor(time.Second)
	r.a1, r.a2 = w.bad, CheckAssertion2(w.states(), edict.ProcessID(n-1))
	return r
}

// stollerScenario plays Stoller's Appendix A with n processes (n ≥ 3):
// all in one group under n; n crashes; once 1 is in a singleton group,
// n recovers with the link n–1 cut for good (if cut; without it, the
// control, all connectivity is transitive). It returns Assertion 4 and
// Assertion 4′ on the final state, after a long stable interval in which
// the groups must not change (Stoller: "this configuration is stable").
func stollerScenario(n int, seed uint64, cut bool) (a4, a4p error) {
	w := newWorld(sim.ProtocolConfig{N: n, Seed: seed, Rho: 1e-3},
		func(c bully.Config) stater { return bully.NewInvitation(c) }, CheckAssertion3)
	top := edict.ProcessID(n)
	w.untilHolds(2*time.Second, func(s map[edict.ProcessID]bully.State) error { return CheckAssertion2(s, top) })
	w.sim.Crash(top)
	w.untilHolds(2*time.Second, func(s map[edict.ProcessID]bully.State) error {
		if s[1].S == bully.Normal && s[1].C == 1 {
			return nil
		}
		return errSingleton
	})
	if cut {
		w.cutLink(1, top)
	}
	w.sim.Recover(top)
	w.sim.RunFor(2 * time.Second)
	before := w.states()
	w.sim.RunFor(2 * time.Second)
	after := w.states()
	g := w.graph()
	for _, id := range g.Nodes {
		if before[id] != after[id] {
			return errUnstable, nil
		}
	}
	if w.bad != nil {
		return nil, w.bad
	}
	return CheckAssertion4(after, g), CheckAssertion4Prime(after, g)
}

var (
	errSingleton = errors.New("1 is not yet a singleton group")
	errUnstable  = errors.New("the groups did not settle")
)
