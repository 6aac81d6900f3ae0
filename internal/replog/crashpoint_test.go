package replog

import (
	"fmt"
	"testing"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
	"github.com/stretchr/testify/require"
)

// Tests of what a message promises about its sender's disk, with slow
// disks whose queued writes a crash would lose (tcluster.slow): each
// checks, as a message leaves, that the records it rests on are already
// durable.

// durablyWedged reports whether id's stores hold epoch's wedge record.
func (c *tcluster) durablyWedged(id edict.ProcessID, epoch uint64) bool {
	k := wire.EpochWedgeKey(epoch)
	b, ok := c.stable[id][k]
	if !ok {
		return false
	}
	r, err := wire.DecodeEpochRecord(k, b)
	return err == nil && r.Wedged
}

// A member wedged in memory, its wedge record still on its slow disk,
// answers the wedger's retried request. The answer promises that this
// member stays wedged; were it sent before the record is durable, a crash
// would unwedge it after the wedger counted it, and epoch 0 could elect a
// leader beside epoch 1's. So every wedge answer leaves only once its
// sender's record is durable, and nobody asks for grants in epoch 1 until
// a blocking set of epoch 0 is durably wedged.
func TestWedgeAnswersWaitForTheWedgeRecord(t *testing.T) {
	c := newTCluster(t, 1, 2, 3)
	c.joinLearner()
	c.slow[2], c.slow[3] = 150*time.Millisecond, 150*time.Millisecond
	var broken []string
	c.sent = func(m wire.Message) {
		l := m.Lease
		switch {
		case l == nil:
		case l.Type == wire.LeaseGrant && l.Wedged && !c.durablyWedged(m.From, l.Epoch):
			broken = append(broken, fmt.Sprintf("p%d answered wedged in epoch %d before its wedge record was durable", m.From, l.Epoch))
		case l.Type == wire.LeaseGrantRequest && !l.Wedge && l.Epoch == 1:
			n := 0
			for _, p := range c.epoch0.Members {
				if c.durablyWedged(p, 0) {
					n++
				}
			}
			if n < 2 {
				broken = append(broken, fmt.Sprintf("p%d asked for grants in epoch 1 with %d of epoch 0's members durably wedged", m.From, n))
			}
		}
	}
	_, err := c.cores[1].Promote(c.reading(1), 4)
	require.NoError(t, err)
	c.cores[1].Flush(c.reading(1))
	c.collect(1)
	c.settle(3*time.Second, nil)
	require.Empty(t, broken)
	var leaders []edict.ProcessID
	for _, id := range c.ids() {
		if st := c.cores[id].Status(c.reading(id)); st.IsLeader {
			require.Equal(t, uint64(1), st.Epoch)
			leaders = append(leaders, id)
		}
	}
	require.Len(t, leaders, 1, "epoch 1 has a leader")
}

// A follower whose log diverges from the leader's installs a snapshot
// that replaces its log. What is durable afterwards is the snapshot, not
// the old log's height: entries appended after the install, still on the
// slow disk, must not count as durable — a grant would report them, and
// as leader the process would count itself toward their commit.
func TestSnapshotResetLowersTheDurableMarks(t *testing.T) {
	c := newTCluster(t, 1, 2, 3)
	c.settle(50*time.Millisecond, nil)
	require.Equal(t, edict.ProcessID(1), c.leader())
	c.propose(1, "a")
	c.settle(100*time.Millisecond, nil)

	// p1 appends entries nobody else receives, then is cut off.
	for i := range 9 {
		c.propose(1, fmt.Sprintf("lost%d", i))
	}
	c.queue = nil
	c.down[1] = true
	oldTail := c.cores[1].log.lastIndex()
	require.Equal(t, oldTail, c.cores[1].durablePosition().Index, "p1's own entries are durable")

	c.dets[2].Observe(obsDown(1))
	c.dets[3].Observe(obsDown(1))
	c.settle(2*time.Second, nil)
	require.Equal(t, edict.ProcessID(2), c.leader())
	c.propose(2, "b")
	c.propose(2, "c")
	c.settle(100*time.Millisecond, nil)
	l := c.cores[2]
	snap := l.applied
	require.Less(t, snap, oldTail, "the snapshot ends below p1's old tail")
	_, err := l.Compact(c.reading(2), snap, 0)
	require.NoError(t, err)
	pos, ok := l.SnapshotPosition(snap)
	require.True(t, ok)
	meta, ok := l.SnapshotMeta(pos, 0)
	require.True(t, ok)

	// p1 comes back and installs the snapshot: its entry at the
	// snapshot's index is another reign's, so its log is replaced. Then
	// its disk turns slow, and the leader's next entries reach it.
	c.down[1] = false
	c.tick(1)
	require.False(t, c.cores[1].log.matches(pos.Index, pos.Stamp))
	require.NoError(t, c.cores[1].SnapshotInstalled(c.reading(1), 2, meta))
	c.collect(1)
	l.SnapshotSent(c.reading(2), 1, snap, nil)
	c.collect(2)
	c.settle(60*time.Millisecond, nil)
	c.slow[1] = time.Second
	c.propose(2, "d")
	c.propose(2, "e")
	c.deliver(nil)
	p1 := c.cores[1]
	require.Greater(t, p1.log.lastIndex(), snap, "p1 appended the entries after the snapshot")
	require.NotEmpty(t, c.disk[1], "and they wait on its disk")
	require.Equal(t, snap, p1.durablePosition().Index, "what p1 reports durable is the snapshot, not the old log's height")
	require.Equal(t, snap, p1.persisted)
}
