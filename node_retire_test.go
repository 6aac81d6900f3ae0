package edictlog_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
	"github.com/stretchr/testify/require"
)

// Shutdown is a clean stop: it records, naming its incarnation, that the
// life ended holding no live grant, and the next start of the process is
// not quarantined. A leader's Shutdown resigns first and ends the same way.
func TestShutdownRecordsACleanStop(t *testing.T) {
	c := newNetCluster(t, 3)
	l := c.waitLeader(20 * time.Second)
	c.put("a", "1")
	for _, nn := range append(c.others(l.id), l) {
		inc := nn.Incarnation()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		require.NoError(t, nn.Shutdown(ctx), "node %v", nn.id)
		cancel()
		b, err := nn.store.Get(wire.KeyCleanStop)
		require.NoError(t, err, "node %v left no clean-stop record", nn.id)
		got, err := wire.DecodeUint64(wire.KeyCleanStop, b)
		require.NoError(t, err)
		require.Equal(t, inc, got, "node %v: the record names the life that stopped", nn.id)
		c.stop(nn.id) // Stop after Shutdown is harmless
	}
	for _, id := range []edict.ProcessID{1, 2, 3} {
		nn := c.restart(id)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		require.Contains(t, nn.Debug(ctx), "quarantined=false", "node %v restarted after a clean stop", id)
		cancel()
	}
	c.waitLeader(20 * time.Second)
}

// A Shutdown whose context has ended stops the Node all the same, says
// so, and writes no record: the next start is quarantined, as after a
// crash. Nor does Stop write one.
func TestShutdownCutShortLeavesNoRecord(t *testing.T) {
	c := newNetCluster(t, 3)
	l := c.waitLeader(20 * time.Second)
	g := c.others(l.id)[1]
	stopCtx, stopCancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer stopCancel()
	require.NoError(t, g.Stop(stopCtx))
	_, err := g.store.Get(wire.KeyCleanStop)
	require.True(t, errors.Is(err, wire.ErrNotFound), "Stop writes no clean-stop record: %v", err)
	c.stop(g.id)

	f := c.others(l.id)[0]
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = f.Shutdown(ctx)
	require.ErrorIs(t, err, context.Canceled)
	require.True(t, strings.Contains(err.Error(), "restart quarantine"), "the error says what it costs: %v", err)
	_, err = f.store.Get(wire.KeyCleanStop)
	require.True(t, errors.Is(err, wire.ErrNotFound), "no clean-stop record: %v", err)
	c.stop(f.id)
}
