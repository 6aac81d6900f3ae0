package replog

import (
	"testing"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
	"github.com/stretchr/testify/require"
)

// requireReleaseBeforeHandOver checks the messages from queued in the
// order they are sent: every release of from's lease leaves before the
// TimeoutNow to target, so that the target does not find itself still
// granting to from when it campaigns.
func requireReleaseBeforeHandOver(t *testing.T, queue []wire.Message, from, target edict.ProcessID) {
	t.Helper()
	releases, handOver := 0, -1
	for i, m := range queue {
		switch {
		case m.From == from && m.Lease != nil && m.Lease.Type == wire.LeaseRelease:
			require.Equal(t, -1, handOver, "a release of %v's lease leaves after its TimeoutNow", from)
			releases++
		case m.From == from && m.TimeoutNow != nil:
			require.Equal(t, target, m.To)
			handOver = i
		}
	}
	require.Positive(t, releases, "the lease is released")
	require.NotEqual(t, -1, handOver, "a TimeoutNow goes to %v", target)
}

// A transfer releases the lease before it tells the target to campaign.
func TestTransferReleasesBeforeHandOver(t *testing.T) {
	c := newTCluster(t, 1, 2, 3)
	c.settle(50*time.Millisecond, nil)
	c.propose(1, "a")
	c.settle(20*time.Millisecond, nil) // every follower has it: the transfer ends at once
	require.NoError(t, c.cores[1].TransferLeadership(c.reading(1), 3))
	c.collect(1)
	requireReleaseBeforeHandOver(t, c.queue, 1, 3)
	c.settle(50*time.Millisecond, nil)
	require.Equal(t, edict.ProcessID(3), c.leader())
}

// A leader that resigns (shuts down) releases its lease and hands over to
// a follower, which leads at once: the others' detectors would otherwise
// go on naming the resigned process, whose grants were released rather
// than lapsed, and no one would campaign.
func TestResignHandsOver(t *testing.T) {
	c := newTCluster(t, 1, 2, 3)
	c.settle(50*time.Millisecond, nil)
	c.propose(1, "a")
	c.settle(20*time.Millisecond, nil)
	require.Equal(t, edict.ProcessID(1), c.leader())

	c.cores[1].Resign(c.reading(1))
	c.collect(1)
	requireReleaseBeforeHandOver(t, c.queue, 1, 2) // 2 and 3 are equally up to date: the lower id
	c.deliver(nil)
	c.down[1] = true
	c.settle(50*time.Millisecond, nil)
	require.Equal(t, edict.ProcessID(2), c.leader(), "the successor leads within a few round trips")
	c.propose(2, "b")
	c.settle(100*time.Millisecond, nil)
	require.Equal(t, []string{"a", "b"}, appliedData(c.applied[3]))

	// A follower that resigns does nothing.
	c.queue = nil
	c.cores[3].Resign(c.reading(3))
	c.collect(3)
	require.Empty(t, c.queue)
}
