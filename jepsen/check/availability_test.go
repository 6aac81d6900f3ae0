package check

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edictlog/edictlog/jepsen/history"
)

const sec = int64(1e9)

// leader records the monitor seeing node lead at t (0: none, why says
// why).
func (b *builder) leader(t int64, node int, why string) {
	b.ops = append(b.ops, history.Op{Process: history.MonitorProcess, Type: history.Info, F: history.FLeader, Node: node, Error: why, Time: t})
}

// noLeader records the monitor's polls that find no leader, every second
// from from to to (inclusive), as the harness's monitor does at every
// poll.
func (b *builder) noLeader(from, to int64) {
	for t := from; t <= to; t += sec {
		b.leader(t, 0, "cluster: no node leads")
	}
}

func (b *builder) heal(t int64) {
	b.ops = append(b.ops, history.Op{Process: history.NemesisProcess, Type: history.Info, F: history.FHeal, Nemesis: "heal", Time: t})
}

func (b *builder) ready(t int64, node int, ok bool, why string) {
	typ := history.OK
	if !ok {
		typ = history.Fail
	}
	b.ops = append(b.ops, history.Op{Process: history.MonitorProcess, Type: typ, F: history.FReady, Node: node, Error: why, Time: t})
}

// refusedWrites adds writes every 500 ms over [from, to) that fail as
// writes with no leader do.
func (b *builder) refusedWrites(p int, from, to int64) {
	for t := from; t < to; t += sec / 2 {
		op := history.Op{Process: p, F: history.FWrite, Key: "x", Value: v(t), Error: "503 no_leader"}
		b.add(t, t+sec/4, history.Fail, op, op)
	}
}

// A run that lost its leader for good: two replacements, the second while member 2 is cut
// off; from its end at t=15 s no node leads, for the 75 s to the end of
// the history, while every write is refused. Safe, and unavailable.
func TestAvailabilityLeaderless75sAfterAFaultIsUnavailable(t *testing.T) {
	var b builder
	b.leader(0, 1, "")
	b.write(0, "x", 1, 1*sec, 1*sec+5e6, history.OK)
	b.fault("membership", "replaced member 4 with 6 while 5 was cut off", 5*sec, 11*sec)
	b.fault("membership", "replaced member 3 with 7 while 2 was cut off", 12*sec, 15*sec)
	b.noLeader(15*sec, 90*sec)
	b.refusedWrites(1, 15*sec, 90*sec)

	res := Availability(b.history(), AvailabilityOptions{})
	assert.Equal(t, Invalid, res.Valid)
	require.Len(t, res.Leaderless, 1)
	l := res.Leaderless[0]
	assert.InDelta(t, 15, l.Start, 1e-9)
	assert.InDelta(t, 90, l.End, 1e-9)
	assert.InDelta(t, 75, l.Seconds, 1e-9)
	assert.InDelta(t, 75, l.AfterFault, 1e-9, "counted from the fault's end")
	assert.True(t, l.Open)
	assert.True(t, l.OverBound)
	assert.Contains(t, l.After, "replaced member 3 with 7")
	require.NotNil(t, res.LongestAfterFault)
	assert.InDelta(t, 75, res.LongestAfterFault.AfterFault, 1e-9)
	require.Len(t, res.Violations, 1)
	assert.Contains(t, res.Violations[0], "no leader for 75.0s from t=15.0s to t=90.0s")
	assert.Contains(t, res.Violations[0], "bound 5s")
	assert.Contains(t, res.Summary(), "longest leaderless after a fault ended: 75.0s")
	t.Log(res.Violations[0])
	// The safety checker has nothing against the same history.
	reg := checkRegister(t, b.history(), RegisterOptions{})
	assert.Equal(t, Valid, reg.Valid)
}

