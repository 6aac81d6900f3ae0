package stollersim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect"
	"github.com/edictlog/edictlog/elect/stoller"
)

type edictID = edict.ProcessID

func norm(ldr edictID, grp stoller.Elid) View {
	return View{Up: true, State: stoller.State{Status: stoller.Norm, Ldr: ldr, Grp: grp}}
}

// Negative controls for the pure checkers: broken snapshots are reported.
func TestCheckersReportBrokenSnapshots(t *testing.T) {
	g1, g2 := stoller.Elid{Node: 1}, stoller.Elid{Node: 2}
	ok := Snapshot{1: norm(1, g1), 2: norm(1, g1), 3: {Up: true, State: stoller.State{Status: stoller.Wait, Ldr: 3}}}
	assert.NoError(t, SLE1(ok))
	assert.NoError(t, ALE1(ok))
	assert.False(t, LdrElected(ok), "3 is waiting")

	twoLeaders := Snapshot{1: norm(1, g1), 2: norm(2, g2)}
	assert.Error(t, SLE1(twoLeaders))
	assert.NoError(t, ALE1(twoLeaders), "two groups may have two leaders")
	assert.True(t, LdrsElected(twoLeaders))

	oneGroupTwoLeaders := Snapshot{1: norm(1, g1), 2: norm(2, g1)}
	assert.Error(t, ALE1(oneGroupTwoLeaders))

	// A crashed node's view does not count, but a crashed leader does.
	deadLeader := Snapshot{1: {Up: false}, 2: norm(1, g1)}
	assert.NoError(t, SLE1(deadLeader))
	assert.False(t, LdrElected(deadLeader))
	assert.False(t, LdrsElected(deadLeader))

	wrongGroup := Snapshot{1: norm(1, g1), 2: norm(1, g2)}
	assert.True(t, LdrElected(wrongGroup))
	assert.False(t, LdrsElected(wrongGroup), "grp_ldr ≠ grp_i")
}

// deaf is an FD that never raises DownSig: incomplete, so liveness fails.
type deaf struct{}

func newDeaf(edictID, []edictID, uint64) stoller.FailureDetector { return deaf{} }

func (deaf) Start(edict.Time, edictID)                    {}
func (deaf) Stop(edict.Time, edictID)                     {}
func (deaf) Receive(edict.Time, edictID, stoller.Message) {}
func (deaf) Observe(elect.Observation)                    {}
func (deaf) Tick(edict.Time)                              {}
func (deaf) NextTick() edict.Time                         { return edict.Time{} }
func (deaf) PlayDead(edict.Time, []edictID)               {}
func (deaf) PlayAlive(edict.Time, []edictID)              {}
func (deaf) Drain() ([]edictID, []stoller.Envelope)       { return nil, nil }

// Negative controls for liveness: with an FD that never reports, a
// leader crash is never repaired, and LeaderCrash says so.
func TestLivenessCheckerReportsDeafFD(t *testing.T) {
	for _, async := range []bool{false, true} {
		r := LeaderCrash(Setup{N: 5, Seed: 3, Async: async, FD: newDeaf, FDName: "deaf"})
		assert.False(t, r.Elected, "async=%v: %+v", async, r)
		assert.Equal(t, edictID(1), r.Leader, "elected 1 first, then never replaced it")
		assert.NoError(t, r.Safety)
	}
}

// Negative control for SLE1 on a real Instance: the Asynchronous Bully
// omits stage 1 (§7 item 4), so a recovered node 3 halts 4 and 5, which
// reject it, and declares itself leader while 1 is still leader — fine
// for ALE1 (another group), a violation of SLE1.
func TestSLE1CheckerReportsAsyncAfterRecovery(t *testing.T) {
	s := Setup{N: 5, Seed: 1, Async: true}.withDefaults()
	h := NewHarnessFor(s, SLE1, LdrElected)
	h.Sim.RunFor(time.Second)
	require.NoError(t, h.Violation)
	h.Crash(3)
	h.Sim.RunFor(time.Second)
	h.Recover(3)
	h.Sim.RunFor(time.Second)
	assert.Error(t, h.Violation)

	// The same history under ALE1 is fine.
	h = NewHarnessFor(s, ALE1, LdrsElected)
	h.Sim.RunFor(time.Second)
	h.Crash(3)
	h.Sim.RunFor(time.Second)
	h.Recover(3)
	h.Sim.RunFor(time.Second)
	assert.NoError(t, h.Violation)
	_, ok := h.Elected()
	assert.True(t, ok)
}

// oneGroup is a broken Instance: it reports every node in one group, so
// the two groups of a partition break ALE1.
type oneGroup struct{ *stoller.Async }

func (o oneGroup) State() stoller.State { s := o.Async.State(); s.Grp = stoller.Elid{}; return s }

func TestALE1CheckerReportsMergedGroups(t *testing.T) {
	s := Setup{N: 5, Seed: 2, Async: true}.withDefaults()
	build := func(c stoller.Config) Instance { c.FD, c.Hold = s.FD, s.Delta; return oneGroup{stoller.NewAsync(c)} }
	h := NewHarness(s.simConfig(), build, ALE1, LdrsElected)
	h.Sim.RunFor(time.Second)
	require.NoError(t, h.Violation)
	h.Partition([]edictID{1, 2}, []edictID{3, 4, 5})
	h.Sim.RunFor(time.Second)
	assert.Error(t, h.Violation)
}
