package log

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect"
	"github.com/edictlog/edictlog/storage"
	"github.com/edictlog/edictlog/transport"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The regression tests of issue 13's safety holes, each a transcript a
// reader can follow: who leads, what reaches whom, which message arrives
// late. Each ends by checking that no two processes hold different
// committed entries at one index (requireCommittedAgree), the property the
// hole broke.

// cutOff keeps every message except those to or from the given processes:
// a partition that isolates them.
func cutOff(ids ...edict.ProcessID) func(transport.Message) bool {
	return func(m transport.Message) bool {
		return !slices.Contains(ids, m.From) && !slices.Contains(ids, m.To)
	}
}

// both keeps what every filter keeps.
func both(fs ...func(transport.Message) bool) func(transport.Message) bool {
	return func(m transport.Message) bool {
		for _, f := range fs {
			if !f(m) {
				return false
			}
		}
		return true
	}
}

// deliverHolding delivers like deliver, but sets aside the messages that
// match held, instead of delivering them, and returns them: messages the
// network delays, for the test to deliver late.
func (c *tcluster) deliverHolding(keep, held func(transport.Message) bool) []transport.Message {
	var out []transport.Message
	c.deliver(func(m transport.Message) bool {
		if held(m) {
			out = append(out, m)
			return false
		}
		return keep == nil || keep(m)
	})
	return out
}

// hold takes the queued messages that match out of the queue and returns
// them, for the test to deliver late.
func (c *tcluster) hold(match func(transport.Message) bool) []transport.Message {
	var held, rest []transport.Message
	for _, m := range c.queue {
		if match(m) {
			held = append(held, m)
		} else {
			rest = append(rest, m)
		}
	}
	c.queue = rest
	return held
}

// deliverLate delivers a message the network held back.
func (c *tcluster) deliverLate(m transport.Message) {
	require.NoError(c.t, c.cores[m.To].Step(c.reading(m.To), m))
	c.collect(m.To)
}

// suspect tells every listed process's detector that the others are down.
func (c *tcluster) suspect(at []edict.ProcessID, down ...edict.ProcessID) {
	for _, id := range at {
		for _, d := range down {
			c.dets[id].Observe(obsDown(d))
		}
	}
}

// trust tells every listed process's detector that the others are up.
func (c *tcluster) trust(at []edict.ProcessID, up ...edict.ProcessID) {
	for _, id := range at {
		for _, u := range up {
			c.dets[id].Observe(elect.Observation{Kind: elect.ProcessUp, Process: u})
		}
	}
}

// committedEntry is the entry id holds at index i, if i is at or below
// its commit index and still in its log.
func (c *tcluster) committedEntry(id edict.ProcessID, i uint64) (storage.Entry, bool) {
	core := c.cores[id]
	if i > core.commit {
		return storage.Entry{}, false
	}
	e := core.log.entry(i)
	if e == nil {
		return storage.Entry{}, false
	}
	return *e, true
}

// requireCommittedAgree fails if two processes hold different entries at
// an index both count as committed: a committed write was lost.
func (c *tcluster) requireCommittedAgree() {
	c.t.Helper()
	seen := map[uint64]struct {
		id edict.ProcessID
		e  storage.Entry
	}{}
	for _, id := range c.ids() {
		for i := c.cores[id].log.first(); i <= c.cores[id].commit; i++ {
			e, ok := c.committedEntry(id, i)
			if !ok {
				continue
			}
			if s, dup := seen[i]; dup && !s.e.Stamp.Equal(e.Stamp) {
				require.Failf(c.t, "a committed entry was lost",
					"index %d is committed as %s at %v and as %s at %v", i, describe(s.e), s.id, describe(e), id)
			}
			seen[i] = struct {
				id edict.ProcessID
				e  storage.Entry
			}{id, e}
		}
	}
}

func describe(e storage.Entry) string {
	if e.Kind == storage.EntryReignStart {
		return fmt.Sprintf("the reign-start edict %v", e.Stamp)
	}
	return fmt.Sprintf("%q (%v)", e.Data, e.Stamp)
}

