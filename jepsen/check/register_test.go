package check

import (
	"encoding/json"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edictlog/edictlog/jepsen/history"
)

func checkRegister(t *testing.T, ops []history.Op, opts RegisterOptions) RegisterResult {
	t.Helper()
	res, err := Register(ops, opts)
	require.NoError(t, err)
	return res
}

func TestRegisterValidConcurrentHistory(t *testing.T) {
	var b builder
	// x: a read concurrent with the first write may see it missing; reads
	// concurrent with the second write may see either value.
	b.read(2, "x", "lease", nil, 0, 3)
	b.write(0, "x", 1, 1, 10, history.OK)
	b.read(1, "x", "lease", v(1), 5, 15)
	b.write(0, "x", 2, 12, 20, history.OK)
	b.read(1, "x", "lease", v(1), 16, 18)
	b.read(2, "x", "lease", v(2), 17, 25)
	b.cas(0, "x", 2, 3, 21, 30, history.OK)
	b.read(1, "x", "lease", v(3), 31, 35)
	// y: independent of x.
	b.write(3, "y", 7, 2, 4, history.OK)
	b.read(3, "y", "follower", v(7), 5, 6)

	res := checkRegister(t, b.history(), RegisterOptions{})
	assert.Equal(t, Valid, res.Valid)
	assert.True(t, res.Valid.OK())
	assert.Empty(t, res.Failures)
	assert.Empty(t, res.Anomaly)
	assert.Equal(t, 2, res.Keys)
	assert.Equal(t, 10, res.Checked)
	assert.Equal(t, 6, res.Counts[history.FRead]["ok"])
	assert.Equal(t, 3, res.Counts[history.FWrite]["ok"])
	assert.Equal(t, 1, res.Counts[history.FCAS]["ok"])
}

func TestRegisterStaleReadIsAViolation(t *testing.T) {
	var b builder
	b.write(0, "x", 1, 0, 10, history.OK)
	b.write(0, "x", 2, 20, 30, history.OK)
	b.read(1, "x", "stale", v(1), 40, 50) // 2 was acknowledged before this began
	b.write(2, "y", 5, 0, 10, history.OK)
	b.read(2, "y", "lease", v(5), 20, 30)

	res := checkRegister(t, b.history(), RegisterOptions{})
	assert.Equal(t, Invalid, res.Valid)
	assert.False(t, res.Valid.OK())
	require.Len(t, res.Failures, 1, "only x is broken")
	f := res.Failures[0]
	assert.Equal(t, "x", f.Key)
	assert.Equal(t, Invalid, f.Valid)
	assert.Equal(t, 3, f.Operations)
	assert.Equal(t, 2, f.Linearized)
	assert.Contains(t, res.Anomaly, `key "x"`)
	assert.Contains(t, res.Anomaly, "read(x) -> 1")
	require.Len(t, f.Stuck, 1)
	assert.Contains(t, f.Stuck[0], "read(x) -> 1")
	assert.Contains(t, f.Stuck[0], "level stale")
	t.Log(res.Anomaly)
}

func TestRegisterLostWriteIsAViolation(t *testing.T) {
	var b builder
	b.write(0, "x", 1, 0, 10, history.OK)
	b.read(1, "x", "lease", nil, 20, 30) // the acknowledged write is gone

	res := checkRegister(t, b.history(), RegisterOptions{})
	assert.Equal(t, Invalid, res.Valid)
	require.Len(t, res.Failures, 1)
	assert.Contains(t, res.Failures[0].Anomaly, "read(x) -> missing")
}

func TestRegisterUnknownWriteMayHaveHappened(t *testing.T) {
	var b builder
	b.write(0, "x", 1, 0, 10, history.Info) // timed out, yet applied
	b.read(1, "x", "lease", v(1), 50, 60)
	b.write(2, "y", 1, 0, 10, history.Info) // timed out, and never applied
	b.read(3, "y", "lease", nil, 50, 60)
	b.write(4, "z", 1, 0, 0, "") // the test ended before it completed
	b.read(5, "z", "lease", v(1), 50, 60)

	res := checkRegister(t, b.history(), RegisterOptions{})
	assert.Equal(t, Valid, res.Valid, res.Anomaly)
	assert.Equal(t, 3, res.Counts[history.FWrite]["info"], "a missing completion counts as info")
}

