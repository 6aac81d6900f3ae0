package jepsen

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edictlog/edictlog/jepsen/check"
	"github.com/edictlog/edictlog/jepsen/history"
)

// Watchers on every member, through etcd's gRPC Watch and the HTTP watch
// stream, while writers write through every member under a kill, a
// pause and a partition: each is sent exactly the committed history of
// its keys across its reconnects, every member replays the same history,
// and it holds every acknowledged write. Then the checker's negative
// control on this run's own history: without the first event one watcher
// was sent after a reconnect, the history is invalid, a gap there.
func TestJepsenWatch(t *testing.T) {
	out := t.TempDir()
	o := Options{Workload: "watch", Nemeses: []string{"kill", "pause", "partition"}, Binary: edictkv(t), Mode: mode(t), Out: out,
		Time: 20 * time.Second, Quiet: 2 * time.Second, Hold: 4 * time.Second, Seed: 1}
	if testing.Verbose() {
		o.Progress = os.Stderr
	}
	res, err := Run(context.Background(), o)
	require.NoError(t, err)
	require.NotNil(t, res.Watch)
	w := res.Watch
	t.Logf("%s mode: %d ok, %d fail, %d info; %s", o.Mode, res.Stats.Total.OK, res.Stats.Total.Fail, res.Stats.Total.Info, w.Summary())
	require.Equal(t, check.Valid, res.Valid, "%s\n%s", w.Error, w.Anomaly)
	assert.Equal(t, check.Valid, res.Availability.Valid, "unavailable: %v", res.Availability.Violations)
	assert.Equal(t, VerdictValid, res.Verdict)
	assert.Positive(t, w.TruthEvents)
	assert.Positive(t, w.Reconnects, "the faults broke some streams")
	assert.Len(t, w.Replays, res.Nodes, "every member replayed the history")
	for _, r := range w.Replays {
		assert.True(t, r.Agrees, "member %d's replay", r.Member)
	}
	apis := map[string]int{}
	for _, ws := range w.Watchers {
		apis[ws.API]++
		assert.GreaterOrEqual(t, ws.Covered, ws.Target, "watcher %d caught up", ws.Watcher)
	}
	assert.Equal(t, map[string]int{"grpc": res.Nodes, "http": res.Nodes}, apis)

	f, err := os.Open(filepath.Join(out, "history.jsonl"))
	require.NoError(t, err)
	defer f.Close()
	ops, err := history.Read(f)
	require.NoError(t, err)
	skipped, ok := dropAfterReconnect(ops)
	require.True(t, ok, "some watcher was sent an event after a reconnect")
	bad := check.Watch(slices.Delete(slices.Clone(ops), skipped, skipped+1))
	require.Equal(t, check.Invalid, bad.Valid)
	require.NotEmpty(t, bad.Anomalies)
	a := bad.Anomalies[0]
	assert.Equal(t, check.WatchGap, a.Kind, "%s", bad.Anomaly)
	assert.Equal(t, ops[skipped].Watch.Watcher, a.Watcher)
	assert.Equal(t, ops[skipped].Revision, a.Revision)
	assert.Contains(t, a.Detail, "after it watched again through member")
}

// dropAfterReconnect finds the first event a watcher was sent after it
// watched again, one that is not its last event (so that a later one
// shows the gap), and returns its index in ops.
func dropAfterReconnect(ops []history.Op) (int, bool) {
	opened := map[int]int{} // watcher → its streams so far
	candidate := map[int]int{}
	for i, op := range ops {
		if op.Process != history.WatchProcess || op.Watch == nil || op.Watch.Replay {
			continue
		}
		id := op.Watch.Watcher
		switch op.F {
		case history.FWatchOpen:
			opened[id]++
		case history.FWatchEvent:
			if c, ok := candidate[id]; ok {
				return c, true
			}
			if opened[id] > 1 {
				candidate[id] = i
			}
		}
	}
	return 0, false
}
