package history_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edictlog/edictlog/jepsen/history"
)

func TestRecorderRoundTripsThroughRead(t *testing.T) {
	var buf bytes.Buffer
	r := history.NewRecorder(&buf)
	r.Add(history.Op{Process: 0, Type: history.Invoke, F: history.FWrite, Key: "x", Value: history.Int(1)})
	r.Add(history.Op{Process: history.NemesisProcess, Type: history.Info, F: history.FStart, Nemesis: "partition", Detail: "n1 | n2 n3"})
	r.Add(history.Op{Process: 0, Type: history.OK, F: history.FWrite, Key: "x", Value: history.Int(1), Node: 2})
	r.Add(history.Op{Process: 1, Type: history.Invoke, F: history.FRead, Key: "x", Level: "lease"})
	r.Add(history.Op{Process: 1, Type: history.Info, F: history.FRead, Key: "x", Level: "lease", Error: "timeout"})
	r.Add(history.Op{Process: 2, Type: history.OK, F: history.FFinalRead, Values: []int64{3, 1, 2}, Node: 1})
	require.NoError(t, r.Flush())

	want := r.Ops()
	require.Len(t, want, 6)
	for i, op := range want {
		assert.Equal(t, i, op.Index)
		if i > 0 {
			assert.GreaterOrEqual(t, op.Time, want[i-1].Time)
		}
	}
	got, err := history.Read(&buf)
	require.NoError(t, err)
	assert.Equal(t, want, got)
}

func TestReadRejectsGapsAndUnknownFields(t *testing.T) {
	_, err := history.Read(strings.NewReader(`{"index":1,"time":0,"process":0,"type":"invoke","f":"read"}`))
	assert.ErrorContains(t, err, "has index 1")

	_, err = history.Read(strings.NewReader(`{"index":0,"time":0,"process":0,"type":"invoke","f":"read","bogus":1}`))
	assert.Error(t, err)
}

func TestIntervalsPairsStartsAndStops(t *testing.T) {
	nemesis := func(time int64, f, name, detail string) history.Op {
		return history.Op{Time: time, Process: history.NemesisProcess, Type: history.Info, F: f, Nemesis: name, Detail: detail}
	}
	ops := []history.Op{
		nemesis(10, history.FStart, "partition", "first"),
		nemesis(20, history.FStart, "kill", "n2"),
		nemesis(30, history.FStop, "partition", ""),
		nemesis(40, history.FStart, "partition", "second"),
		nemesis(50, history.FStop, "kill", ""),
		{Time: 60, Process: 0, Type: history.Invoke, F: history.FRead, Key: "x"},
		nemesis(65, history.FStop, "pause", ""), // stops nothing
		{Time: 70, Process: 0, Type: history.OK, F: history.FRead, Key: "x"},
	}
	assert.Equal(t, []history.Interval{
		{Nemesis: "partition", Detail: "first", Start: 10, End: 30},
		{Nemesis: "kill", Detail: "n2", Start: 20, End: 50},
		{Nemesis: "partition", Detail: "second", Start: 40, End: 70}, // never stopped: ends with the history
	}, history.Intervals(ops))
	assert.Empty(t, history.Intervals(nil))
}

// The monitor's polls without a leader open a gap; a leader seen, or an
// operation only a leader completes, closes it; the monitor's and the
// nemesis's events are no client's.
func TestLeaderless(t *testing.T) {
	mon := func(t int64, node int) history.Op {
		return history.Op{Time: t, Process: history.MonitorProcess, Type: history.Info, F: history.FLeader, Node: node, Error: "why"}
	}
	ops := []history.Op{
		mon(0, 1),
		mon(10, 0), mon(20, 0),
		{Time: 25, Process: 3, Type: history.OK, F: history.FRead, Level: "stale"},
		{Time: 30, Process: 3, Type: history.Fail, F: history.FWrite},
		{Time: 35, Process: 3, Type: history.OK, F: history.FAdd}, // a leader at 35
		mon(40, 0),
		mon(50, 2),
		mon(60, 0), mon(70, 0),
		{Time: 80, Process: history.NemesisProcess, Type: history.Info, F: history.FHeal},
	}
	for i := range ops {
		ops[i].Index = i
	}
	assert.False(t, ops[0].Client())
	assert.False(t, ops[10].Client())
	assert.True(t, ops[3].Client())
	assert.Equal(t, []history.Gap{{Start: 10, End: 35, Why: "why"}, {Start: 40, End: 50, Why: "why"}, {Start: 60, End: 80, Open: true, Why: "why"}},
		history.Leaderless(ops))
	assert.Empty(t, history.Leaderless(ops[3:6]), "nothing before the monitor's first poll")
}
