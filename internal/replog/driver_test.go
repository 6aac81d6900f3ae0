package replog

import (
	"testing"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// driven runs one tcluster process through a Driver, as edictlog.Node does,
// with the tcluster's synchronous stores: the batch is durable when
// Persist returns, and the state machine applies what Apply hands it once
// HandleReady is done (Synced and Applied come back as inputs).
type driven struct {
	c       *tcluster
	id      edict.ProcessID
	d       *Driver
	synced  []uint64
	toApply []wire.Entry
}

type tclock struct {
	c  *tcluster
	id edict.ProcessID
}

func (k tclock) Now() edict.Time           { return k.c.reading(k.id) }
func (k tclock) Suspended(edict.Time) bool { return false }

func drive(c *tcluster, id edict.ProcessID) *driven {
	x := &driven{c: c, id: id}
	x.d = NewDriver(c.cores[id], tclock{c, id}, x, 0)
	return x
}

func (x *driven) Send(m wire.Message) { x.c.queue = append(x.c.queue, m) }
func (x *driven) Persist(seq uint64, b wire.Batch, after []wire.Message) {
	x.c.store(x.id, b)
	x.c.queue = append(x.c.queue, after...)
	x.synced = append(x.synced, seq)
}
func (x *driven) Apply(es []wire.Entry)        { x.toApply = append(x.toApply, es...) }
func (x *driven) SendSnapshot(edict.ProcessID) {}
func (x *driven) Event(ev Event)               { x.c.events[x.id] = append(x.c.events[x.id], ev) }

// run carries out what the Core asks until it asks nothing more.
func (x *driven) run() {
	for {
		x.d.HandleReady()
		if len(x.synced) == 0 && len(x.toApply) == 0 {
			return
		}
		for _, seq := range x.synced {
			x.d.Synced(seq)
		}
		x.synced = nil
		if es := x.toApply; len(es) > 0 {
			x.toApply = nil
			var res []ApplyResult
			for _, e := range es {
				x.c.applied[x.id] = append(x.c.applied[x.id], e)
				res = append(res, ApplyResult{Index: e.Index, Stamp: e.Stamp})
			}
			x.d.Applied(es[len(es)-1].Index, res)
		}
	}
}

// settle is tcluster.settle with x's process driven.
func (x *driven) settle(d time.Duration, keep func(wire.Message) bool) {
	c := x.c
	for end := c.now + int64(d); c.now < end; {
		c.advance(5 * time.Millisecond)
		for _, id := range c.ids() {
			switch {
			case c.down[id]:
			case id == x.id:
				x.d.Tick()
				x.run()
			default:
				c.tick(id)
			}
		}
		for len(c.queue) > 0 {
			m := c.queue[0]
			c.queue = c.queue[1:]
			if c.down[m.To] || c.down[m.From] || keep != nil && !keep(m) {
				continue
			}
			if m.To == x.id {
				require.NoError(c.t, x.d.Step(m))
				x.run()
				continue
			}
			require.NoError(c.t, c.cores[m.To].Step(c.reading(m.To), m))
			c.collect(m.To)
		}
	}
}

// A write whose leader loses its lease before it commits is answered when
// its index is applied under the next leader: with its result if its edict
// committed there, with ErrNotCommitted if another edict did — definite
// answers where the step-down could only say "unknown" (most of Jepsen's
// unknown outcomes came from leases lost under a gray failure).
func TestWritePendingAtStepDownIsAnsweredByTheNextReign(t *testing.T) {
	for _, reached := range []bool{true, false} {
		c := newTCluster(t, 1, 2, 3)
		x := drive(c, 1)
		x.settle(time.Second, nil)
		require.Equal(t, edict.ProcessID(1), c.leader())

		type answer struct {
			res ApplyResult
			err error
		}
		var got *answer
		x.d.Propose(wire.EntryCommand, []byte("w"), func(res ApplyResult, err error) { got = &answer{res, err} })
		x.d.Flush()
		x.run()
		var idx uint64
		for _, e := range c.stored[1] {
			if string(e.Data) == "w" {
				idx = e.Index
			}
		}
		require.NotZero(t, idx)
		// The append reaches 2 (or no one), no reply reaches 1, and 1 is
		// then cut off until its lease ends and 2 leads.
		c.deliver(func(m wire.Message) bool {
			return m.From == 1 && m.To == 2 && m.Append != nil && reached
		})
		c.queue = nil
		c.down[1] = true
		c.settle(2*time.Second, nil)
		require.Equal(t, edict.ProcessID(2), c.leader())
		require.Nil(t, got, "not answered while its fate is open")
		c.down[1] = false
		x.settle(2*time.Second, nil)
		require.NotNil(t, got, "answered once 1 applied its index")
		if reached {
			require.NoError(t, got.err, "2 had it: the next reign committed it")
			assert.Equal(t, idx, got.res.Index)
		} else {
			assert.ErrorIs(t, got.err, ErrNotCommitted, "2 lacked it: another edict took its index")
		}
	}
}

// A follower cut off from its leader stops naming it once a lease's
// length has passed without a word from it: Status.Leader is what
// readiness and routing trust (TestNoLeader saw a lone survivor of a
// dead leader stay ready for good).
func TestStatusForgetsASilentLeader(t *testing.T) {
	c := newTCluster(t, 1, 2, 3)
	c.settle(time.Second, nil)
	require.Equal(t, edict.ProcessID(1), c.leader())
	assert.Equal(t, edict.ProcessID(1), c.cores[2].Status(c.reading(2)).Leader)
	c.down[1], c.down[3] = true, true
	c.settle(c.cores[2].el.MaxLease()/2, nil)
	assert.Equal(t, edict.ProcessID(1), c.cores[2].Status(c.reading(2)).Leader, "half a lease of silence: still named")
	c.settle(c.cores[2].el.MaxLease(), nil)
	assert.Equal(t, edict.None, c.cores[2].Status(c.reading(2)).Leader, "a lease and more of silence: none known")
}

// Reads drained together are decided at one reading of the clock, taken
// when they are handed over, and each is answered; a batch at a follower
// shares one request to the leader.
func TestReadsShareOneReading(t *testing.T) {
	for _, id := range []edict.ProcessID{1, 2} {
		c := newTCluster(t, 1, 2, 3)
		x := drive(c, id)
		x.settle(time.Second, nil)
		require.Equal(t, edict.ProcessID(1), c.leader())
		level := ReadLease
		if id != 1 {
			level = ReadFollower
		}
		var answered []uint64
		var batch []ReadRequest
		for range 5 {
			batch = append(batch, ReadRequest{Level: level, Done: func(res ReadResult, err error) {
				require.NoError(t, err)
				answered = append(answered, res.Index)
			}})
		}
		before := x.d.Readings()
		x.d.Reads(batch)
		require.Equal(t, before+1, x.d.Readings(), "one reading for the batch")
		requests := map[uint64]bool{} // by id: a copy sent again is the same request
		x.run()
		x.settle(50*time.Millisecond, func(m wire.Message) bool {
			if m.From == id && m.ReadIndex != nil {
				requests[m.ReadIndex.ID] = true
			}
			return true
		})
		require.Len(t, answered, 5, "process %d answers every read of the batch", id)
		if id != 1 {
			require.Len(t, requests, 1, "the batch shares one read index request")
		}
	}
}
