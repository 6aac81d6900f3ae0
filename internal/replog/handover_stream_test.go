package replog

import (
	"testing"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
	"github.com/stretchr/testify/require"
)

// afterEvent is what edictlog.Node's loop does after each event, whatever it
// was: Tick if the Core's next deadline has passed, then carry out the
// Ready. Under a steady stream of events this check, not the timer, is
// what ticks.
func (x *driven) afterEvent() {
	if now := x.d.Now(); !now.Before(x.d.Core().NextTick()) {
		x.d.Tick()
	}
	x.run()
}

// After a graceful handover, the new leader, fed a proposal every
// millisecond, keeps its reign for ten leases: each renewal starts once
// due although every proposal takes a reading before the runtime looks at
// its deadlines. Renewals were once lost that way: NextTick considered
// only deadlines after the Core's last reading, so the first proposal
// past the renewal point hid it, the runtime never ticked and the lease
// lapsed (an edictkv end-to-end handover saw writes of unknown outcome;
// elect's TestNextTickKeepsOverdueRenewal is the same rule at the lease
// core). The leader runs as edictlog.Node's loop does, with its select at its
// worst: a proposal is always ready and wins over the timer, so only the
// check after each event ticks. Virtual time: the claim holds on any
// machine, however busy.
func TestNewLeaderKeepsReignAfterHandoverUnderLoad(t *testing.T) {
	c := newTCluster(t, 1, 2, 3)
	x := drive(c, 2)
	x.settle(50*time.Millisecond, nil)
	require.Equal(t, edict.ProcessID(1), c.leader())
	c.propose(1, "before")
	x.settle(20*time.Millisecond, nil)

	// 1 resigns, as a Node's Shutdown does, and is gone: 2 takes over.
	c.cores[1].Resign(c.reading(1))
	c.collect(1)
	x.deliver()
	c.down[1] = true
	x.settle(50*time.Millisecond, nil)
	leader := c.cores[2]
	st := leader.Status(c.reading(2))
	require.True(t, st.IsLeader, "2 leads a ready reign after the handover: %s", leader.Debug(c.reading(2)))
	reign := st.Reign

	var acked, failed int
	lease := leader.el.MaxLease()
	start := c.now
	for c.now-start < int64(10*lease) {
		c.advance(time.Millisecond)
		x.d.Propose(wire.EntryCommand, []byte("w"), func(_ ApplyResult, err error) {
			if err != nil {
				failed++
				return
			}
			acked++
		})
		x.d.Flush()
		x.afterEvent()
		c.tick(3) // a follower's timer: early ticks are allowed
		x.deliver()
		if st := leader.Status(c.reading(2)); !st.IsLeader || !st.Reign.Equal(reign) {
			t.Fatalf("%v into the stream (%.1f leases), after %d writes: 2 lost its reign (leader now %v): %s",
				time.Duration(c.now-start), float64(c.now-start)/float64(lease), acked, st.Leader, leader.Debug(c.reading(2)))
		}
	}
	require.Zero(t, failed, "no write of the reign failed")
	require.Greater(t, acked, 9*int(lease/time.Millisecond), "the writes commit as they come")
	t.Logf("2 kept its reign through %v (ten leases) and %d writes", time.Duration(c.now-start), acked)
}

// deliver delivers the queued messages until none is left, each to x's
// Driver as an event of its loop or to another Core.
func (x *driven) deliver() {
	c := x.c
	for n := 0; len(c.queue) > 0; n++ {
		require.Less(c.t, n, 100000, "messages keep coming")
		m := c.queue[0]
		c.queue = c.queue[1:]
		switch {
		case c.down[m.To] || c.down[m.From]:
		case m.To == x.id:
			require.NoError(c.t, x.d.Step(m))
			x.afterEvent()
		default:
			require.NoError(c.t, c.cores[m.To].Step(c.reading(m.To), m))
			c.collect(m.To)
		}
	}
}
