package replog

import (
	"reflect"
	"testing"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Three processes elect p1, whose reign-start edict commits; writes
// commit on a quorum and apply everywhere in the same order; the three
// read levels answer.
func TestReplicateAndRead(t *testing.T) {
	c := newTCluster(t, 1, 2, 3)
	c.settle(50*time.Millisecond, nil)
	require.Equal(t, edict.ProcessID(1), c.leader())
	_, err := c.cores[2].Propose(c.reading(2), wire.EntryCommand, []byte("x"))
	assert.ErrorIs(t, err, ErrNotLeader)

	a := c.propose(1, "a")
	b := c.propose(1, "b")
	cmp, err := a.Stamp.Compare(b.Stamp)
	require.NoError(t, err)
	assert.Equal(t, -1, cmp, "stamps follow the log")
	c.deliver(nil)
	c.settle(60*time.Millisecond, nil) // heartbeats carry the commit index
	for _, id := range c.ids() {
		assert.Equal(t, []string{"a", "b"}, appliedData(c.applied[id]), "%v applied", id)
		assert.Equal(t, wire.EntryReignStart, c.applied[id][0].Kind, "the reign-start edict comes first")
	}

	c.cores[1].Read(c.reading(1), 7, ReadLease)
	c.collect(1)
	rs := c.reads[1][len(c.reads[1])-1]
	require.NoError(t, rs.Err)
	assert.Equal(t, b.Index, rs.Index, "a lease read waits for what is committed")

	c.cores[2].Read(c.reading(2), 8, ReadFollower)
	c.collect(2)
	c.deliver(nil)
	rs = c.reads[2][len(c.reads[2])-1]
	require.NoError(t, rs.Err)
	assert.Equal(t, uint64(8), rs.ID)
	assert.Equal(t, b.Index, rs.Index, "the leader answered with its commit index")

	c.cores[3].Read(c.reading(3), 9, ReadStale)
	c.collect(3)
	rs = c.reads[3][len(c.reads[3])-1]
	assert.Equal(t, c.applied[3][len(c.applied[3])-1].Index, rs.Index)

	c.cores[2].Read(c.reading(2), 10, ReadLease)
	c.collect(2)
	assert.ErrorIs(t, c.reads[2][len(c.reads[2])-1].Err, ErrNotLeader)
}

// The leader crashes after replicating an entry to only one follower; the
// next leader's quorum includes that follower, so the reign start fetches
// the entry (docs/protocol.md, "The replicated log") and it commits.
func TestNewReignFetchesWhatItLacks(t *testing.T) {
	c := newTCluster(t, 1, 2, 3)
	c.settle(50*time.Millisecond, nil)
	require.Equal(t, edict.ProcessID(1), c.leader())
	x := c.propose(1, "x")
	c.deliver(func(m wire.Message) bool { return !(m.Append != nil && m.To == 2) })
	c.down[1] = true
	c.queue = nil
	require.Equal(t, x.Index, c.cores[3].log.lastIndex(), "p3 holds x")
	require.Less(t, c.cores[2].log.lastIndex(), x.Index, "p2 does not")

	c.dets[2].Observe(obsDown(1))
	c.dets[3].Observe(obsDown(1))
	c.settle(2*time.Second, nil)
	require.Equal(t, edict.ProcessID(2), c.leader())
	c.settle(100*time.Millisecond, nil)
	for _, id := range []edict.ProcessID{2, 3} {
		assert.Equal(t, []string{"x"}, appliedData(c.applied[id]), "%v applied x", id)
	}
}

// An entry only the old leader had is truncated when the new reign
// replicates, and never applied.
func TestUncommittedSuffixIsReplaced(t *testing.T) {
	c := newTCluster(t, 1, 2, 3)
	c.settle(50*time.Millisecond, nil)
	lost := c.propose(1, "lost")
	c.queue = nil // nobody hears of it
	c.down[1] = true
	c.dets[2].Observe(obsDown(1))
	c.dets[3].Observe(obsDown(1))
	c.settle(2*time.Second, nil)
	require.Equal(t, edict.ProcessID(2), c.leader())
	c.propose(2, "won")
	c.deliver(nil)

	// p1 restarts from its store and rejoins as a follower.
	c.boot(1, []wire.EpochConfig{c.epoch0})
	c.settle(3*time.Second, nil)
	for _, id := range c.ids() {
		assert.Equal(t, []string{"won"}, appliedData(c.applied[id]), "%v", id)
	}
	st, ok := c.cores[1].log.stampAt(lost.Index)
	require.True(t, ok)
	assert.False(t, st.Equal(lost.Stamp), "p1's uncommitted entry was replaced by the new reign's")
	require.Equal(t, edict.ProcessID(2), c.leader(), "a recovered lower id does not take over (stability)")
}

func TestTransferLeadership(t *testing.T) {
	c := newTCluster(t, 1, 2, 3)
	c.settle(50*time.Millisecond, nil)
	c.propose(1, "a")
	require.NoError(t, c.cores[1].TransferLeadership(c.reading(1), 3))
	_, err := c.cores[1].Propose(c.reading(1), wire.EntryCommand, []byte("b"))
	assert.ErrorIs(t, err, ErrTransferring, "writes stop during a transfer")
	c.collect(1)
	c.settle(200*time.Millisecond, nil)
	require.Equal(t, edict.ProcessID(3), c.leader())
	c.propose(3, "b")
	c.settle(100*time.Millisecond, nil)
	for _, id := range c.ids() {
		assert.Equal(t, []string{"a", "b"}, appliedData(c.applied[id]))
	}
}

// A learner joins, catches up, is promoted through a stop edict; the old
// epoch is wedged and the new one elects a leader that accepts writes.
func TestLearnerPromotedThroughNewEpoch(t *testing.T) {
	c := newTCluster(t, 1, 2, 3)
	c.joinLearner()
	assert.Equal(t, []string{"before"}, appliedData(c.applied[4]), "the learner receives the log")
	assert.Contains(t, c.cores[1].Status(c.reading(1)).Learners, edict.ProcessID(4))

	_, err := c.cores[1].Promote(c.reading(1), 4)
	require.NoError(t, err)
	_, err = c.cores[1].Propose(c.reading(1), wire.EntryCommand, []byte("x"))
	assert.ErrorIs(t, err, ErrStopped, "nothing follows the stop edict in its epoch")
	c.cores[1].Flush(c.reading(1))
	c.collect(1)
	c.settle(3*time.Second, nil)
	l := c.leader()
	require.NotEqual(t, edict.None, l)
	st := c.cores[l].Status(c.reading(l))
	assert.Equal(t, uint64(1), st.Epoch)
	assert.Equal(t, []edict.ProcessID{1, 2, 3, 4}, st.Members)
	c.propose(l, "after")
	c.settle(200*time.Millisecond, nil)
	for _, id := range c.ids() {
		assert.Equal(t, []string{"before", "after"}, appliedData(c.applied[id]), "%v", id)
	}
}

func TestRemoveMember(t *testing.T) {
	c := newTCluster(t, 1, 2, 3)
	c.settle(50*time.Millisecond, nil)
	_, err := c.cores[1].Remove(c.reading(1), 3)
	require.NoError(t, err)
	c.cores[1].Flush(c.reading(1))
	c.collect(1)
	c.settle(3*time.Second, nil)
	l := c.leader()
	require.NotEqual(t, edict.None, l)
	assert.Equal(t, []edict.ProcessID{1, 2}, c.cores[l].Status(c.reading(l)).Members)
	c.propose(l, "y")
	c.settle(100*time.Millisecond, nil)
	assert.Equal(t, []string{"y"}, appliedData(c.applied[1]))
	assert.Equal(t, []string{"y"}, appliedData(c.applied[2]))
}

// A follower that missed entries the leader has compacted needs a
// snapshot: the Core asks the runtime to stream one.
func TestLaggingFollowerNeedsSnapshot(t *testing.T) {
	c := newTCluster(t, 1, 2, 3)
	c.settle(50*time.Millisecond, nil)
	c.down[3] = true
	for i := range 20 {
		c.propose(1, string(rune('a'+i)))
	}
	c.settle(100*time.Millisecond, nil)
	upTo, err := c.cores[1].Compact(c.reading(1), c.cores[1].applied, 2)
	require.NoError(t, err)
	assert.Positive(t, upTo)
	c.down[3] = false
	c.settle(200*time.Millisecond, nil)
	assert.Contains(t, c.snapReqs[1], edict.ProcessID(3), "p3 lacks compacted entries")
}

// Structure is checked once, at decode (wire.Message.Validate); what
// needs the core's state, here the receiver, is checked by Step.
func TestStepRefusesMisdirected(t *testing.T) {
	c := newTCluster(t, 1, 2, 3)
	assert.ErrorContains(t, c.cores[1].Step(c.reading(1), wire.Message{From: 2, To: 3, TimeoutNow: &wire.TimeoutNow{Reign: edict.Stamp{QT: edict.QT{{Process: 1}}}}}), "delivered to p1")
}

// A follower that installs a snapshot taken after a learner joined learns
// of the learner from the snapshot, not only from the config edict it
// skipped: were it to lead, it must replicate to the learner.
func TestSnapshotCarriesLearners(t *testing.T) {
	c := newTCluster(t, 1, 2, 3)
	c.addLearnerWhileDown(3)
	require.Contains(t, c.cores[1].Status(c.reading(1)).Learners, edict.ProcessID(4))
	require.NotContains(t, c.cores[3].Status(c.reading(3)).Learners, edict.ProcessID(4), "p3 was down for the config edict")

	applied := c.cores[1].applied
	pos, ok := c.cores[1].SnapshotPosition(applied)
	require.True(t, ok)
	meta, ok := c.cores[1].SnapshotMeta(pos, 0)
	require.True(t, ok)
	assert.Equal(t, []edict.ProcessID{4}, meta.Learners)

	c.down[3] = false
	require.NoError(t, c.cores[3].AcceptSnapshot(c.reading(3), 1, meta))
	c.cores[3].SnapshotInstalled(c.reading(3), 1, meta)
	c.collect(3)
	assert.Contains(t, c.cores[3].Status(c.reading(3)).Learners, edict.ProcessID(4), "learned from the snapshot")
	_, stored := c.stable[3][wire.EpochConfigKey(0)]
	assert.True(t, stored, "and stored durably")
}

// Once EagerInflight appends are in flight to a follower, the leader holds
// entries back until a reply comes, and they leave together in one append:
// five writes proposed one by one reach a follower in three appends, not
// five, and commit.
func TestAppendsWaitForAFullerBatch(t *testing.T) {
	c := newTCluster(t, 1, 2, 3)
	c.settle(50*time.Millisecond, nil)
	require.Equal(t, edict.ProcessID(1), c.leader())
	var sizes []int
	c.sent = func(m wire.Message) {
		if m.To == 2 && m.Append != nil && len(m.Append.Entries) > 0 {
			sizes = append(sizes, len(m.Append.Entries))
		}
	}
	for _, v := range []string{"a", "b", "c", "d", "e"} {
		c.propose(1, v)
	}
	assert.Equal(t, []int{1, 1}, sizes, "two appends in flight, the rest held back")
	c.deliver(nil)
	assert.Equal(t, []int{1, 1, 3}, sizes, "the held entries left in one append once a reply came")
	c.settle(60*time.Millisecond, nil)
	for _, id := range c.ids() {
		assert.Equal(t, []string{"a", "b", "c", "d", "e"}, appliedData(c.applied[id]), "%v applied", id)
	}
}

// StatusSince reports what Status does, and shares the previous report's
// members and matches only while they hold the same values: a published
// Status is read-only, and one report must never change under a reader
// of another.
func TestStatusSinceSharesOnlyWhatIsUnchanged(t *testing.T) {
	c := newTCluster(t, 1, 2, 3)
	c.settle(50*time.Millisecond, nil)
	l := c.leader()
	require.NotEqual(t, edict.None, l)
	first := c.cores[l].Status(c.reading(l))
	require.True(t, first.IsLeader)
	require.Len(t, first.Match, 3)

	again := c.cores[l].StatusSince(c.reading(l), first)
	assert.Equal(t, c.cores[l].Status(c.reading(l)), again, "the same report as Status")
	assert.Same(t, &first.Members[0], &again.Members[0], "unchanged members are shared")
	assert.Equal(t, reflect.ValueOf(first.Match).Pointer(), reflect.ValueOf(again.Match).Pointer(), "unchanged matches are shared")

	c.propose(l, "x")
	c.settle(50*time.Millisecond, nil)
	moved := c.cores[l].StatusSince(c.reading(l), again)
	assert.Equal(t, c.cores[l].Status(c.reading(l)), moved)
	assert.NotEqual(t, reflect.ValueOf(again.Match).Pointer(), reflect.ValueOf(moved.Match).Pointer(), "a peer's match moved: a new map")
	for p, m := range again.Match {
		assert.Equal(t, first.Match[p], m, "the earlier report is unchanged")
		assert.Less(t, m, moved.Match[p], "%v matched the new entry", p)
	}

	_, err := c.cores[l].Remove(c.reading(l), otherThan(l))
	require.NoError(t, err)
	c.cores[l].Flush(c.reading(l))
	c.collect(l)
	c.settle(3*time.Second, nil)
	l2 := c.leader()
	require.NotEqual(t, edict.None, l2)
	after := c.cores[l2].StatusSince(c.reading(l2), moved)
	assert.Equal(t, c.cores[l2].Status(c.reading(l2)), after)
	assert.Len(t, after.Members, 2)
	assert.Len(t, moved.Members, 3, "the earlier report keeps its members")
}

func otherThan(id edict.ProcessID) edict.ProcessID {
	if id == 3 {
		return 2
	}
	return 3
}