// Hole 1: a success reply from an earlier reign counts in a later one.
//
// p1 leads reign R1 and appends x1, x2; only p2 stores them, and p2's reply
// is delayed. p3 leads R2 with p4 and p5 and overwrites x1 with its
// reign-start edict. p1 leads again, R3: it fetches R2's entry from p4 and
// appends its own reign-start edict at x2's index, which reaches only p4.
// Then p2's reply from R1 arrives: "I hold everything up to x2's index".
// Were p1 to count it, R3's reign-start would be committed on p1, p2, p4 —
// but p2 holds x2 there, not R3's edict. A later reign led from p2, p3, p5
// never sees R3's edict and commits another entry at that index.
func TestStaleAppendReplyFromEarlierReignIsNotCounted(t *testing.T) {
	c := newTCluster(t, 1, 2, 3, 4, 5)
	c.settle(50*time.Millisecond, nil)
	require.Equal(t, edict.ProcessID(1), c.leader(), "p1 leads R1")

	x1 := c.propose(1, "x1")
	x2 := c.propose(1, "x2")
	late := c.deliverHolding(
		func(m transport.Message) bool { return m.Append == nil || m.To == 2 }, // x1, x2 reach p2 only
		func(m transport.Message) bool {
			return m.AppendReply != nil && m.From == 2 && m.AppendReply.LastIndex == x2.Index
		})
	require.Len(t, late, 1, "p2's reply acknowledging x2 is delayed")
	require.Equal(t, x2.Index, c.cores[2].log.lastIndex(), "p2 stores x1 and x2")
	require.Less(t, c.cores[3].log.lastIndex(), x1.Index, "p3 does not")

	// R2: p1 and p2 are cut off; p3 leads with p4 and p5.
	c.down[1], c.down[2] = true, true
	c.suspect([]edict.ProcessID{3, 4, 5}, 1, 2)
	c.settle(2*time.Second, nil)
	require.Equal(t, edict.ProcessID(3), c.leader(), "p3 leads R2")
	r2 := c.cores[3].lead.reign
	require.Equal(t, x1.Index, c.cores[3].lead.reignIndex, "R2's start overwrites x1's index")

	// R3: p3 is cut off, p1 is back and leads with p4 and p5. Its
	// reign-start edict reaches p4 only.
	c.down[3], c.down[1] = true, false
	c.queue = nil
	c.suspect([]edict.ProcessID{1, 4, 5}, 2, 3)
	c.trust([]edict.ProcessID{4, 5}, 1)
	toP5 := func(m transport.Message) bool { return !(m.Append != nil && m.To == 5) }
	for i := 0; i < 400 && (c.cores[1].lead == nil || c.cores[1].lead.phase != phaseStarting); i++ {
		c.advance(5 * time.Millisecond)
		c.tickAll()
		c.deliver(toP5)
	}
	require.NotNil(t, c.cores[1].lead, "p1 leads R3")
	r3 := c.cores[1].lead.reign
	require.Equal(t, x2.Index, c.cores[1].lead.reignIndex, "R3's start is at x2's index")
	c.deliver(toP5)
	require.True(t, c.cores[1].lead != nil && c.cores[1].lead.reign.Equal(r3) && c.cores[1].el.IsLeader(c.reading(1)), "p1 still leads R3")
	require.Less(t, c.cores[1].commit, x2.Index, "R3's start is on p1 and p4 only: not a quorum")
	cmp, _ := r3.Compare(r2)
	require.Equal(t, 1, cmp)

	// p2's reply from R1 arrives.
	c.deliverLate(late[0])
	assert.Less(t, c.cores[1].commit, x2.Index, "p1 counted p2's reply to R1 toward R3's commit")

	// Were it counted, this is what follows: R4 from p2, p3 and p5.
	c.down[1], c.down[4], c.down[2], c.down[3] = true, true, false, false
	c.queue = nil
	c.suspect([]edict.ProcessID{2, 3, 5}, 1, 4)
	c.trust([]edict.ProcessID{3, 5}, 2)
	c.settle(2*time.Second, nil)
	require.NotEqual(t, edict.None, c.leader(), "R4 leads")
	c.requireCommittedAgree()
}

// leaseFrom matches the lease messages a process sends.
func leaseFrom(id edict.ProcessID) func(transport.Message) bool {
	return func(m transport.Message) bool { return m.Lease != nil && m.From == id }
}

