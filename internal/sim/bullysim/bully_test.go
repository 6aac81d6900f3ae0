package bullysim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect/bully"
	"github.com/edictlog/edictlog/internal/sim"
)

func newBullyWorld(n int, seed uint64, fd time.Duration) *world {
	return newWorld(sim.ProtocolConfig{N: n, Seed: seed, Rho: 1e-3, FailureDetector: fd},
		func(c bully.Config) stater { return bully.NewBully(c) }, CheckAssertion1)
}

func TestBullyElectsHighest(t *testing.T) {
	for _, n := range []int{1, 2, 3, 5, 9} {
		w := newBullyWorld(n, 1, 0)
		_, ok := w.untilHolds(time.Second, func(s map[edict.ProcessID]bully.State) error {
			return CheckAssertion2(s, edict.ProcessID(n))
		})
		require.True(t, ok, "n=%d %v %v", n, w.sim, w.states())
		require.NoError(t, w.bad)
		// Stable: it stays elected through many Checks.
		w.sim.RunFor(time.Second)
		assert.NoError(t, CheckAssertion2(w.states(), edict.ProcessID(n)))
		assert.NoError(t, w.bad)
	}
}

// After the coordinator crashes, the strongest survivor becomes
// coordinator of every survivor within CrashBound, with Assertion 1
// holding at every step, and within CrashMessages messages.
func TestBullyLeaderCrash(t *testing.T) {
	for _, fd := range []time.Duration{0, 3 * time.Millisecond} {
		for _, n := range []int{2, 3, 5, 7, 9} {
			for seed := uint64(1); seed <= 5; seed++ {
				r := runBullyCrash(n, seed, fd)
				require.True(t, r.elected, "n=%d seed=%d fd=%v", n, seed, fd)
				assert.LessOrEqual(t, r.elapsed, r.bound, "n=%d seed=%d fd=%v", n, seed, fd)
				assert.NoError(t, r.a1)
				assert.NoError(t, r.a2)
				bound := CrashMessages(n, fd > 0)
				assert.LessOrEqual(t, r.messages, bound, "n=%d seed=%d fd=%v", n, seed, fd)
				if fd > 0 {
					// The simulator's detector tells every survivor at once: the
					// worst case, reached exactly.
					assert.Equal(t, bound, r.messages, "n=%d seed=%d", n, seed)
				}
				t.Logf("n=%d seed=%d fd=%v: %v (bound %v), %d messages (bound %d)", n, seed, fd, r.elapsed, r.bound, r.messages, bound)
			}
		}
	}
}

// Random crashes and recoveries: Assertion 1 holds at every step of every
// process, and once failures stop, Assertion 2 (with the strongest
// running process as coordinator) holds.
func TestBullyChurn(t *testing.T) {
	for _, n := range []int{3, 7} {
		for _, fd := range []time.Duration{0, 2 * time.Millisecond} {
			for seed := uint64(1); seed <= 20; seed++ {
				r := runBullyChurn(n, seed, fd)
				require.NoError(t, r.a1, "n=%d seed=%d fd=%v", n, seed, fd)
				require.NoError(t, r.a2, "n=%d seed=%d fd=%v", n, seed, fd)
				require.Positive(t, r.running)
			}
		}
	}
}

// A recovered stronger node bullies its way in; a recovered weaker one is
// integrated by the coordinator's Check ("The Actual Bully Algorithm
// (3/3)").
func TestBullyRecovery(t *testing.T) {
	w := newBullyWorld(5, 3, 0)
	w.untilHolds(time.Second, func(s map[edict.ProcessID]bully.State) error { return CheckAssertion2(s, 5) })
	w.sim.Crash(5)
	w.sim.Crash(1)
	_, ok := w.untilHolds(time.Second, func(s map[edict.ProcessID]bully.State) error { return CheckAssertion2(s, 4) })
	require.True(t, ok)
	w.sim.Recover(1)
	_, ok = w.untilHolds(time.Second, func(s map[edict.ProcessID]bully.State) error { return CheckAssertion2(s, 4) })
	require.True(t, ok, "%v", w.states())
	w.sim.Recover(5)
	_, ok = w.untilHolds(time.Second, func(s map[edict.ProcessID]bully.State) error { return CheckAssertion2(s, 5) })
	require.True(t, ok, "%v", w.states())
	assert.NoError(t, w.bad)
}
