package check

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edictlog/edictlog/jepsen/history"
)

// setHistory: adds 1..3 acknowledged, 4 failed, 5 and 6 unknown, then
// final reads from nodes 1 and 2 holding what the test says.
func setHistory(node1, node2 []int64) []history.Op {
	var b builder
	b.addValue(0, 1, 0, 10, history.OK)
	b.addValue(1, 2, 1, 11, history.OK)
	b.addValue(0, 3, 12, 20, history.OK)
	b.addValue(1, 4, 13, 21, history.Fail)
	b.addValue(2, 5, 14, 22, history.Info)
	b.addValue(3, 6, 15, 0, "") // the test ended first
	b.finalRead(4, 1, node1, 100, 110)
	b.finalRead(5, 2, node2, 101, 111)
	return b.history()
}

func TestSetAllGood(t *testing.T) {
	res := Set(setHistory([]int64{1, 2, 3, 5}, []int64{3, 2, 1, 5}))
	assert.Equal(t, Valid, res.Valid)
	assert.Equal(t, 6, res.Attempted)
	assert.Equal(t, 3, res.Acknowledged)
	assert.Equal(t, 1, res.Failed)
	assert.Equal(t, 2, res.Indeterminate)
	assert.Equal(t, 2, res.FinalReads)
	assert.Equal(t, []int{1, 2}, res.Nodes)
	assert.Empty(t, res.Lost)
	assert.Equal(t, []int64{5}, res.Recovered)
	assert.Equal(t, []int64{6}, res.NeverRead)
}

func TestSetLost(t *testing.T) {
	res := Set(setHistory([]int64{1, 2, 3}, []int64{1, 3}))
	assert.Equal(t, Invalid, res.Valid)
	assert.Equal(t, []int64{2}, res.Lost)
	assert.Equal(t, map[int][]int64{2: {2}}, res.LostByNode)
}

func TestSetDuplicated(t *testing.T) {
	res := Set(setHistory([]int64{1, 2, 3}, []int64{1, 2, 2, 3}))
	assert.Equal(t, Invalid, res.Valid)
	assert.Equal(t, []int64{2}, res.Duplicated)
	assert.Equal(t, map[int][]int64{2: {2}}, res.DuplicatedByNode)
	assert.Empty(t, res.Lost)
}

func TestSetUnexpected(t *testing.T) {
	res := Set(setHistory([]int64{1, 2, 3, 99}, []int64{1, 2, 3}))
	assert.Equal(t, Invalid, res.Valid)
	assert.Equal(t, []int64{99}, res.Unexpected)
}

func TestSetFailedButPresent(t *testing.T) {
	res := Set(setHistory([]int64{1, 2, 3}, []int64{1, 2, 3, 4}))
	assert.Equal(t, Invalid, res.Valid)
	assert.Equal(t, []int64{4}, res.FailedButPresent)
	assert.Empty(t, res.Unexpected)
}

func TestSetWithoutFinalReadIsUnknown(t *testing.T) {
	var b builder
	b.addValue(0, 1, 0, 10, history.OK)
	res := Set(b.history())
	assert.Equal(t, Unknown, res.Valid)
	assert.False(t, res.Valid.OK())
}

func TestSetMalformedIsUnknown(t *testing.T) {
	res := Set([]history.Op{{Process: 0, Type: history.OK, F: history.FAdd, Value: v(1)}})
	assert.Equal(t, Unknown, res.Valid)
	assert.Contains(t, res.Error, "without an invocation")
}

func TestSetResultJSON(t *testing.T) {
	raw, err := json.Marshal(Set(setHistory([]int64{1, 2, 3}, []int64{1, 3})))
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, json.Unmarshal(raw, &got))
	assert.Equal(t, "false", got["valid"])
	assert.Equal(t, []any{2.0}, got["lost"])
	assert.Equal(t, map[string]any{"2": []any{2.0}}, got["lost_by_node"])
	assert.Equal(t, []any{}, got["unexpected"], "empty lists are [] rather than null")
	assert.Contains(t, got, "failed_but_present")
}