func not(f func(transport.Message) bool) func(transport.Message) bool {
	return func(m transport.Message) bool { return !f(m) }
}

// Hole 2: the restart quarantine stopped grants but not appends.
//
// p1 leads with p2 and p3; its grants from p4 and p5 have lapsed. Just
// before p1's lease ends, p5 campaigns: p4 grants to p5 and reports where
// its log ends; p5's request to p3 is delayed. p4 crashes and restarts at
// once, forgetting that it grants to p5. In its quarantine it accepts p1's
// append of x, and p1 commits x on p1, p2 and p4. Then p1's lease ends,
// p5's request reaches p3, and p5 completes its lease with p3, p4 (the
// grant from before the crash) and itself. None of them reported x: p5's
// reign starts without it, and its reign-start edict takes x's index.
func TestQuarantinedProcessAcceptsNoAppend(t *testing.T) {
	c := newTCluster(t, 1, 2, 3, 4, 5)
	c.settle(50*time.Millisecond, nil)
	require.Equal(t, edict.ProcessID(1), c.leader(), "p1 leads")

	// p1's lease requests stop reaching p4 and p5: it leads with p2, p3.
	toP4P5 := func(m transport.Message) bool { return m.Lease != nil && m.From == 1 && (m.To == 4 || m.To == 5) }
	c.settle(time.Second, not(toP4P5))
	require.Equal(t, edict.ProcessID(1), c.leader(), "p1 still leads, with p2 and p3")
	gs, _ := c.cores[4].el.Grant(0)
	require.False(t, gs.Grantee == 1 && c.reading(4).Before(gs.Finish), "p4 no longer grants to p1")

	// From now on p1 renews with nobody; its lease runs out with p3's grant.
	p3, _ := c.cores[3].el.Grant(0)
	require.Equal(t, edict.ProcessID(1), p3.Grantee)
	for c.reading(1).Add(60 * time.Millisecond).Before(p3.Finish) {
		c.advance(5 * time.Millisecond)
		c.tickAll()
		c.deliver(not(leaseFrom(1)))
	}
	require.True(t, c.cores[1].el.IsLeader(c.reading(1)), "p1 leads until just before p3's grant ends")

	// p5 campaigns; p4 grants; the request to p3 is delayed.
	c.cores[5].el.Campaign(c.reading(5))
	c.cores[5].drainElect(c.reading(5))
	c.collect(5)
	toP3 := c.deliverHolding(not(leaseFrom(1)), func(m transport.Message) bool {
		return m.Lease != nil && m.From == 5 && m.To == 3
	})
	require.Len(t, toP3, 1)
	gs, _ = c.cores[4].el.Grant(0)
	require.Equal(t, edict.ProcessID(5), gs.Grantee, "p4 grants to p5")

	// p4 crashes and restarts at once: it forgets its grant to p5.
	c.boot(4, []storage.EpochConfig{c.epoch0})
	require.True(t, c.cores[4].el.Quarantined(c.reading(4)))

	// p1 appends x; it reaches p2 and p4.
	x := c.propose(1, "x")
	c.deliver(both(not(leaseFrom(1)), func(m transport.Message) bool { return m.Append == nil || m.To == 2 || m.To == 4 }))
	xCommitted := c.cores[1].commit >= x.Index
	assert.False(t, xCommitted, "p4 acknowledged an append during its quarantine; p1 committed x on p1, p2, p4")

	// p3's grant to p1 ends; p5's delayed request arrives.
	for c.reading(3).Before(p3.Finish) {
		c.advance(time.Millisecond)
	}
	require.False(t, c.cores[1].el.IsLeader(c.reading(1)))
	c.deliverLate(toP3[0])
	c.deliver(not(leaseFrom(1)))
	if l := c.cores[5].lead; l != nil {
		t.Logf("p5 leads from p3, p4 and itself; its reign starts at index %d", l.reignIndex)
	}
	c.settle(200*time.Millisecond, cutOff(1))
	c.requireCommittedAgree()
	if xCommitted {
		return
	}
	// With p4 refusing, p1 did not commit x; later reigns go on.
	c.settle(2*time.Second, nil)
	require.NotEqual(t, edict.None, c.leader(), "a leader after the quarantine")
	c.requireCommittedAgree()
}

