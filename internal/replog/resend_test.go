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

// A follower whose disk is slow answers late, and its answers to
// heartbeats come as late as those to appends. Nothing was lost, so
// nothing is sent to it twice: each entry reaches each follower once,
// whatever the disk's delay and however many heartbeats went out
// meanwhile. (Counting replies, a heartbeat's reply freed an append's
// slot in the window; and a timer of 4·RoundTrip took the slow disk for
// a lost append: both sent the whole window again.)
func TestSlowFollowerIsNotSentEntriesTwice(t *testing.T) {
	for _, delay := range []time.Duration{30 * time.Millisecond, 120 * time.Millisecond, 400 * time.Millisecond} {
		t.Run(delay.String(), func(t *testing.T) {
			c := newTCluster(t, 1, 2, 3)
			c.settle(50*time.Millisecond, nil)
			l := c.leader()
			require.NotZero(t, l)
			var slowest edict.ProcessID
			for _, id := range c.ids() {
				if id != l {
					slowest = id
				}
			}
			c.slow[slowest] = delay
			sent := sentTo{}
			c.sent = sent.observe
			var last wire.Entry
			for i := range 60 {
				last = c.propose(l, fmt.Sprintf("v%d", i))
				c.cores[l].Flush(c.reading(l))
				c.collect(l)
				c.settle(5*time.Millisecond, nil)
			}
			c.settle(3*delay+200*time.Millisecond, nil)
			for _, id := range c.ids() {
				applied := c.applied[id]
				require.NotEmpty(t, applied)
				require.Equal(t, last.Index, applied[len(applied)-1].Index, "p%d applied every entry", id)
				if id == l {
					continue
				}
				for idx, n := range sent[id] {
					require.Equal(t, 1, n, "entry %d sent to p%d (disk %v) %d times", idx, id, c.slow[id], n)
				}
			}
		})
	}
}

// An append lost on its way (a dropped frame, a follower that shed it)
// is found by the next heartbeat, which matches at the last index sent:
// the follower lacks it, says where its log ends, and is sent the rest.
// No timer is involved, and nothing it holds is sent again.
func TestLostAppendFoundByHeartbeat(t *testing.T) {
	c := newTCluster(t, 1, 2, 3)
	c.settle(50*time.Millisecond, nil)
	l := c.leader()
	require.NotZero(t, l)
	var f edict.ProcessID
	for _, id := range c.ids() {
		if id != l {
			f = id
			break
		}
	}
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
