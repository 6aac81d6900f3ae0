package replog

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Issue 14's transcripts for the log: a member that knows the newest
// epoch only from news must still come to lead it, without a leader of
// the epoch to bring it the stop edict.

// promoteWithStopOnlyAt runs epoch 0 = {p1, p2, p3} with learner p4
// caught up, then has p1 promote p4 (epoch 1 = {p1…p4}) while its appends
// reach only the processes in holders: the stop edict commits on p1 and
// those, and no one else learns it committed — every append of p1 after
// the one carrying the edict is lost, and the link between p1 and the
// holders breaks. p1's lease lapses (it renews no more in an ending
// epoch) and it wedges epoch 0 with the others: their wedge requests and
// replies carry the news of epoch 1. Then p1 dies. It returns the stop
// edict.
func promoteWithStopOnlyAt(t *testing.T, c *tcluster, holders ...edict.ProcessID) wire.Entry {
	c.joinLearner()
	require.Equal(t, []string{"before"}, appliedData(c.applied[4]), "the learner caught up")

	stop, err := c.cores[1].Promote(c.reading(1), 4)
	require.NoError(t, err)
	c.cores[1].Flush(c.reading(1))
	c.collect(1)
	keep := func(m wire.Message) bool {
		if m.From != 1 || m.Append == nil {
			return true
		}
		if m.Append.LeaderCommit >= stop.Index {
			return false // no one hears from p1 that the stop edict committed
		}
		es := m.Append.Entries
		carriesStop := len(es) > 0 && es[len(es)-1].Index >= stop.Index
		return !carriesStop || slices.Contains(holders, m.To)
	}
	// Deliver until p1 knows the stop edict committed; from then on no
	// append of p1 reaches anyone.
	for range 100 {
		c.advance(5 * time.Millisecond)
		c.tickAll()
		c.deliver(keep)
		if c.cores[1].commit >= stop.Index {
			break
		}
	}
	require.GreaterOrEqual(t, c.cores[1].commit, stop.Index, "the stop edict committed on p1")
	for _, id := range []edict.ProcessID{2, 3, 4} {
		require.Less(t, c.cores[id].commit, stop.Index, "p%d does not know the stop edict committed", id)
	}
	cut := func(m wire.Message) bool {
		return !(m.From == 1 && (m.Append != nil || slices.Contains(holders, m.To)) || m.To == 1 && slices.Contains(holders, m.From))
	}
	for range 400 {
		c.advance(5 * time.Millisecond)
		c.tickAll()
		c.deliver(cut)
		if c.cores[1].el.Terminated(0) {
			break
		}
	}
	require.True(t, c.cores[1].el.Terminated(0), "p1's lease lapsed and it wedged epoch 0")
	c.down[1] = true
	for _, id := range []edict.ProcessID{2, 3, 4} {
		c.dets[id].Observe(obsDown(1))
	}
	return stop
}

// p1 commits the stop edict that promotes p4 with p2's acknowledgement
// alone; p2, p3 and p4 hear of epoch 1 from p1's lease messages, and p1
// dies before it wedges epoch 0 or replicates further. The news makes the
// three wedge epoch 0, so no one may lead it; they know epoch 1 only as
// Heard, so no one could lead that either — the cluster stayed leaderless
// for good. Now the news names the stop edict's position: p2, whose log
// holds it, knows it committed, learns epoch 1 from its own log and
// leads it; p3 and p4 need not wait for it.
//
// Fails with EDICT_MUTATE=heard-learns (go test -tags edictmutate).
func TestHeardMemberThatHoldsTheStopEdictLeadsTheNewEpoch(t *testing.T) {
	c := newTCluster(t, 1, 2, 3)
	stop := promoteWithStopOnlyAt(t, c, 2)
	c.settle(10*time.Second, nil)

	l := c.leader()
	require.NotEqual(t, edict.None, l, "a member of epoch 1 leads:\n%s", c.debug())
	st := c.cores[l].Status(c.reading(l))
	assert.Equal(t, uint64(1), st.Epoch)
	assert.Equal(t, []edict.ProcessID{1, 2, 3, 4}, st.Members)
	c.propose(l, "after")
	c.settle(300*time.Millisecond, nil)
	for _, id := range []edict.ProcessID{2, 3, 4} {
		assert.Equal(t, []string{"before", "after"}, appliedData(c.applied[id]), "p%d", id)
		assert.GreaterOrEqual(t, c.cores[id].commit, stop.Index)
	}
}

// As above, but p2, the one process that holds the stop edict, is cut off
// from every lease message: it can neither campaign nor grant, nor hear
// the news. p3 and p4, which know epoch 1 only as Heard and lack the
// edict, ask their peers in turn for committed entries up to the stop
// edict the news named, rather than wait for a leader that cannot come:
// p2 answers with what its log holds, and they learn epoch 1 from their
// own logs.
//
// Fails with EDICT_MUTATE=heard-learns (go test -tags edictmutate).
func TestHeardMemberFetchesTheStopEdictFromAnyPeer(t *testing.T) {
	c := newTCluster(t, 1, 2, 3)
	stop := promoteWithStopOnlyAt(t, c, 2)

	// Only committed fetches and their replies, and lease messages among
	// p3 and p4, get through: p2 serves what it holds but neither
	// campaigns nor grants.
	keep := func(m wire.Message) bool {
		if m.Fetch != nil || m.FetchReply != nil {
			return m.Fetch == nil || m.Fetch.Committed
		}
		return m.Lease != nil && m.From != 2 && m.To != 2
	}
	c.settle(2*time.Second, keep)
	for _, id := range []edict.ProcessID{3, 4} {
		assert.GreaterOrEqual(t, c.cores[id].commit, stop.Index, "p%d fetched up to the stop edict", id)
		assert.False(t, c.cores[id].Status(c.reading(id)).EpochHeard, "p%d knows epoch 1 from its own log", id)
	}
	c.settle(10*time.Second, nil)
	l := c.leader()
	require.NotEqual(t, edict.None, l, "a member of epoch 1 leads:\n%s", c.debug())
	c.propose(l, "after")
	c.settle(300*time.Millisecond, nil)
	for _, id := range []edict.ProcessID{2, 3, 4} {
		assert.Equal(t, []string{"before", "after"}, appliedData(c.applied[id]), "p%d", id)
	}
}

// debug is every core's Debug line, for failure messages.
func (c *tcluster) debug() string {
	var b strings.Builder
	for _, id := range c.ids() {
		fmt.Fprintf(&b, "p%d down=%t %s\n", id, c.down[id], c.cores[id].Debug(c.reading(id)))
	}
	return b.String()
}