// Hole 3: a snapshot install moved acceptedReign backwards.
//
// p1 leads R1 while p3 is away, and compacts its log; p3 comes back and
// accepts p1's snapshot. While it streams, p1 is cut off and p2 leads R2
// with p3, whose reign-start edict commits on p2 and p3 (p3 does not know
// it committed yet). Then the snapshot's install ends. Were it to set
// acceptedReign back to R1, p3 — granting to no one once p2 is gone too —
// would accept a delayed append of p1's reign R1 and truncate R2's
// committed edict, and a later reign of p1 and p3 would never see it.
func TestSnapshotInstallNeverMovesAcceptedReignBack(t *testing.T) {
	c := newTCluster(t, 1, 2, 3)
	c.settle(50*time.Millisecond, nil)
	require.Equal(t, edict.ProcessID(1), c.leader(), "p1 leads R1")
	r1 := c.cores[1].lead.reign

	c.down[3] = true
	for i := range 20 {
		c.propose(1, fmt.Sprintf("v%d", i))
	}
	c.settle(100*time.Millisecond, nil)
	_, err := c.cores[1].Compact(c.reading(1), c.cores[1].applied, 2)
	require.NoError(t, err)
	c.down[3] = false
	c.settle(100*time.Millisecond, nil)
	require.Contains(t, c.snapReqs[1], edict.ProcessID(3), "p3 needs a snapshot")
	pos, ok := c.cores[1].SnapshotPosition(c.cores[1].applied)
	require.True(t, ok)
	meta, ok := c.cores[1].SnapshotMeta(pos, 0)
	require.True(t, ok)
	require.NoError(t, c.cores[3].AcceptSnapshot(c.reading(3), 1, meta), "p3 accepts R1's snapshot; it streams")

	// p1 appends y after the snapshot; the append to p2 is delayed, and
	// will be p1's stale append.
	y := c.propose(1, "y")
	stale := c.deliverHolding(nil, func(m transport.Message) bool {
		return m.Append != nil && m.From == 1 && len(m.Append.Entries) > 0 && m.Append.Entries[len(m.Append.Entries)-1].Index == y.Index
	})
	require.NotEmpty(t, stale)

	// R2: p1 is cut off; p2 leads with p3, which accepts R2.
	c.down[1] = true
	c.queue = nil
	c.suspect([]edict.ProcessID{2, 3}, 1)
	var r2 edict.Stamp
	for i := 0; i < 1000; i++ {
		c.advance(5 * time.Millisecond)
		c.tickAll()
		c.deliver(func(m transport.Message) bool {
			// Stop once p2 has committed its reign-start edict, before a
			// heartbeat tells p3.
			return !(m.Append != nil && m.From == 2 && c.cores[2].lead != nil && c.cores[2].lead.phase == phaseReady)
		})
		if l := c.cores[2].lead; l != nil && l.phase == phaseReady {
			r2 = l.reign
			break
		}
	}
	require.False(t, r2.IsZero(), "p2 leads R2")
	require.True(t, c.cores[3].acceptedReign.Equal(r2), "p3 accepted R2")
	require.Equal(t, y.Index, c.cores[2].lead.reignIndex, "R2's start takes y's index")
	require.Less(t, c.cores[3].commit, y.Index, "p3 does not know R2's start committed")

	// The snapshot's install ends.
	installErr := c.cores[3].SnapshotInstalled(c.reading(3), 1, meta)
	c.collect(3)
	t.Logf("install after R2 was accepted: %v", installErr)
	cmp, err := c.cores[3].acceptedReign.Compare(r2)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, cmp, 0, "p3's acceptedReign went back from R2 to R1 (%v)", r1)
	stored, err := storage.DecodeStamp(storage.KeyAcceptedReign, c.stable[3][storage.KeyAcceptedReign])
	require.NoError(t, err)
	cmp, _ = stored.Compare(r2)
	assert.GreaterOrEqual(t, cmp, 0, "and persisted it")

	// p2 is gone; p3's grant to it ends. p1's delayed append arrives.
	c.down[2] = true
	c.queue = nil
	c.advance(time.Second)
	for _, m := range stale {
		m.To = 3
		c.deliverLate(m)
	}
	// p1 and p3 go on without p2.
	c.down[1] = false
	c.suspect([]edict.ProcessID{1, 3}, 2)
	c.settle(2*time.Second, nil)
	c.requireCommittedAgree()
}

