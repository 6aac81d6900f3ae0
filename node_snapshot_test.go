package edictlog_test

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/fsm/kvfsm"
	"github.com/edictlog/edictlog/storage"
	"github.com/stretchr/testify/require"
)

// A follower that was down while the leader wrote a few hundred entries
// and compacted its log behind a snapshot cannot catch up from the log:
// it restarts from its files on a new port, receives the leader's
// snapshot as a stream, installs it, and then follows the log. In the end
// its state machine holds exactly what the leader's does.
func TestNodeSnapshotCatchUp(t *testing.T) {
	c := newNetCluster(t, 3, func(cfg *edictlog.Config) { cfg.SnapshotEvery, cfg.TrailingEntries = 64, 8 })
	for i := range 20 {
		c.put(fmt.Sprintf("early-%02d", i), "v")
	}
	l := c.waitLeader(10 * time.Second)
	lagger := c.others(l.id)[0]
	waitApplied(t, c.barrier(), lagger)
	behind := lagger.Status().LastIndex
	c.kill(lagger.id) // its transport closes first; its files stay

	// A few hundred writes from concurrent clients (so they share
	// batches), overwriting and deleting keys so the state has history.
	require.NoError(t, c.applyConcurrently(8, 40, func(w, i int) kvfsm.Command {
		if i%10 == 9 {
			return kvfsm.Command{Delete: &kvfsm.Delete{Key: fmt.Sprintf("key-%03d", (w*40+i-3)%97)}}
		}
		return kvfsm.Command{Put: &kvfsm.Put{Key: fmt.Sprintf("key-%03d", (w*40+i)%97), Value: fmt.Sprintf("w%d-%d", w, i)}}
	}))

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l = c.waitLeader(10 * time.Second)
	idx, err := l.Snapshot(ctx)
	require.NoError(t, err)
	metas, err := l.snaps.List()
	require.NoError(t, err)
	require.NotEmpty(t, metas)
	snap := metas[0]
	require.Equal(t, snap.Index, idx, "Snapshot returns the index it covers")
	require.GreaterOrEqual(t, snap.Index, behind+320, "the snapshot covers the writes")
	// The leader's log now starts past what the lagger has: only a
	// snapshot can bring it up to date.
	eventually(t, 10*time.Second, func() error {
		if first := l.Status().FirstIndex; first <= behind+1 {
			return fmt.Errorf("the leader's log starts at %d, the lagger has up to %d", first, behind)
		}
		return nil
	})

	lagger = c.restart(lagger.id)
	// Its observer hears of the install.
	events := make(chan edictlog.Event, 1)
	obs := lagger.Observe(events, func(ev edictlog.Event) bool { return ev.Kind == edictlog.SnapshotInstalled })
	defer obs.Cancel()
	// It restarts from its own log (unless, on a slow machine, the
	// snapshot came in already).
	early := false
	if s := lagger.Status(); s.LastIndex != behind {
		require.GreaterOrEqual(t, s.FirstIndex, snap.Index, "the lagger restarted from its own log ending at %d", behind)
		early = true
	}
	idx = c.barrier()
	waitApplied(t, idx, lagger)
	if early {
		t.Log("the snapshot was installed before the observer subscribed")
	} else {
		select {
		case ev := <-events:
			require.Equal(t, snap.Index, ev.Index, "SnapshotInstalled names the snapshot's index")
		case <-time.After(10 * time.Second):
			t.Fatal("no SnapshotInstalled event")
		}
	}
	installed, err := lagger.snaps.List()
	require.NoError(t, err)
	require.NotEmpty(t, installed, "the lagger stored the snapshot it installed")
	var got bool
	for _, m := range installed {
		got = got || m.Index == snap.Index && m.Stamp.Equal(snap.Stamp)
	}
	require.True(t, got, "the lagger holds the leader's snapshot at %d: %+v", snap.Index, installed)
	require.Greater(t, lagger.Status().FirstIndex, behind+1, "the lagger's log was reset to the snapshot")

	// After the snapshot, the log: new writes reach the lagger by append.
	for i := range 10 {
		c.put(fmt.Sprintf("late-%02d", i), "v")
	}
	idx = c.barrier()
	all := []*netNode{c.node(1), c.node(2), c.node(3)}
	waitApplied(t, idx, all...)
	ref := dump(t, l)
	require.NotEmpty(t, ref)
	for _, nn := range all {
		require.Equal(t, ref, dump(t, nn), "node %v's state machine differs from the leader's", nn.id)
	}
	v, found, _ := mustRead(t, lagger, edictlog.ReadStale, "late-09")
	require.True(t, found)
	require.Equal(t, "v", v)
}

// The log's segments come and go under a running cluster: with segments of
// 16 KiB, a few thousand writes fill dozens of them on every node, the
// snapshots' compactions remove those that hold only compacted entries,
// and a follower killed meanwhile, and then every node, start again from
// what is left and hold every write.
func TestNodeWALSegmentsRollAndGo(t *testing.T) {
	const segment = 16 << 10
	c := newNetClusterWAL(t, 3, storage.WALOptions{SegmentSize: segment},
		func(cfg *edictlog.Config) { cfg.SnapshotEvery, cfg.TrailingEntries = 200, 20 })
	l := c.waitLeader(10 * time.Second)
	follower := c.others(l.id)[0]
	want := map[string]string{}
	value := strings.Repeat("v", 200)
	// The follower fills a few segments of its own, then is killed: its
	// files stay as they were while the others go on.
	for i := range 150 {
		c.put(fmt.Sprintf("early-%03d", i), value)
		want[fmt.Sprintf("early-%03d", i)] = value
	}
	waitApplied(t, c.barrier(), follower)
	c.kill(follower.id)
	err := c.applyConcurrently(8, 250, func(w, i int) kvfsm.Command {
		return kvfsm.Command{Put: &kvfsm.Put{Key: fmt.Sprintf("k-%d-%03d", w, i%100), Value: fmt.Sprintf("%s%d", value, i)}}
	})
	require.NoError(t, err)
	for w := range 8 {
		for i := 150; i < 250; i++ {
			want[fmt.Sprintf("k-%d-%03d", w, i%100)] = fmt.Sprintf("%s%d", value, i)
		}
	}
	c.restart(follower.id)
	c.checkAllApplied(want, slices.Collect(maps.Values(c.nodes))...)
	for id := range c.nodes {
		st, err := c.nodes[id].store.Stats()
		require.NoError(t, err)
		segs, err := filepath.Glob(filepath.Join(c.walDir(id), "*.wal"))
		require.NoError(t, err)
		// 2,150 writes of 200-byte values fill about 40 segments of 16 KiB;
		// what is left holds the entries not yet compacted (each under
		// 400 bytes as a record), one segment more for where the first
		// starts, and none from the start of the log.
		live := int(st.LastIndex - st.FirstIndex + 1)
		require.LessOrEqual(t, len(segs), live*400/segment+2, "node %v keeps %d segments for log %d..%d", id, len(segs), st.FirstIndex, st.LastIndex)
		require.NotContains(t, segs, filepath.Join(c.walDir(id), "0000000000000001.wal"), "node %v: the first segment holds only compacted entries", id)
	}
	for _, id := range slices.Sorted(maps.Keys(c.nodes)) {
		c.kill(id)
	}
	for _, id := range []edict.ProcessID{1, 2, 3} {
		c.restart(id)
	}
	c.waitLeader(10 * time.Second)
	c.checkAllApplied(want, slices.Collect(maps.Values(c.nodes))...)
}
