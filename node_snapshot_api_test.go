package edictlog_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/edictlog/edictlog"
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