// Hole 4a: fetch ids restart at 1 every reign.
//
// p1 appends x, which reaches p3 only, and goes away. p2 leads with p3 and
// must fetch x from p3 before its reign starts; p3's answer is delayed.
// p2 is cut off, its lease lapses, it comes back and leads again: a new
// reign, whose first fetch has id 1 again. The old answer arrives first.
// It answers a fetch of the earlier reign: what p3 held then may have been
// replaced since, so it must not count.
func TestStaleFetchReplyFromEarlierReignIsDropped(t *testing.T) {
	c := newTCluster(t, 1, 2, 3)
	c.settle(50*time.Millisecond, nil)
	require.Equal(t, edict.ProcessID(1), c.leader())
	x := c.propose(1, "x")
	c.deliver(func(m transport.Message) bool { return m.Append == nil || m.To == 3 })
	c.down[1] = true
	c.queue = nil
	c.suspect([]edict.ProcessID{2, 3}, 1)

	fetchReplies := func(m transport.Message) bool { return m.FetchReply != nil }
	var held []transport.Message
	for i := 0; i < 400 && (c.cores[2].lead == nil || c.cores[2].lead.phase != phaseFetching); i++ {
		c.advance(5 * time.Millisecond)
		c.tickAll()
		held = append(held, c.deliverHolding(nil, fetchReplies)...)
	}
	require.NotNil(t, c.cores[2].lead, "p2 leads, fetching x from p3")
	held = append(held, c.deliverHolding(nil, fetchReplies)...)
	require.NotEmpty(t, held)
	stale := held[0]
	require.Equal(t, uint64(1), stale.FetchReply.ID)
	firstAttempt := c.cores[2].lead.attempt

	// p2 is cut off until its lease lapses, then leads again.
	c.down[2] = true
	c.queue = nil
	c.advance(time.Second)
	c.down[2] = false
	for i := 0; i < 400 && (c.cores[2].lead == nil || c.cores[2].lead.attempt == firstAttempt); i++ {
		c.advance(5 * time.Millisecond)
		c.tickAll()
		c.deliverHolding(nil, fetchReplies)
	}
	l := c.cores[2].lead
	require.NotNil(t, l, "p2 leads again")
	require.NotEqual(t, firstAttempt, l.attempt, "a new reign")
	require.Equal(t, phaseFetching, l.phase)
	require.Equal(t, uint64(1), l.fetchID, "its fetch ids started again at 1")

	last := c.cores[2].log.lastIndex()
	c.deliverLate(stale)
	assert.Equal(t, last, c.cores[2].log.lastIndex(), "p2 appended what p3 answered to the earlier reign's fetch")
	assert.Equal(t, phaseFetching, c.cores[2].lead.phase, "p2 started its reign on the earlier reign's fetch")

	// The new reign's own fetch brings x.
	c.settle(200*time.Millisecond, cutOff(1))
	require.Equal(t, edict.ProcessID(2), c.leader())
	e := c.cores[2].log.entry(x.Index)
	require.NotNil(t, e)
	require.True(t, e.Stamp.Equal(x.Stamp), "x was fetched and kept")
	c.requireCommittedAgree()
}

