package elect

import (
	"testing"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A leader that carries its lease past its epoch's end (WedgeKeeping)
// leads alone until its reign of the next epoch begins: the next epoch's
// granters that granted it in the old one refuse anyone else until that
// grant lapses, and every quorum of the next epoch holds one of them.
// Fails with EDICT_MUTATE=carried-grants (go test -tags edictmutate): p2
// is granted by all four and leads beside p1.
func TestCarriedLeaseHoldsTheNextEpochBack(t *testing.T) {
	c := newCluster(t, 1, 2, 3)
	c.start(4, 1, testConfig(4, []edict.ProcessID{1, 2, 3}, nil))
	c.elect(1)
	c.learnEpoch(wire.EpochConfig{Epoch: 1, Members: []edict.ProcessID{1, 2, 3, 4}}, 1, 2, 3, 4)

	c.carry(1, 0, "one member added: every quorum of epoch 1 meets every quorum of epoch 0")
	require.True(t, c.cores[1].Terminated(0))
	require.True(t, c.cores[1].IsLeader(c.reading(1)), "the lease outlives its epoch")
	require.True(t, c.cores[1].Carrying(c.reading(1)))
	_, err := c.cores[1].Issue(c.reading(1))
	require.ErrorIs(t, err, ErrNotLeader, "nothing follows the stop edict in its epoch")

	// p2 learns that epoch 0 terminated and campaigns in epoch 1.
	c.act(2, func(p *Core, now edict.Time) { require.NoError(t, p.Wedge(now, 0)) })
	require.Equal(t, uint64(1), c.cores[2].ActiveEpoch())
	c.act(2, (*Core).Campaign)
	assert.False(t, c.cores[2].IsLeader(c.reading(2)), "p2 leads epoch 1 while p1 carries its lease")
	assert.True(t, c.cores[1].IsLeader(c.reading(1)))

	// The carrier itself is granted (p2 revoked what p4 gave it), and its
	// new reign replaces the carried lease.
	c.act(1, (*Core).Campaign)
	ep, _, _, ok := c.cores[1].Lease(c.reading(1))
	require.True(t, ok)
	assert.Equal(t, uint64(1), ep)
	assert.False(t, c.cores[1].Carrying(c.reading(1)))
	ev, found := c.lastEvent(1, LeaseAcquired)
	require.True(t, found)
	assert.True(t, ev.NewReign)
}

// The carrier's own campaign wins at once while it carries: its granters
// refuse only others.
func TestCarrierWinsTheNextEpochAtOnce(t *testing.T) {
	c := newCluster(t, 1, 2, 3)
	c.elect(1)
	c.learnEpoch(wire.EpochConfig{Epoch: 1, Members: []edict.ProcessID{1, 2}}, 1, 2, 3)
	c.carry(1, 0, "one member removed")
	require.True(t, c.cores[1].Carrying(c.reading(1)))
	c.act(1, (*Core).Campaign)
	ep, _, _, ok := c.cores[1].Lease(c.reading(1))
	require.True(t, ok)
	assert.Equal(t, uint64(1), ep)
	assert.False(t, c.cores[1].Carrying(c.reading(1)))
	ev, found := c.lastEvent(1, LeaseAcquired)
	require.True(t, found)
	assert.True(t, ev.NewReign, "a new reign, with its own reign-start edict")
	_, err := c.cores[1].Issue(c.reading(1))
	assert.NoError(t, err)
}

// A lease is not carried into an epoch with a quorum that misses the
// old one's: here p3 is replaced by p4 in one step, and p1's lease rests
// on p1 and p3 alone, so p2 and p4, a quorum of epoch 1 that granted p1
// nothing, could elect p2 beside it. WedgeKeeping refuses, and the caller
// gives the lease up. The log changes one member at a time (Promote,
// Remove), so no run gets here: this is the guard's own test.
func TestLeaseIsNotCarriedPastAQuorumThatMissesIt(t *testing.T) {
	c := newCluster(t, 1, 2, 3)
	c.start(4, 1, testConfig(4, []edict.ProcessID{1, 2, 3}, nil))
	c.tick(1)
	c.deliver(func(m wire.Lease) bool { return m.From != 2 && m.To != 2 })
	require.True(t, c.cores[1].IsLeader(c.reading(1)))
	c.learnEpoch(wire.EpochConfig{Epoch: 1, Members: []edict.ProcessID{1, 2, 4}}, 1, 2, 3, 4)
	kept, err := c.cores[1].WedgeKeeping(c.reading(1), 0)
	require.NoError(t, err)
	assert.False(t, kept)
	assert.False(t, c.cores[1].Wedging(0), "nothing done: the caller releases, then wedges")
}

func TestQuorumsMeet(t *testing.T) {
	ids := func(ps ...edict.ProcessID) []edict.ProcessID { return ps }
	for _, tc := range []struct {
		a, b []edict.ProcessID
		meet bool
	}{
		{ids(1, 2, 3), ids(1, 2, 3, 4), true},
		{ids(1, 2, 3, 4), ids(1, 2, 3), true},
		{ids(1, 2, 3), ids(1, 2), true},
		{ids(1, 2), ids(1, 2, 3), true},
		{ids(1), ids(1, 2), true},
		{ids(1, 2, 3, 4, 5), ids(1, 2, 3, 4), true},
		{ids(1, 2, 3, 4), ids(1, 2, 3, 4, 5), true},
		{ids(1, 2, 3), ids(1, 2, 4), false},
		{ids(1, 2, 3, 4, 5), ids(1, 2, 3, 4, 6), false},
		{ids(1, 2, 3), ids(1, 2, 3, 4, 5), false},
		{ids(1, 2, 3), ids(4, 5, 6), false},
	} {
		assert.Equal(t, tc.meet, quorumsMeet(tc.a, tc.b), "%v → %v", tc.a, tc.b)
	}
}

// A carrier that gives its lease up (its succession failed, or it shuts
// down) releases the grants of the epoch it carried the lease from, so the
// next epoch elects another at once instead of waiting them out.
func TestReleasedCarriedLeaseFreesTheNextEpoch(t *testing.T) {
	c := newCluster(t, 1, 2, 3)
	c.elect(1)
	c.learnEpoch(wire.EpochConfig{Epoch: 1, Members: []edict.ProcessID{1, 2}}, 1, 2, 3) // p3 removed
	c.carry(1, 0, "one member removed")
	require.True(t, c.cores[1].Carrying(c.reading(1)))
	require.Equal(t, uint64(1), c.cores[1].ActiveEpoch())

	c.act(1, func(p *Core, now edict.Time) { p.Release(now, p.MaxLease()) })
	require.False(t, c.cores[1].IsLeader(c.reading(1)))
	c.act(2, func(p *Core, now edict.Time) { require.NoError(t, p.Wedge(now, 0)) })
	c.act(2, (*Core).Campaign)
	ep, _, _, ok := c.cores[2].Lease(c.reading(2))
	assert.True(t, ok && ep == 1, "p2 leads epoch 1 at once: p1 released its grants of epoch 0")
}

// A leader that hands over releases its grants first, but the release and
// the hand-over need not arrive in that order: the target's requests may
// find its granters, itself included, still granting to the old leader.
// Its directed campaign (CampaignFor) asks them again after a round trip
// instead of counting them as refusals. Fails with
// EDICT_MUTATE=hand-over-release: p2 fails, revokes and backs off.
func TestHandOverOutrunsTheRelease(t *testing.T) {
	c := newCluster(t, 1, 2, 3)
	c.elect(1)
	c.cores[1].Release(c.reading(1), c.cores[1].MaxLease())
	c.collect(1)
	releases := c.queue
	c.queue = nil
	c.cores[2].CampaignFor(c.reading(2), 1)
	c.collect(2)
	c.deliver(nil) // p2's requests, before any release: refused, naming p1
	require.False(t, c.cores[2].IsLeader(c.reading(2)))
	require.True(t, c.cores[2].Campaigning(), "still campaigning: the refusals name the leader that handed over")
	c.queue = releases
	c.deliver(nil)
	c.advance(2 * c.cores[2].RoundTrip())
	c.tick(2)
	c.deliver(nil)
	assert.True(t, c.cores[2].IsLeader(c.reading(2)), "p2 leads once the release has landed")
}

// carry has leader id wedge epoch keeping its lease, requiring that it
// may, and delivers the wedge.
func (c *cluster) carry(id edict.ProcessID, epoch uint64, why string) {
	kept, err := c.cores[id].WedgeKeeping(c.reading(id), epoch)
	require.NoError(c.t, err)
	require.True(c.t, kept, why)
	c.collect(id)
	c.deliver(nil)
}

// A directed campaign that a quarantined member refuses — no grantee, so
// no rival — still asks again the members whose refusals named the
// leader that handed over: the others make a quorum once the release
// lands. Counted as the end of its patience, the refusal failed the
// campaign and backed the target off while the cluster had no leader.
func TestDirectedCampaignWaitsOutAQuarantinedRefusal(t *testing.T) {
	c := newCluster(t, 1, 2, 3, 4, 5)
	c.elect(1)
	c.start(5, 2, testConfig(5, []edict.ProcessID{1, 2, 3, 4, 5}, nil)) // restarted: in quarantine
	require.True(t, c.cores[5].Quarantined(c.reading(5)))
	c.cores[1].Release(c.reading(1), c.cores[1].MaxLease())
	c.collect(1)
	releases := c.queue
	c.queue = nil
	c.cores[2].CampaignFor(c.reading(2), 1)
	c.collect(2)
	c.deliver(nil) // before any release: p2–p4 refuse naming p1, p5 refuses naming no one
	require.False(t, c.cores[2].IsLeader(c.reading(2)))
	require.True(t, c.cores[2].Campaigning())
	c.queue = releases
	c.deliver(nil)
	c.advance(2 * c.cores[2].RoundTrip())
	c.tick(2)
	c.deliver(nil)
	assert.True(t, c.cores[2].IsLeader(c.reading(2)), "p2 leads on p1–p4 once the release has landed")
}