// A leader one second after a fault ends is within the bound.
func TestAvailabilityOneSecondGapPasses(t *testing.T) {
	var b builder
	b.leader(0, 1, "")
	b.fault("partition", "isolate leader 1", 10*sec, 16*sec)
	b.noLeader(16*sec+2e8, 17*sec)
	b.leader(17*sec+2e8, 3, "")
	b.refusedWrites(1, 16*sec, 17*sec)
	b.heal(30 * sec)
	for id := 1; id <= 5; id++ {
		b.ready(30*sec+int64(id)*1e8, id, true, "")
	}

	res := Availability(b.history(), AvailabilityOptions{})
	assert.Equal(t, Valid, res.Valid, "%v", res.Violations)
	assert.Empty(t, res.Violations)
	require.Len(t, res.Leaderless, 1)
	assert.InDelta(t, 1.0, res.Leaderless[0].Seconds, 1e-9)
	assert.InDelta(t, 1.0, res.Leaderless[0].AfterFault, 1e-9)
	assert.False(t, res.Leaderless[0].Open)
	require.NotNil(t, res.LongestAfterFault)
	assert.Equal(t, "partition (isolate leader 1)", res.LongestAfterFault.After)
	require.Len(t, res.Ready, 5)
	assert.InDelta(t, 0.5, *res.Ready[4].After, 1e-9)
	assert.Contains(t, res.Summary(), "5 of 5 members ready after the final heal, the last after 0.5s")
}

// Time without a leader while a fault is in force is excused: every node
// killed for 10 s, a leader 1.5 s after the restarts.
func TestAvailabilityLeaderlessDuringAFaultIsExcused(t *testing.T) {
	var b builder
	b.leader(0, 2, "")
	b.fault("kill", "kill [1 2 3 4 5]", 10*sec, 20*sec)
	b.noLeader(10*sec, 21*sec)
	b.leader(21*sec+5e8, 4, "")

	res := Availability(b.history(), AvailabilityOptions{})
	assert.Equal(t, Valid, res.Valid, "%v", res.Violations)
	require.Len(t, res.Leaderless, 1)
	assert.InDelta(t, 11.5, res.Leaderless[0].Seconds, 1e-9)
	assert.InDelta(t, 1.5, res.Leaderless[0].AfterFault, 1e-9)
	// The same outage with a bound of 1 s is not.
	res = Availability(b.history(), AvailabilityOptions{LeaderBound: 1e9})
	assert.Equal(t, Invalid, res.Valid)
}

// A leader lost between faults, with nothing in force, counts from when
// it was lost.
func TestAvailabilityLeaderLostBetweenFaults(t *testing.T) {
	var b builder
	b.leader(0, 1, "")
	b.fault("transfer", "transfer 1 → 2", 10*sec, 10*sec)
	b.leader(10*sec+1e8, 2, "")
	b.noLeader(12*sec, 19*sec)
	b.leader(19*sec+5e8, 2, "")
	b.fault("pause", "pause leader 2", 25*sec, 31*sec)

	res := Availability(b.history(), AvailabilityOptions{})
	assert.Equal(t, Invalid, res.Valid)
	require.Len(t, res.Leaderless, 1)
	assert.InDelta(t, 7.5, res.Leaderless[0].AfterFault, 1e-9)
	assert.Equal(t, "transfer (transfer 1 → 2)", res.Leaderless[0].After)
	require.Len(t, res.Violations, 1)
	assert.Contains(t, res.Violations[0], "7.5s of it after the end of transfer (transfer 1 → 2) at t=10.0s")
}

// A client operation only a leader can complete proves one: it splits the
// monitor's leaderless span (the monitor's own poll may have failed); a
// stale read does not.
func TestAvailabilityClientEvidenceSplitsGaps(t *testing.T) {
	var b builder
	b.leader(0, 1, "")
	b.fault("delay", "every member", 20*sec, 26*sec)
	b.noLeader(30*sec, 40*sec)
	b.write(0, "x", 1, 32*sec+9e8, 33*sec+5e8, history.OK) // a leader at 33.5
	b.read(1, "x", "stale", v(1), 34*sec+5e8, 34*sec+6e8)  // proves nothing
	b.read(1, "x", "lease", v(1), 36*sec+5e8, 36*sec+6e8)  // a leader at 36.6
	b.cas(2, "x", 1, 2, 38*sec, 38*sec+1e8, history.Fail)  // proves nothing
	b.leader(40*sec+5e8, 1, "")

	res := Availability(b.history(), AvailabilityOptions{})
	assert.Equal(t, Valid, res.Valid, "%v", res.Violations)
	require.Len(t, res.Leaderless, 3)
	for i, want := range [][2]float64{{30, 33.5}, {34, 36.6}, {37, 40.5}} {
		assert.InDelta(t, want[0], res.Leaderless[i].Start, 1e-9, "gap %d", i)
		assert.InDelta(t, want[1], res.Leaderless[i].End, 1e-9, "gap %d", i)
	}
	// Without the evidence the monitor's 10.5 s stand.
	var nb builder
	nb.leader(0, 1, "")
	nb.fault("delay", "every member", 20*sec, 26*sec)
	nb.noLeader(30*sec, 40*sec)
	nb.leader(40*sec+5e8, 1, "")
	assert.Equal(t, Invalid, Availability(nb.history(), AvailabilityOptions{}).Valid)
}

