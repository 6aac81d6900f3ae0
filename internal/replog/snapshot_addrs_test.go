package replog

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
)

// configAddrs returns the addresses the ConfigChanged events of id since
// event from made known, by process.
func (c *tcluster) configAddrs(id edict.ProcessID, from int) map[edict.ProcessID]string {
	got := map[edict.ProcessID]string{}
	for _, ev := range c.events[id][from:] {
		if ev.Kind == ConfigChanged && ev.Membership != nil {
			for p, a := range ev.Membership.Addrs {
				got[p] = a
			}
		}
	}
	return got
}

// A follower that installs a snapshot skips the config edict that added a
// learner, and with it the learner's address: the runtime learns
// addresses only from the ConfigChanged events (Node.onEvent). The
// snapshot's header carries them instead, and the install announces them.
// Without, a follower that later led the epoch would never reach the
// learner (Jepsen: a replacement while a member was cut off).
func TestSnapshotInstallTeachesLearnerAddress(t *testing.T) {
	c := newTCluster(t, 1, 2, 3)
	c.addLearnerWhileDown(3)
	require.NotContains(t, c.cores[3].Status(c.reading(3)).Learners, edict.ProcessID(4), "p3 was down for the config edict")

	pos, ok := c.cores[1].SnapshotPosition(c.cores[1].applied)
	require.True(t, ok)
	meta, ok := c.cores[1].SnapshotMeta(pos, 0)
	require.True(t, ok)
	// What the leader's runtime adds (Node.sendSnapshot).
	meta.Addrs = map[edict.ProcessID]string{1: "addr-1", 2: "addr-2", 3: "addr-3", 4: "addr-4"}
	require.NoError(t, meta.Validate())

	c.down[3] = false
	mark := len(c.events[3])
	require.NoError(t, c.cores[3].AcceptSnapshot(c.reading(3), 1, meta))
	require.NoError(t, c.cores[3].SnapshotInstalled(c.reading(3), 1, meta))
	c.collect(3)
	require.Contains(t, c.cores[3].Status(c.reading(3)).Learners, edict.ProcessID(4), "learned from the snapshot")
	require.Equal(t, "addr-4", c.configAddrs(3, mark)[4], "the install announces the learner's address with its configuration")
}

// The same for an epoch the follower never knew: a snapshot past the stop
// edict that began it, which promoted a learner whose config edict is
// inside the snapshot too.
func TestSnapshotInstallOfANewEpochTeachesAddresses(t *testing.T) {
	c := newTCluster(t, 1, 2, 3)
	core := c.cores[3]
	meta := snapshotMeta(40, 1, []edict.ProcessID{1, 2, 4})
	meta.Addrs = map[edict.ProcessID]string{1: "addr-1", 4: "addr-4"}
	mark := len(c.events[3])
	require.NoError(t, core.SnapshotInstalled(c.reading(3), 1, meta))
	c.collect(3)
	require.True(t, core.el.EpochKnown(1))
	require.Equal(t, map[edict.ProcessID]string{1: "addr-1", 4: "addr-4"}, c.configAddrs(3, mark))
}

// A follower that already knows the snapshot's configuration still hears
// the addresses that came with it: what taught it the configuration may
// not have named them (a stop edict names no address), and announcing an
// address twice costs the runtime a write.
func TestSnapshotInstallOfAKnownConfigurationTeachesAddresses(t *testing.T) {
	c := newTCluster(t, 1, 2, 3)
	core := c.cores[3]
	meta := snapshotMeta(40, 0, []edict.ProcessID{1, 2, 3})
	meta.Addrs = map[edict.ProcessID]string{2: "addr-2"}
	mark := len(c.events[3])
	require.NoError(t, core.SnapshotInstalled(c.reading(3), 1, meta))
	c.collect(3)
	require.Equal(t, map[edict.ProcessID]string{2: "addr-2"}, c.configAddrs(3, mark))
	var cfgs []wire.EpochConfig
	for _, ev := range c.events[3][mark:] {
		if ev.Kind == ConfigChanged {
			cfgs = append(cfgs, ev.Membership.Config)
		}
	}
	require.Equal(t, []wire.EpochConfig{{Epoch: 0, Members: []edict.ProcessID{1, 2, 3}}}, cfgs, "the configuration announced is the one known")
}