func TestRegisterUnknownCASEitherWay(t *testing.T) {
	var b builder
	b.write(0, "x", 1, 0, 10, history.OK)
	b.cas(1, "x", 1, 2, 20, 30, history.Info) // its effect is seen
	b.read(2, "x", "lease", v(2), 40, 50)
	b.write(3, "y", 1, 0, 10, history.OK)
	b.cas(4, "y", 1, 2, 20, 30, history.Info) // its effect is not seen
	b.read(5, "y", "lease", v(1), 40, 50)

	res := checkRegister(t, b.history(), RegisterOptions{})
	assert.Equal(t, Valid, res.Valid, res.Anomaly)
}

func TestRegisterAcknowledgedCASMustBeSeen(t *testing.T) {
	var b builder
	b.write(0, "x", 1, 0, 10, history.OK)
	b.cas(1, "x", 1, 2, 20, 30, history.OK)
	b.read(2, "x", "lease", v(1), 40, 50)

	res := checkRegister(t, b.history(), RegisterOptions{})
	assert.Equal(t, Invalid, res.Valid)
}

func TestRegisterFailedWriteMustNotBeSeen(t *testing.T) {
	var b builder
	b.write(0, "x", 1, 0, 10, history.Fail)
	b.read(1, "x", "lease", v(1), 20, 30)

	res := checkRegister(t, b.history(), RegisterOptions{})
	assert.Equal(t, Invalid, res.Valid)
	assert.Equal(t, 1, res.Checked, "the failed write is left out")
}

func TestRegisterLevelsFilterReads(t *testing.T) {
	var b builder
	b.write(0, "x", 1, 0, 10, history.OK)
	b.write(0, "x", 2, 20, 30, history.OK)
	b.read(1, "x", "stale", v(1), 40, 50)
	b.read(2, "x", "lease", v(2), 40, 50)
	ops := b.history()

	all := checkRegister(t, ops, RegisterOptions{})
	assert.Equal(t, Invalid, all.Valid, "negative control: the stale read is a violation")

	lease := checkRegister(t, ops, RegisterOptions{Levels: []string{"lease"}})
	assert.Equal(t, Valid, lease.Valid, lease.Anomaly)
	assert.Equal(t, map[string]int{"stale": 1}, lease.SkippedReads)
	assert.Equal(t, 3, lease.Checked)
}

// randomRegister simulates clients on a correct register: each operation
// takes effect at a random point of its interval.
func randomRegister(seed int64, keys []string, processes, perProcess int) []history.Op {
	rng := rand.New(rand.NewSource(seed))
	type event struct {
		at     int64
		p      int
		op     history.Op
		start  int64
		end    int64
		result history.Type
	}
	var events []event
	next := int64(1)
	for p := 0; p < processes; p++ {
		t := int64(rng.Intn(10))
		for i := 0; i < perProcess; i++ {
			start := t + int64(rng.Intn(5))
			end := start + 1 + int64(rng.Intn(20))
			key := keys[rng.Intn(len(keys))]
			op := history.Op{Process: p, Key: key}
			switch rng.Intn(3) {
			case 0:
				op.F = history.FRead
				op.Level = "lease"
			case 1:
				op.F, op.Value = history.FWrite, v(next)
				next++
			default:
				op.F, op.Prev, op.Value = history.FCAS, v(next-1-int64(rng.Intn(2))), v(next)
				next++
			}
			events = append(events, event{at: start + int64(rng.Int63n(end-start+1)), p: p, op: op, start: start, end: end})
			t = end + 1
		}
	}
	// Apply in order of the points at which they take effect.
	state := map[string]*int64{}
	order := make([]int, len(events))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(i, j int) bool { return events[order[i]].at < events[order[j]].at })
	var b builder
	for _, i := range order {
		e := &events[i]
		done := e.op
		e.result = history.OK
		switch e.op.F {
		case history.FRead:
			done.Value = state[e.op.Key]
		case history.FWrite:
			state[e.op.Key] = e.op.Value
		case history.FCAS:
			if cur := state[e.op.Key]; cur != nil && *cur == *e.op.Prev {
				state[e.op.Key] = e.op.Value
			} else {
				e.result = history.Fail
			}
		}
		// Times are scaled so that no two events coincide.
		b.add(e.start*1000+int64(e.p), e.end*1000+int64(e.p)+500, e.result, e.op, done)
	}
	return b.history()
}

