package replog

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
)

// sentTo counts, for every entry index, how many appends carried it to
// each follower.
type sentTo map[edict.ProcessID]map[uint64]int

func (s sentTo) observe(m wire.Message) {
	if m.Append == nil {
		return
	}
	if s[m.To] == nil {
		s[m.To] = map[uint64]int{}
	}
	for _, e := range m.Append.Entries {
		s[m.To][e.Index]++
	}
}

// A reply frees only the appends it covers. A heartbeat's reply (or an
// empty append's: a commit told to a follower read or a forwarded write)
// acknowledges no more than the follower was known to hold: counted as
// the reply to an append in flight, two of them emptied the window of a
// follower with two appends on their way, which then read as lost and
// were sent again. Under 64 writers of 64 KiB values most entries went
// out two or more times so.
func TestReplyToHeartbeatFreesNoAppend(t *testing.T) {
	c, l, f := leaderAndFollower(t)
	held := func(m wire.Message) bool { return m.To != f }
	for i := range 2 {
		c.propose(l, fmt.Sprintf("v%d", i))
		c.cores[l].Flush(c.reading(l))
		c.collect(l)
		c.deliver(held)
	}
	pr := c.cores[l].lead.progress[f]
	require.Len(t, pr.inflight, 2, "two appends on their way to p%d", f)
	sent := sentTo{}
	c.sent = sent.observe
	lead := c.cores[l].lead
	for range 2 {
		reply := &wire.AppendReply{Epoch: lead.epoch, Reign: lead.reign, Accepted: lead.reign, Success: true, LastIndex: pr.match}
		require.NoError(t, c.cores[l].Step(c.reading(l), wire.Message{From: f, To: l, AppendReply: reply}))
		c.collect(l)
	}
	require.Len(t, pr.inflight, 2, "replies that acknowledge no more than p%d held free nothing", f)
	require.Empty(t, sent[f], "nothing is sent to p%d again", f)
}

// An append lost on its way (a dropped frame, a follower that shed it)
// is sent again, and nothing the follower holds is: the next heartbeat,
// which matches at the last index sent, finds the follower lacks it, or
// the silence of 4·RoundTrip does, and the follower is probed from what
// it holds.
func TestLostAppendIsSentAgain(t *testing.T) {
	c, l, f := leaderAndFollower(t)
	sent := sentTo{}
	c.sent = sent.observe
	first := c.propose(l, "a")
	c.cores[l].Flush(c.reading(l))
	c.collect(l)
	c.settle(20*time.Millisecond, nil)
	// The next append to f is lost; later ones arrive.
	lost := c.propose(l, "b")
	c.cores[l].Flush(c.reading(l))
	c.collect(l)
	dropped := false
	c.deliver(func(m wire.Message) bool {
		if m.To == f && m.Append != nil && len(m.Append.Entries) > 0 && !dropped {
			dropped = true
			return false
		}
		return true
	})
	require.True(t, dropped)
	c.settle(c.cores[l].cfg.Heartbeat+20*time.Millisecond, nil)
	applied := c.applied[f]
	require.NotEmpty(t, applied)
	require.Equal(t, lost.Index, applied[len(applied)-1].Index, "the follower has the lost entry within a heartbeat")
	require.Equal(t, 1, sent[f][first.Index], "an entry the follower held was sent again")
	require.Equal(t, 2, sent[f][lost.Index], "the lost entry is sent once more")
}

// leaderAndFollower starts three processes and returns them with the
// leader and one of its followers.
func leaderAndFollower(t *testing.T) (c *tcluster, l, f edict.ProcessID) {
	t.Helper()
	c = newTCluster(t, 1, 2, 3)
	c.settle(50*time.Millisecond, nil)
	l = c.leader()
	require.NotZero(t, l)
	for _, id := range c.ids() {
		if id != l {
			return c, l, id
		}
	}
	t.Fatal("no follower")
	return
}
