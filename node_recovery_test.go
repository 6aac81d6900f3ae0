package edictlog_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
)

// A forced recovery answers its operator only once the new epoch is on
// disk: the configuration and the old epochs' termination wait in a batch
// on a slow disk, and an answer before the batch is written would be one
// a crash takes back.
func TestForceRecoveryAnswersOnceDurable(t *testing.T) {
	c := newNetCluster(t, 3, withSlowDisk(300*time.Millisecond))
	c.waitLeader(20 * time.Second)
	n := c.nodes[1]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	epoch, err := n.ForceRecovery(ctx, []edict.ProcessID{1})
	require.NoError(t, err)
	b, err := n.store.Get(wire.EpochConfigKey(epoch))
	require.NoError(t, err, "the new epoch's configuration is in the store when the recovery returns")
	cfg, err := wire.DecodeEpochConfig(wire.EpochConfigKey(epoch), b)
	require.NoError(t, err)
	require.Equal(t, []edict.ProcessID{1}, cfg.Members)
}