// After the final heal every member must be ready within the bound.
func TestAvailabilityReadyAfterTheFinalHeal(t *testing.T) {
	var b builder
	b.leader(0, 1, "")
	b.fault("kill", "kill [3]", 10*sec, 16*sec)
	b.heal(60 * sec)
	b.ready(60*sec+3e8, 1, true, "")
	b.ready(60*sec+4e8, 2, true, "")
	b.ready(61*sec, 3, false, "no leader known") // not yet
	b.ready(72*sec, 3, true, "")                 // 12 s after the heal
	b.ready(80*sec, 4, false, "applied index 10 behind commit index 90")

	res := Availability(b.history(), AvailabilityOptions{})
	assert.Equal(t, Invalid, res.Valid)
	require.Len(t, res.Ready, 4)
	assert.InDelta(t, 12, *res.Ready[2].After, 1e-9)
	assert.Nil(t, res.Ready[3].After)
	assert.Equal(t, "applied index 10 behind commit index 90", res.Ready[3].Error)
	require.Len(t, res.Violations, 2)
	assert.Contains(t, res.Violations[0], "node 3 ready 12.0s after the final heal at t=60.0s; bound 10s")
	assert.Contains(t, res.Violations[1], "node 4 never ready after the final heal")
	// With a bound of 15 s only node 4 is late.
	res = Availability(b.history(), AvailabilityOptions{ReadyBound: 15e9})
	assert.Len(t, res.Violations, 1)
}

// A gap the history ends in, shorter than the bound, is open but no
// violation; without a monitor there is nothing to judge.
func TestAvailabilityOpenGapAndNoMonitor(t *testing.T) {
	var b builder
	b.leader(0, 1, "")
	b.fault("partition", "isolate 2", 10*sec, 16*sec)
	b.noLeader(18*sec, 20*sec)
	res := Availability(b.history(), AvailabilityOptions{})
	assert.Equal(t, Valid, res.Valid)
	require.Len(t, res.Leaderless, 1)
	assert.True(t, res.Leaderless[0].Open)
	assert.Contains(t, res.Leaderless[0].String(), "still none when the history ended")

	var nb builder
	nb.write(0, "x", 1, 0, 10, history.OK)
	res = Availability(nb.history(), AvailabilityOptions{})
	assert.Equal(t, Unknown, res.Valid)
	assert.Contains(t, res.Summary(), "longest leaderless after a fault ended: none")
	b2, err := json.Marshal(res)
	require.NoError(t, err)
	assert.Contains(t, string(b2), `"leaderless":[]`)
}

// A fault acts from when the nemesis began to inject it (Began), not when
// the injection was done: killing every node takes a while, and the
// leader is gone before the last one dies.
func TestAvailabilityLeaderLostWhileAFaultIsInjected(t *testing.T) {
	var b builder
	b.leader(0, 1, "")
	b.fault("kill", "kill [2]", 5*sec, 9*sec)
	b.ops = append(b.ops,
		history.Op{Process: history.NemesisProcess, Type: history.Info, F: history.FStart, Nemesis: "kill", Detail: "kill [1 2 3 4 5]", Time: 12 * sec, Began: 11 * sec},
		history.Op{Process: history.NemesisProcess, Type: history.Info, F: history.FStop, Nemesis: "kill", Time: 18 * sec})
	b.noLeader(11*sec+2e8, 19*sec)
	b.leader(19*sec+5e8, 3, "")

	res := Availability(b.history(), AvailabilityOptions{})
	assert.Equal(t, Valid, res.Valid, "%v", res.Violations)
	require.Len(t, res.Leaderless, 1)
	assert.Equal(t, "kill (kill [1 2 3 4 5])", res.Leaderless[0].After)
	assert.InDelta(t, 1.5, res.Leaderless[0].AfterFault, 1e-9)
}
