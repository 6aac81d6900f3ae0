package replog

import (
	"slices"
	"testing"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// takeQueued removes the queued messages of kind from the cluster's queue
// and returns them, in order.
func takeQueued(c *tcluster, kind wire.Kind) []wire.Message {
	var out []wire.Message
	c.queue = slices.DeleteFunc(c.queue, func(m wire.Message) bool {
		if m.Kind() != kind {
			return false
		}
		out = append(out, m)
		return true
	})
	return out
}

// step delivers m to its receiver and runs its Ready cycles; it returns
// the read states the receiver reported meanwhile.
func step(t *testing.T, c *tcluster, m wire.Message) []ReadState {
	before := len(c.reads[m.To])
	require.NoError(t, c.cores[m.To].Step(c.reading(m.To), m))
	c.collect(m.To)
	return c.reads[m.To][before:]
}

// followerOfA starts p1, p2 and p3 with p1 leading, commits a, and
// returns the cluster, a, and p2's Core, which follows p1 and has applied
// a.
func followerOfA(t *testing.T) (*tcluster, wire.Entry, *Core) {
	t.Helper()
	c := newTCluster(t, 1, 2, 3)
	c.settle(50*time.Millisecond, nil)
	require.Equal(t, edict.ProcessID(1), c.leader())
	a := c.propose(1, "a")
	c.settle(60*time.Millisecond, nil)
	return c, a, c.cores[2]
}

func readIDs(rs []ReadState) []uint64 {
	var ids []uint64
	for _, r := range rs {
		ids = append(ids, r.ID)
	}
	return ids
}

// Follower reads share requests: while one ReadIndexRequest is in flight
// to the leader, the reads that start wait, and its reply answers only
// the reads it was sent for; the next request, sent at once, carries every
// read that waited. A duplicated reply, one from another process and one
// that comes after its reads timed out answer nothing.
func TestFollowerReadsShareRequests(t *testing.T) {
	c, a, f := followerOfA(t)

	f.Read(c.reading(2), 1, ReadFollower)
	c.collect(2)
	req1 := takeQueued(c, wire.KindReadIndex)
	require.Len(t, req1, 1)
	for id := uint64(2); id <= 11; id++ {
		f.Read(c.reading(2), id, ReadFollower)
		c.collect(2)
	}
	assert.Empty(t, takeQueued(c, wire.KindReadIndex), "one request in flight to the leader at a time")
	assert.Empty(t, c.reads[2], "no read answered yet")

	// The leader commits w while request 1 is on its way back.
	assert.Empty(t, step(t, c, req1[0]))
	rep1 := takeQueued(c, wire.KindReadIndexReply)
	require.Len(t, rep1, 1)
	require.Equal(t, a.Index, rep1[0].ReadIndexReply.Index)
	w := c.propose(1, "w")
	c.deliver(func(m wire.Message) bool { return m.Kind() != wire.KindReadIndex })
	require.Equal(t, w.Index, c.cores[1].commit)

	// A reply of the same id from a process the request did not go to
	// answers nothing.
	forged := rep1[0]
	forged.From = 3
	assert.Empty(t, step(t, c, forged))

	got := step(t, c, rep1[0])
	assert.Equal(t, []uint64{1}, readIDs(got), "request 1 answers the read it was sent for")
	assert.Equal(t, a.Index, got[0].Index)
	assert.Empty(t, step(t, c, rep1[0]), "a duplicated reply answers nothing")
	req2 := takeQueued(c, wire.KindReadIndex)
	require.Len(t, req2, 1, "one request for the reads that waited")
	assert.NotEqual(t, req1[0].ReadIndex.ID, req2[0].ReadIndex.ID)

	step(t, c, req2[0])
	rep2 := takeQueued(c, wire.KindReadIndexReply)
	require.Len(t, rep2, 1)
	got = step(t, c, rep2[0])
	assert.Equal(t, []uint64{2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, readIDs(got))
	for _, rs := range got {
		require.NoError(t, rs.Err)
		assert.Equal(t, w.Index, rs.Index, "read %d started after w was acknowledged", rs.ID)
	}
	assert.Empty(t, takeQueued(c, wire.KindReadIndex), "nothing waits")

	// A refusal fails every read of its request, naming the leader the
	// refuser knows; read 13, which waited, leaves in the next request.
	f.Read(c.reading(2), 12, ReadFollower)
	c.collect(2)
	req3 := takeQueued(c, wire.KindReadIndex)
	require.Len(t, req3, 1, "no request in flight: the read leaves at once")
	f.Read(c.reading(2), 13, ReadFollower)
	c.collect(2)
	refusal := wire.Message{From: 1, To: 2, ReadIndexReply: &wire.ReadIndexReply{
		Epoch: req3[0].ReadIndex.Epoch, ID: req3[0].ReadIndex.ID, Sent: req3[0].ReadIndex.Sent, Leader: 3}}
	got = step(t, c, refusal)
	require.Equal(t, []uint64{12}, readIDs(got))
	assert.ErrorIs(t, got[0].Err, ErrNotLeader)
	assert.Equal(t, edict.ProcessID(3), got[0].Leader)

	// Request 4 (read 13) gets no answer within MaxLease: the read fails,
	// and the reply, when it comes, answers nothing, not even read 14,
	// which started after it was sent.
	req4 := takeQueued(c, wire.KindReadIndex)
	require.Len(t, req4, 1)
	step(t, c, req4[0])
	rep4 := takeQueued(c, wire.KindReadIndexReply)
	require.Len(t, rep4, 1)
	before := len(c.reads[2])
	c.advance(f.el.MaxLease())
	c.tick(2)
	timedOut := c.reads[2][before:]
	require.Equal(t, []uint64{13}, readIDs(timedOut))
	assert.ErrorIs(t, timedOut[0].Err, ErrNoLeader)
	f.Read(c.reading(2), 14, ReadFollower)
	c.collect(2)
	req5 := takeQueued(c, wire.KindReadIndex)
	require.Len(t, req5, 1, "the request whose reads all timed out is no longer in flight")
	assert.Empty(t, step(t, c, rep4[0]), "a reply after its reads timed out")
	step(t, c, req5[0])
	got = step(t, c, takeQueued(c, wire.KindReadIndexReply)[0])
	assert.Equal(t, []uint64{14}, readIDs(got))
}

// Requests are in flight one per leader: a follower that learns of a new
// leader while a request is in flight to the old one asks the new one at
// once, and the old one's reply still answers the reads it was sent for.
func TestFollowerReadsOneRequestPerLeader(t *testing.T) {
	c := newTCluster(t, 1, 2, 3)
	c.settle(50*time.Millisecond, nil)
	require.Equal(t, edict.ProcessID(1), c.leader())
	f := c.cores[2]
	f.Read(c.reading(2), 1, ReadFollower)
	c.collect(2)
	toOld := takeQueued(c, wire.KindReadIndex)
	require.Len(t, toOld, 1)
	require.Equal(t, edict.ProcessID(1), toOld[0].To)

	f.leaderHint = 3 // as learnLeader would, from p3's first append
	f.Read(c.reading(2), 2, ReadFollower)
	c.collect(2)
	toNew := takeQueued(c, wire.KindReadIndex)
	require.Len(t, toNew, 1)
	assert.Equal(t, edict.ProcessID(3), toNew[0].To)

	step(t, c, toOld[0])
	got := step(t, c, takeQueued(c, wire.KindReadIndexReply)[0])
	assert.Equal(t, []uint64{1}, readIDs(got))
	require.NoError(t, got[0].Err)
}

// A ReadIndexRequest lost on its way, or whose reply is, is sent again
// after 4·RoundTrip, as a copy of the same request: the reads are
// answered within a few round trips instead of failing at MaxLease, and a
// reply to the first copy, arriving late, answers them as well as the
// second's would. Once answered, neither answers anything more.
func TestLostReadIndexRequestIsSentAgain(t *testing.T) {
	for _, late := range []bool{false, true} {
		c, a, f := followerOfA(t)

		f.Read(c.reading(2), 1, ReadFollower)
		c.collect(2)
		first := takeQueued(c, wire.KindReadIndex)
		require.Len(t, first, 1)
		c.advance(f.readResend())
		c.tick(2)
		again := takeQueued(c, wire.KindReadIndex)
		require.Len(t, again, 1, "an unanswered request is sent again after 4·RoundTrip")
		require.Equal(t, first[0].ReadIndex.ID, again[0].ReadIndex.ID, "as a copy of the same request")
		require.True(t, first[0].ReadIndex.Sent.Before(again[0].ReadIndex.Sent))
		require.Less(t, f.readResend(), f.el.MaxLease(), "well before the reads would time out")

		// The first copy was lost, or only delayed.
		var reply wire.Message
		if late {
			step(t, c, first[0])
		} else {
			step(t, c, again[0])
		}
		replies := takeQueued(c, wire.KindReadIndexReply)
		require.Len(t, replies, 1)
		reply = replies[0]
		got := step(t, c, reply)
		require.Equal(t, []uint64{1}, readIDs(got), "late=%v: the read is answered", late)
		require.NoError(t, got[0].Err)
		require.Equal(t, a.Index, got[0].Index)
		assert.Empty(t, step(t, c, reply), "a duplicated reply answers nothing")
		c.advance(f.readResend())
		c.tick(2)
		assert.Empty(t, takeQueued(c, wire.KindReadIndex), "nothing is asked again once answered")
	}
}