// Hole 4b: follower-read ids restart with every life of the reader.
//
// p3 asks p1 for its commit index (read 1); the answer is delayed. p1
// commits w. p3 restarts, catches up, and asks again, with id 1 again,
// since ids live in memory. The old answer arrives first, carrying an index
// from before w: were it taken as the answer to the new read, p3 would
// serve a read issued after w was acknowledged from a state without it.
func TestFollowerReadReplyFromEarlierLifeIsDropped(t *testing.T) {
	c := newTCluster(t, 1, 2, 3)
	c.settle(50*time.Millisecond, nil)
	require.Equal(t, edict.ProcessID(1), c.leader())
	c.propose(1, "a")
	c.settle(60*time.Millisecond, nil)

	c.cores[3].Read(c.reading(3), 1, ReadFollower)
	c.collect(3)
	old := c.deliverHolding(nil, func(m transport.Message) bool { return m.ReadIndexReply != nil })
	require.Len(t, old, 1)
	require.True(t, old[0].ReadIndexReply.OK)

	w := c.propose(1, "w")
	c.settle(60*time.Millisecond, nil)
	require.GreaterOrEqual(t, c.cores[1].commit, w.Index, "w is committed and acknowledged")

	c.boot(3, []storage.EpochConfig{c.epoch0})
	c.settle(time.Second, nil) // past the quarantine; p3 hears from p1 again
	n := len(c.reads[3])
	c.cores[3].Read(c.reading(3), 1, ReadFollower)
	c.collect(3)
	c.deliverLate(old[0])
	c.deliver(nil)
	require.Greater(t, len(c.reads[3]), n)
	rs := c.reads[3][n]
	require.NoError(t, rs.Err)
	assert.GreaterOrEqual(t, rs.Index, w.Index, "read 1 of p3's new life was answered by the reply to read 1 of its earlier life")
}

// shiftedClock answers Suspended for readings of the test cluster's clock,
// which counts from an hour and has its own incarnations, by the manual
// clock's record of the suspend.
type shiftedClock struct {
	*edict.ManualClock
	now edict.Time
}

func (s shiftedClock) Now() edict.Time { return s.now }

func (s shiftedClock) Suspended(since edict.Time) bool {
	return s.ManualClock.Suspended(edict.Time{Incarnation: 1, Nanos: since.Nanos})
}

// Hole 5: suspend detection measured from the wrong moment, and ran too
// late.
//
// A lease's expiry is measured on the leader's clock from the start of the
// reign's first lease attempt. The runtime used to ask its clock whether
// the host was suspended since the moment it noticed it led — after the
// reign-start edict committed — so a suspend between the attempt and that
// moment went unseen, and it asked only after handling its input, so a
// follower read's index could leave under a lease the suspend had ended.
// Now the runtime asks, before every input, whether the clock was
// suspended since Core.LeaseSince, and gives the lease up if so.
func TestSuspendIsMeasuredFromTheReignsFirstAttempt(t *testing.T) {
	c := newTCluster(t, 1, 2, 3)
	// p1's clock, as the runtime sees it: it reads what the cluster's
	// shared clock reads, and knows when the host was suspended.
	clock := edict.NewManualClock(edict.Time{Incarnation: 1})
	// p1's first attempt starts; the host is suspended before the reign is
	// ready (its reign-start edict committed).
	for i := 0; i < 100 && c.cores[1].lead == nil; i++ {
		c.advance(time.Millisecond)
		c.tickAll()
		c.deliver(nil)
	}
	require.NotNil(t, c.cores[1].lead)
	since, ok := c.cores[1].LeaseSince(c.reading(1))
	require.True(t, ok)
	clock.Advance(time.Duration(since.Nanos)) // the suspend comes after the attempt's start
	clock.Suspend()
	c.settle(20*time.Millisecond, nil)
	require.Equal(t, edict.ProcessID(1), c.leader(), "p1's reign is ready")
	readyAt := c.reading(1)
	assert.False(t, clock.Suspended(edict.Time{Incarnation: 1, Nanos: readyAt.Nanos}),
		"measured from the moment p1 noticed it leads, the suspend is missed")

	// p2 asks for a follower read; the runtime's check comes before p1
	// handles the request.
	c.cores[2].Read(c.reading(2), 1, ReadFollower)
	c.collect(2)
	req := c.hold(func(m transport.Message) bool { return m.ReadIndex != nil })
	require.Len(t, req, 1)
	now := c.reading(1)
	since, ok = c.cores[1].LeaseSince(now)
	require.True(t, ok)
	require.True(t, since.Before(readyAt), "LeaseSince is the reign's first attempt, before it was ready")
	checkSuspend(c.cores[1], shiftedClock{clock, now}, now) // what Node.now does before every input
	c.collect(1)
	assert.False(t, c.cores[1].CanServeLease(c.reading(1)), "p1 gave its lease up")
	c.deliverLate(req[0])
	c.deliver(nil)
	rs := c.reads[2][len(c.reads[2])-1]
	assert.ErrorIs(t, rs.Err, ErrNotLeader, "p1 answered the follower read under a lease the suspend ended")
}
