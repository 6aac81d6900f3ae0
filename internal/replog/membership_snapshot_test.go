package replog

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
)

// A snapshot names the epoch that was active when it was taken, which can
// be older than a stop edict inside it: a learner that installs it never
// sees that stop edict, and first hears of the newer epoch from a config
// entry (a learner added in it). Found by the Jepsen membership nemesis: a
// process joining after several replacements panicked with "wedge of
// unknown epoch" when the next stop edict arrived.
func TestConfigOfAnEpochWhoseStopEdictWasInASnapshot(t *testing.T) {
	c := newTCluster(t, 1, 2, 3)
	core := c.cores[3]
	now := c.reading(3)
	// The snapshot at index 40 says epoch 0 (active when it was taken),
	// though the stop edict that began epoch 1 is among its entries.
	core.SnapshotInstalled(now, 1, snapshotMeta(40, 0, []edict.ProcessID{1, 2, 3}))
	require.True(t, core.el.EpochKnown(0))
	require.False(t, core.el.EpochKnown(1))

	// A committed config entry of epoch 1 (a learner added) is the first
	// news of epoch 1; then the stop edict that begins epoch 2.
	require.NotPanics(t, func() {
		core.learnMembership(c.reading(3), wire.Membership{Config: wire.EpochConfig{Epoch: 1, Members: []edict.ProcessID{1, 2, 3}, Learners: []edict.ProcessID{4}}}, false)
		core.learnMembership(c.reading(3), wire.Membership{Config: wire.EpochConfig{Epoch: 2, Members: []edict.ProcessID{1, 2, 4}}}, true)
	})
	assert.True(t, core.el.EpochKnown(1), "a config entry of an epoch proves the epoch exists")
	assert.True(t, core.el.EpochKnown(2))
}

func snapshotMeta(index, epoch uint64, members []edict.ProcessID) wire.SnapshotHeader {
	qt := edict.QT{{Process: 1, T: edict.Time{Incarnation: 1, Nanos: 1}}, {Process: 2, T: edict.Time{Incarnation: 1, Nanos: 1}}}
	reign := edict.Stamp{Epoch: epoch, QT: qt}
	return wire.SnapshotHeader{Epoch: epoch, Reign: reign, LastIndex: index,
		LastStamp: edict.Stamp{Epoch: epoch, QT: qt, Counter: index}, Members: members}
}
