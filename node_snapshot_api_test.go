package edictlog_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/wire"
	"github.com/stretchr/testify/require"
)

// Snapshot returns the index it covers once the log's store is compacted
// behind it, and, with nothing applied since, takes no snapshot and says
// so with a *NothingNewError naming the newest snapshot's index.
func TestSnapshotReturnsItsIndexAndNothingNew(t *testing.T) {
	c := newNetCluster(t, 1, func(cfg *edictlog.Config) { cfg.TrailingEntries = 2 })
	n := c.node(1)
	for i := range 20 {
		c.put(fmt.Sprintf("k%02d", i), "v")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	applied := n.Status().Applied
	idx, err := n.Snapshot(ctx)
	require.NoError(t, err)
	require.GreaterOrEqual(t, idx, applied, "the snapshot covers what was applied before the call")
	metas, err := n.snaps.List()
	require.NoError(t, err)
	require.Equal(t, idx, metas[0].Index)
	// Compacted in the store, not only in memory, by the time it returned.
	first, err := n.store.FirstIndex()
	require.NoError(t, err)
	require.Equal(t, idx-2+1, first, "the store keeps TrailingEntries behind the snapshot")
	require.Equal(t, first, n.Status().FirstIndex)

	_, err = n.Snapshot(ctx)
	require.ErrorIs(t, err, edictlog.ErrNothingNew)
	var nn *edictlog.NothingNewError
	require.ErrorAs(t, err, &nn)
	require.Equal(t, idx, nn.Index)
	metas2, err := n.snaps.List()
	require.NoError(t, err)
	require.Equal(t, metas, metas2, "nothing new was taken")

	c.put("after", "v")
	idx2, err := n.Snapshot(ctx)
	require.NoError(t, err)
	require.Greater(t, idx2, idx)

}

// countingSnapshots counts the snapshots a Node creates.
type countingSnapshots struct {
	edictlog.SnapshotStore
	created atomic.Int32
}

func (c *countingSnapshots) Create(meta wire.SnapshotMeta) (wire.SnapshotSink, error) {
	c.created.Add(1)
	return c.SnapshotStore.Create(meta)
}

// An automatic snapshot of a state held in memory waits, beyond
// SnapshotEvery entries, until the entries applied since the newest
// snapshot add up to its size: a large state is not written out again
// for every few small writes. SnapshotLogRatio -1 takes one every
// SnapshotEvery entries whatever their size.
func TestAutomaticSnapshotsWaitForTheLogToMatchTheState(t *testing.T) {
	big := strings.Repeat("x", 64<<10)
	for _, tc := range []struct {
		ratio    float64
		min, max int32 // automatic snapshots after the big value and 256 small writes
	}{
		{ratio: 0, min: 1, max: 2},    // the default, 1: about 16 KiB of small entries is not 64 KiB
		{ratio: -1, min: 12, max: 17}, // 257 entries, one every 16 (one may still be in flight)
	} {
		t.Run(fmt.Sprint(tc.ratio), func(t *testing.T) {
			var cs *countingSnapshots
			c := newNetCluster(t, 1, func(cfg *edictlog.Config) {
				cfg.SnapshotEvery, cfg.SnapshotLogRatio = 16, tc.ratio
				if cs == nil {
					cs = &countingSnapshots{SnapshotStore: cfg.Snapshots}
				}
				cfg.Snapshots = cs
			})
			c.waitLeader(10 * time.Second)
			c.put("big", big)
			for i := range 256 {
				c.put(fmt.Sprintf("k%03d", i), "small value")
			}
			c.barrier()
			require.Eventually(t, func() bool { return cs.created.Load() >= tc.min }, 10*time.Second, 10*time.Millisecond)
			got := cs.created.Load()
			require.LessOrEqual(t, got, tc.max, "automatic snapshots")
			t.Logf("ratio %v: %d automatic snapshots", tc.ratio, got)
		})
	}
}