func TestRegisterRandomValidHistory(t *testing.T) {
	ops := randomRegister(1, []string{"a", "b", "c"}, 4, 40)
	res := checkRegister(t, ops, RegisterOptions{Timeout: time.Minute})
	assert.Equal(t, Valid, res.Valid, res.Anomaly)
	assert.Equal(t, 3, res.Keys)
	assert.Greater(t, res.Counts[history.FCAS]["ok"], 0)

	// Negative control: one read returns a value never written.
	for i := range ops {
		if ops[i].F == history.FRead && ops[i].Type == history.OK && i > len(ops)/2 {
			ops[i].Value = v(1 << 40)
			break
		}
	}
	res = checkRegister(t, ops, RegisterOptions{Timeout: time.Minute})
	assert.Equal(t, Invalid, res.Valid)
	require.Len(t, res.Failures, 1)
	assert.Contains(t, res.Anomaly, "1099511627776")
}

func TestRegisterTimeoutIsUnknownNotValid(t *testing.T) {
	ops := randomRegister(2, []string{"k"}, 8, 150)
	res := checkRegister(t, ops, RegisterOptions{Timeout: time.Microsecond})
	t.Logf("%d events, verdict %s", len(ops), res.Valid)
	assert.Contains(t, []Validity{Unknown, Valid}, res.Valid)
	if res.Valid == Unknown {
		assert.False(t, res.Valid.OK())
		require.Len(t, res.Failures, 1)
		assert.Equal(t, Unknown, res.Failures[0].Valid)
		assert.Empty(t, res.Anomaly)
	}
	assert.False(t, Unknown.OK(), "unknown is not a pass")
}

func TestRegisterVisualizationHasNemesis(t *testing.T) {
	var b builder
	b.fault("partition", "isolate node 3", 5, 35)
	b.write(0, "x", 1, 0, 10, history.OK)
	b.write(0, "x", 2, 20, 30, history.OK)
	b.read(1, "x", "stale", v(1), 40, 50)
	path := filepath.Join(t.TempDir(), "register.html")

	res := checkRegister(t, b.history(), RegisterOptions{VisualizationPath: path})
	assert.Equal(t, Invalid, res.Valid)
	assert.Equal(t, path, res.Visualization)
	html, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.NotEmpty(t, html)
	assert.Contains(t, string(html), "isolate node 3")
	assert.Contains(t, string(html), `"Tag":"nemesis"`)
}

func TestRegisterResultJSON(t *testing.T) {
	var b builder
	b.write(0, "x", 1, 0, 10, history.OK)
	b.read(1, "x", "lease", nil, 20, 30)
	res := checkRegister(t, b.history(), RegisterOptions{})

	raw, err := json.Marshal(res)
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, json.Unmarshal(raw, &got))
	assert.Equal(t, "false", got["valid"])
	assert.Contains(t, got, "failures")
	assert.Contains(t, got, "counts")
	failures := got["failures"].([]any)
	assert.Equal(t, "x", failures[0].(map[string]any)["key"])
}

func TestRegisterNothingToCheckIsUnknown(t *testing.T) {
	res := checkRegister(t, nil, RegisterOptions{})
	assert.Equal(t, Unknown, res.Valid)
}

func TestRegisterRejectsMalformedHistory(t *testing.T) {
	_, err := Register([]history.Op{
		{Index: 0, Process: 0, Type: history.OK, F: history.FWrite, Key: "x", Value: v(1)},
	}, RegisterOptions{})
	assert.ErrorContains(t, err, "without an invocation")

	_, err = Register([]history.Op{
		{Index: 0, Process: 0, Type: history.Invoke, F: history.FWrite, Key: "x", Value: v(1)},
		{Index: 1, Process: 0, Type: history.Invoke, F: history.FRead, Key: "x"},
	}, RegisterOptions{})
	assert.ErrorContains(t, err, "in flight")
}
