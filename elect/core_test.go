package elect

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestConfigErrorsNameTheField(t *testing.T) {
	good := testConfig(1, []edict.ProcessID{1, 2, 3}, NewLowestLive(1, []edict.ProcessID{1, 2, 3}, time.Second))
	now := edict.Time{Incarnation: 1, Nanos: 1}
	for field, mutate := range map[string]func(*Config){
		"Config.ID":            func(c *Config) { c.ID = 0 },
		"Config.Epochs":        func(c *Config) { c.Epochs = nil },
		"Config.Rho":           func(c *Config) { c.Rho = 0.7 },
		"Config.Skew":          func(c *Config) { c.Mode = BoundedSkew },
		"Config.MaxLease":      func(c *Config) { c.MaxLease = time.Millisecond },
		"Config.Detector":      func(c *Config) { c.Detector = nil },
		"Config.Rand":          func(c *Config) { c.Rand = nil },
		"Config.RoundTrip":     func(c *Config) { c.RoundTrip = -1 },
		"Config.RenewInterval": func(c *Config) { c.RenewInterval = -1 },
	} {
		cfg := good
		mutate(&cfg)
		_, err := New(cfg, nil, now)
		assert.ErrorContains(t, err, field)
	}
	_, err := New(good, []wire.EpochRecord{{Epoch: 9}}, now)
	assert.ErrorContains(t, err, "epoch 9")
}

// A leader is elected, renews, and stamps edicts whose order is the order
// of creation (§7).
func TestElectRenewAndIssue(t *testing.T) {
	c := newCluster(t, 1, 2, 3)
	c.elect(1)
	ev, ok := c.lastEvent(1, LeaseAcquired)
	require.True(t, ok)
	assert.True(t, ev.NewReign)
	require.NoError(t, ev.QT.Validate(edict.MustMajority(1, 2, 3)))

	s1, err := c.cores[1].Issue(c.reading(1))
	require.NoError(t, err)
	s2, err := c.cores[1].Issue(c.reading(1))
	require.NoError(t, err)

	// Run to the renewal point and renew.
	_, expiry, reign, ok := c.cores[1].Lease(c.reading(1))
	require.True(t, ok)
	c.now = c.cores[1].renewAt().Nanos
	c.tick(1)
	c.deliver(nil)
	ev, _ = c.lastEvent(1, LeaseAcquired)
	assert.False(t, ev.NewReign, "a renewal continues the reign")
	assert.True(t, ev.Reign.Equal(reign))
	_, expiry2, _, ok := c.cores[1].Lease(c.reading(1))
	require.True(t, ok)
	assert.True(t, expiry.Before(expiry2))

	s3, err := c.cores[1].Issue(c.reading(1))
	require.NoError(t, err)
	for _, pair := range [][2]edict.Stamp{{s1, s2}, {s2, s3}, {s1, s3}} {
		cmp, err := pair[0].Compare(pair[1])
		require.NoError(t, err)
		assert.Equal(t, -1, cmp)
	}

	// Past E_p no edict can be created (eq. 2).
	c.now = expiry2.Nanos
	_, err = c.cores[1].Issue(c.reading(1))
	assert.ErrorIs(t, err, ErrNotLeader)
}

// A granter that grants to p1 refuses p2 with a nack naming p1 and the time
// left (§10.2, §10.4).
func TestNackNamesTheGrantee(t *testing.T) {
	c := newCluster(t, 1, 2, 3)
	c.elect(1)
	c.cores[2].Campaign(c.reading(2))
	c.collect(2)
	var nacks []wire.Lease
	c.deliver(func(m wire.Lease) bool {
		if m.Type == wire.LeaseNack {
			nacks = append(nacks, m)
		}
		return true
	})
	require.NotEmpty(t, nacks)
	for _, n := range nacks {
		assert.Equal(t, edict.ProcessID(1), n.Grantee)
		assert.Positive(t, n.Remaining)
	}
	assert.True(t, c.cores[1].IsLeader(c.reading(1)), "the leader keeps its lease")
	assert.False(t, c.cores[2].IsLeader(c.reading(2)))
}

// After a restart a granter has forgotten its grants; it grants nothing
// for (1+ρ)·MaxLease (docs/protocol.md, "Clocks").
func TestRestartQuarantine(t *testing.T) {
	c := newCluster(t, 1, 2, 3)
	cfg := testConfig(3, []edict.ProcessID{1, 2, 3}, nil)
	c.start(3, 2, cfg) // incarnation 2: it has run before
	require.True(t, c.cores[3].Quarantined(c.reading(3)))
	req := wire.Lease{Type: wire.LeaseGrantRequest, From: 2, To: 3, Start: c.reading(2), Delta: 100 * time.Millisecond}
	require.NoError(t, c.cores[3].Step(c.reading(3), req))
	c.collect(3)
	require.Len(t, c.queue, 1)
	assert.Equal(t, wire.LeaseNack, c.queue[0].Type)
	c.queue = nil
	q := c.cores[3].cfg.quarantine()
	assert.Equal(t, edict.ScaleUp(c.cores[3].cfg.MaxLease, 1+c.cores[3].cfg.Rho), q)
	c.advance(q)
	req.Start = c.reading(2)
	require.NoError(t, c.cores[3].Step(c.reading(3), req))
	c.collect(3)
	require.Len(t, c.queue, 1)
	assert.Equal(t, wire.LeaseGrant, c.queue[0].Type, "quarantine over")
}

func TestRequestBeyondMaxLeaseRefused(t *testing.T) {
	c := newCluster(t, 1, 2, 3)
	req := wire.Lease{Type: wire.LeaseGrantRequest, From: 2, To: 3, Start: c.reading(2), Delta: c.cores[3].cfg.MaxLease + 1}
	require.NoError(t, c.cores[3].Step(c.reading(3), req))
	c.collect(3)
	require.Len(t, c.queue, 1)
	assert.Equal(t, wire.LeaseNack, c.queue[0].Type)
	gs, _ := c.cores[3].Grant(0)
	assert.Equal(t, edict.None, gs.Grantee)
}

// Release and revocation are ordered by the sender's readings, not by the
// network (§10.2): a stale release does not cancel a newer grant, and a
// grant request older than a revocation is not granted.
func TestReleaseAndRevocationOrderedPerSender(t *testing.T) {
	c := newCluster(t, 1, 2, 3)
	core := c.cores[3]
	stale := c.reading(2) // a release p2 sent earlier, delayed by the network
	req := wire.Lease{Type: wire.LeaseGrantRequest, From: 2, To: 3, Start: c.reading(2), Delta: 100 * time.Millisecond}
	require.NoError(t, core.Step(c.reading(3), req))
	require.NoError(t, core.Step(c.reading(3), wire.Lease{Type: wire.LeaseRelease, From: 2, To: 3, Start: stale}))
	core.Ready()
	gs, _ := core.Grant(0)
	assert.True(t, c.reading(3).Before(gs.Finish), "the stale release left the grant alone")

	revoke := c.reading(2)
	require.NoError(t, core.Step(c.reading(3), wire.Lease{Type: wire.LeaseRevoke, From: 2, To: 3, Start: revoke}))
	gs, _ = core.Grant(0)
	assert.False(t, c.reading(3).Before(gs.Finish), "the revocation expired the grant")

	core.Ready()
	old := req // the aborted attempt's request, duplicated by the network
	require.NoError(t, core.Step(c.reading(3), old))
	c.collect(3)
	assert.Empty(t, c.queue, "a request older than its sender's revocation is ignored")
	gs, _ = core.Grant(0)
	assert.False(t, c.reading(3).Before(gs.Finish))
}

// A reply to an aborted attempt never counts toward a new one.
func TestRepliesToAbortedAttemptIgnored(t *testing.T) {
	c := newCluster(t, 1, 2, 3)
	c.tick(1)
	first := c.queue
	c.queue = nil
	// The attempt gives up; a new one starts later.
	c.advance(time.Second)
	c.tick(1)
	c.queue = nil
	// Replies to the first attempt arrive now.
	for _, m := range first {
		require.NoError(t, c.cores[m.To].Step(c.reading(m.To), m))
		c.collect(m.To)
	}
	for _, m := range c.queue {
		if m.Type == wire.LeaseGrant {
			require.NoError(t, c.cores[1].Step(c.reading(1), m))
		}
	}
	assert.False(t, c.cores[1].IsLeader(c.reading(1)), "old grants completed nothing")
}

// Leader verification answers with the re-derived bound of §10.5.
func TestLeaderVerificationBound(t *testing.T) {
	c := newCluster(t, 1, 2, 3)
	c.elect(1)
	start := c.reading(2)
	c.cores[2].VerifyLeader(start, 1)
	c.collect(2)
	require.Len(t, c.queue, 1)
	verify := c.queue[0]
	c.queue = nil
	at := c.reading(1)
	require.NoError(t, c.cores[1].Step(at, verify))
	c.collect(1)
	rem := c.queue[0]
	_, expiry, _, _ := c.cores[1].Lease(at)
	left, _ := expiry.Sub(at)
	rho := c.cores[1].cfg.Rho
	assert.Equal(t, edict.Scale(left, 1/(1+rho)), rem.Delta, "δ = (E_p − C_p)/(1+ρ)")
	c.queue = nil
	require.NoError(t, c.cores[2].Step(c.reading(2), rem))
	c.collect(2)
	ev, ok := c.lastEvent(2, LeaderVerified)
	require.True(t, ok)
	assert.Equal(t, start.Add(edict.Scale(rem.Delta, 1-rho)), ev.Until, "T = Start_q + (1−ρ)·δ")
	assert.True(t, start.Before(ev.Until), "the paper's T = Start_q + δ(ρ−1) would precede Start_q")

	// A non-leader answers δ = 0 and promises nothing.
	c.cores[1].VerifyLeader(c.reading(1), 3)
	c.collect(1)
	m := c.queue[0]
	c.queue = nil
	require.NoError(t, c.cores[3].Step(c.reading(3), m))
	c.collect(3)
	assert.Zero(t, c.queue[0].Delta)
}

// The leader of epoch 0 wedges its own grantees at once (§10.6, docs/protocol.md, "Epochs and wedging");
// wedged state is persisted and further grants in epoch 0 are refused.
func TestWedgeTerminatesEpoch(t *testing.T) {
	c := newCluster(t, 1, 2, 3)
	c.elect(1)
	next := wire.EpochConfig{Epoch: 1, Members: []edict.ProcessID{1, 2, 4}}
	for _, id := range []edict.ProcessID{1, 2, 3} {
		require.NoError(t, c.cores[id].AddEpoch(next))
	}
	require.NoError(t, c.cores[1].Wedge(c.reading(1), 0))
	c.collect(1)
	assert.False(t, c.cores[1].IsLeader(c.reading(1)), "the leader gave up its lease first")
	c.deliver(nil)
	_, ok := c.lastEvent(1, EpochTerminated)
	require.True(t, ok)
	assert.True(t, c.cores[1].Terminated(0))
	assert.Equal(t, uint64(1), c.cores[1].ActiveEpoch())
	wedged := 0
	for _, id := range []edict.ProcessID{1, 2, 3} {
		for _, r := range c.stored[id] {
			if r.Epoch == 0 && r.Wedged {
				wedged++
			}
		}
	}
	assert.GreaterOrEqual(t, wedged, 2, "a quorum persisted its wedge")
	// A wedged granter refuses epoch 0 for good, across a restart too.
	c.start(2, 2, Config{ID: 2, Epochs: []wire.EpochConfig{{Epoch: 0, Members: []edict.ProcessID{1, 2, 3}}, next}, Rand: rand.New(rand.NewPCG(2, 2))})
	gs, _ := c.cores[2].Grant(0)
	assert.True(t, gs.Wedged)
}

func TestMessageValidate(t *testing.T) {
	ok := wire.Lease{Type: wire.LeaseGrantRequest, From: 1, To: 2, Delta: time.Second}
	require.NoError(t, ok.Validate())
	for want, m := range map[string]wire.Lease{
		"unknown message type":  {Type: 99, From: 1, To: 2},
		"without a sender":      {Type: wire.LeaseGrant, To: 2},
		"without a receiver":    {Type: wire.LeaseGrant, From: 1},
		"negative δ":            {Type: wire.LeaseGrant, From: 1, To: 2, Delta: -1},
		"δ = 0":                 {Type: wire.LeaseGrantRequest, From: 1, To: 2},
		"names no members":      {Type: wire.LeaseGrant, From: 1, To: 2, Newest: 3, NewestRan: true},
		"but not its members":   {Type: wire.LeaseGrant, From: 1, To: 2, Newest: 3, NewestStopIndex: 4, NewestStopStamp: edict.Stamp{Epoch: 1, Counter: 1}},
		"both or neither":       {Type: wire.LeaseGrant, From: 1, To: 2, Newest: 3, NewestMembers: []edict.ProcessID{1}, NewestStopIndex: 4},
		"are not sorted":        {Type: wire.LeaseGrant, From: 1, To: 2, Newest: 3, NewestMembers: []edict.ProcessID{2, 1}},
		"not sorted, distinct":  {Type: wire.LeaseGrant, From: 1, To: 2, Newest: 3, NewestMembers: []edict.ProcessID{1, 1}},
		"[⊥ p1] are not sorted": {Type: wire.LeaseGrant, From: 1, To: 2, Newest: 3, NewestMembers: []edict.ProcessID{0, 1}},
	} {
		assert.ErrorContains(t, m.Validate(), want)
	}
	c := newCluster(t, 1, 2, 3)
	assert.ErrorContains(t, c.cores[2].Step(c.reading(2), wire.Lease{Type: wire.LeaseGrant, From: 1, To: 3, Start: c.reading(1)}), "addressed to p3")
	assert.ErrorContains(t, c.cores[2].Step(c.reading(2), wire.Lease{Type: wire.LeaseGrantRequest, From: 9, To: 2, Start: c.reading(1), Delta: time.Second}), "p9, which is not a member of epoch 0")
}

// OQwBS (§4): the granter holds its grant until Start_p + δ + Δ, read on
// its own (synchronized) clock.
func TestBoundedSkewFinish(t *testing.T) {
	c := newCluster(t, 1, 2, 3)
	cfg := testConfig(3, []edict.ProcessID{1, 2, 3}, nil)
	cfg.Mode, cfg.Skew = BoundedSkew, 5*time.Millisecond
	c.start(3, 1, cfg)
	start := c.reading(2)
	require.NoError(t, c.cores[3].Step(c.reading(3), wire.Lease{Type: wire.LeaseGrantRequest, From: 2, To: 3, Start: start, Delta: 100 * time.Millisecond}))
	gs, _ := c.cores[3].Grant(0)
	assert.Equal(t, start.Nanos+int64(105*time.Millisecond), gs.Finish.Nanos)
}

// The stability rule (§9 prose): a process granting to another does not
// start an attempt even when its detector names it.
func TestStabilityRule(t *testing.T) {
	c := newCluster(t, 1, 2, 3)
	c.dets[2].Observe(Observation{Kind: ProcessDown, Process: 1, At: c.reading(2)})
	c.elect(1) // p2 granted to p1 while suspecting it
	c.tick(2)
	assert.Empty(t, c.queue, "p2 grants to p1, so it does not try")
}

// A renewal that falls due while other calls take readings (every Issue
// takes one) must stay visible in NextTick, or a runtime that ticks only
// when NextTick has passed never renews under a steady stream of
// proposals (found on a real cluster: the leader lost its lease).
func TestNextTickKeepsOverdueRenewal(t *testing.T) {
	c := newCluster(t, 1, 2, 3)
	c.elect(1)
	core := c.cores[1]
	c.now = core.renewAt().Nanos + int64(time.Millisecond)
	now := c.reading(1)
	_, err := core.Issue(now) // a proposal's reading, past the renewal point
	require.NoError(t, err)
	assert.False(t, now.Before(core.NextTick()), "the overdue renewal is due now, not hidden behind a later deadline")
	core.Tick(c.reading(1))
	c.collect(1)
	assert.NotNil(t, core.attempt, "ticking starts the renewal")
}

// A process that learned a newer epoch ran (from a snapshot naming it)
// and then learns the configurations of the epochs in between (applying
// the stop edicts that followed the snapshot) stays in the newer epoch:
// the ones in between terminated before it ran, and are recorded so. The
// simulator's epoch checker found the process moving back (log-replacements
// seed 392).
func TestEpochLearnedLateDoesNotMoveActiveBack(t *testing.T) {
	c := newCluster(t, 1, 2, 3)
	e4 := wire.EpochConfig{Epoch: 4, Members: []edict.ProcessID{2, 3, 4}}
	require.NoError(t, c.cores[3].AddEpoch(e4))
	require.NoError(t, c.cores[3].EpochRan(c.reading(3), 4))
	c.collect(3)
	require.Equal(t, uint64(4), c.cores[3].ActiveEpoch())
	for _, e := range []uint64{2, 3} {
		require.NoError(t, c.cores[3].AddEpoch(wire.EpochConfig{Epoch: e, Members: []edict.ProcessID{1, 2, 3, 4}}))
		assert.True(t, c.cores[3].Terminated(e), "epoch %d, learned late, is known terminated", e)
	}
	assert.Equal(t, uint64(4), c.cores[3].ActiveEpoch(), "the active epoch did not move back")
	rd := c.cores[3].Ready()
	var recorded []uint64
	for _, r := range rd.Persist {
		if r.Terminated {
			recorded = append(recorded, r.Epoch)
		}
	}
	assert.Subset(t, recorded, []uint64{2, 3}, "and it is persisted")
}

// Stats count renewals (late ones apart), grants received per peer, and
// leases lost by cause, and Event.Positions carries each granter's
// reported log position.
func TestStatsCountLeasesByCause(t *testing.T) {
	c := newCluster(t, 1, 2, 3)
	c.elect(1)
	ev, ok := c.lastEvent(1, LeaseAcquired)
	require.True(t, ok)
	assert.Len(t, ev.Positions, len(ev.QT)-1, "a position for every granter but this process")
	st := c.cores[1].Stats()
	assert.Contains(t, st.LastGrant, edict.ProcessID(2))
	// 3's grant arrived after 1 and 2 had formed the quorum: late for the
	// lease, but 3 grants, and a peer that is always the slower one must
	// not look as if it never did (CI saw /metrics miss it).
	assert.Contains(t, st.LastGrant, edict.ProcessID(3), "a grant that came after the quorum still counts")

	// A renewal more than a round trip late (and still before the lease
	// ends) counts as late.
	before := st.LastGrant[2]
	c.now = c.cores[1].renewAt().Nanos + int64(2*c.cores[1].RoundTrip())
	c.tick(1)
	c.deliver(nil)
	st = c.cores[1].Stats()
	assert.Equal(t, uint64(1), st.Renewals)
	assert.Equal(t, uint64(1), st.RenewalsLate)
	assert.True(t, before.Before(st.LastGrant[2]), "the renewal's grant shows in a later Stats (%v, then %v)", before, st.LastGrant[2])

	c.cores[1].Release(c.reading(1), time.Second)
	c.cores[1].Tick(c.reading(1))
	st = c.cores[1].Stats()
	assert.Equal(t, uint64(1), st.LostReleased)
	assert.Zero(t, st.LostExpired+st.LostSuspended)
}

// A leader that lost its lease through its own slowness — its renewal
// started late and did not complete — stands aside for MaxLease, sending
// nothing, so that its granters see the grants lapse and a healthy member
// takes over; without that evidence (its granters or the network were
// slow) it does not stand aside. Jepsen's CPU quota on the leader showed
// the old way: the renewal's grants, handled after the lease ended, made
// it try again at once, win the lease back from granters that had just
// granted to it, and lose it again — five times in three seconds.
func TestStarvedLeaderStandsAside(t *testing.T) {
	for _, late := range []bool{true, false} {
		c := newCluster(t, 1, 2, 3)
		c.elect(1)
		at := c.cores[1].renewAt().Nanos
		c.now = at
		if late {
			c.now = at + int64(2*c.cores[1].RoundTrip())
		}
		c.tick(1) // the renewal: 2 and 3 grant, but the grants reach 1 only after its lease ended
		replies := c.holdBack(func(m wire.Lease) bool { return m.To == 1 })
		c.now = c.cores[1].lease.expiry.Nanos + int64(time.Millisecond)
		c.tick(1)
		c.queue = replies
		c.deliver(nil)
		st := c.cores[1].Stats()
		require.Equal(t, uint64(1), st.LostExpired)
		if late {
			assert.Equal(t, uint64(1), st.LostLate)
		} else {
			assert.Zero(t, st.LostLate)
		}
		// Run everyone for 2·MaxLease, every process ticking each 5 ms.
		leaders := map[edict.ProcessID]bool{}
		for end := c.now + int64(2*c.cores[1].MaxLease()); c.now < end; c.advance(5 * time.Millisecond) {
			for _, id := range []edict.ProcessID{1, 2, 3} {
				c.tick(id)
				c.deliver(nil)
				if c.cores[id].IsLeader(c.reading(id)) {
					leaders[id] = true
				}
			}
		}
		if late {
			assert.Equal(t, map[edict.ProcessID]bool{2: true}, leaders, "late, 1 stands aside and 2, the lowest unsuspected, leads")
		} else {
			assert.NotEmpty(t, leaders, "on time, no standing aside: the election goes on as before")
		}
	}
}

// A renewal whose grants come back after the attempt's patience ran out
// still renews the lease: the attempt is not abandoned while the lease
// holds, the silent granters are asked again in the same instance, and
// the late grants count. Beside a disk hog, a leader whose renewals were
// each abandoned just before their grants arrived lost its lease with
// every granter answering.
func TestLateGrantsStillRenew(t *testing.T) {
	c := newCluster(t, 1, 2, 3)
	c.elect(1)
	old := c.cores[1].lease.expiry
	c.now = c.cores[1].renewAt().Nanos
	c.tick(1)
	// The granters answer; the answers are slow.
	late := c.holdBack(func(m wire.Lease) bool { return m.To == 1 && m.From != 1 })
	require.NotEmpty(t, late)
	c.now = c.cores[1].attempt.giveUp.Nanos + 1
	c.tick(1) // patience runs out: ask 2 and 3 again
	asked := 0
	for _, m := range c.queue {
		if m.Type == wire.LeaseGrantRequest && m.From == 1 && m.To != 1 {
			asked++
			assert.Equal(t, late[0].Start, m.Start, "the same instance")
		}
	}
	assert.Equal(t, 2, asked)
	assert.Equal(t, uint64(1), c.cores[1].Stats().Renewals, "one renewal, asked twice")
	c.queue = append(late, c.queue...)
	c.deliver(nil)
	assert.True(t, c.cores[1].lease.expiry.After(old), "the late grants renewed the lease")
}

// A renewal that reaches a granter after the grant it would renew lapsed
// there is not a campaign: it was sent while its sender still held the
// lease, and ending the lapse suspicion on it made a starved leader that
// had stood aside its granters' weak leader again, so that none of them
// took over and it won its lease back only to lose it again (the
// simulator's log-quota-leader, seed 460 of 500). A request sent after the
// lease those grants gave could have ended is a campaign.
func TestLateRenewalIsNoCampaign(t *testing.T) {
	c := newCluster(t, 1, 2, 3)
	c.elect(1)
	c.now = c.cores[1].renewAt().Nanos
	c.tick(1)
	var late wire.Lease
	for _, m := range c.queue {
		if m.Type == wire.LeaseGrantRequest && m.To == 2 {
			late = m
		}
	}
	require.Equal(t, wire.LeaseGrantRequest, late.Type)
	c.queue = nil // p1 starves: its renewal reaches p2 only much later
	gs, ok := c.cores[2].Grant(0)
	require.True(t, ok)
	c.now = gs.Finish.Nanos + int64(time.Millisecond)
	c.tick(2) // p2's grant to p1 lapsed: p2 suspects p1
	require.NotEqual(t, edict.ProcessID(1), c.dets[2].WeakLeader(c.reading(2)))
	require.NoError(t, c.cores[2].Step(c.reading(2), late))
	c.collect(2)
	assert.NotEqual(t, edict.ProcessID(1), c.dets[2].WeakLeader(c.reading(2)), "the late renewal ended p2's suspicion of p1")

	// Later p1 asks again, a campaign: p2 waits for it again.
	c.queue = nil
	c.advance(c.cores[1].MaxLease())
	c.cores[1].Campaign(c.reading(1))
	c.collect(1)
	c.deliver(func(m wire.Lease) bool { return m.To == 2 && m.Type == wire.LeaseGrantRequest })
	assert.Equal(t, edict.ProcessID(1), c.dets[2].WeakLeader(c.reading(2)), "a campaign ends the suspicion")
}

// A renewal that starts the moment the previous one completes is not
// late, even when its due time passed while the previous one was in
// flight: one attempt runs at a time, and slow replies are not a sign of
// this process's slowness. Counted late, they made a leader behind a slow
// network stand aside as if starved (the simulator's log-slow-replies,
// seed 203 of 500).
func TestRenewalAfterSlowRepliesIsNotLate(t *testing.T) {
	c := newCluster(t, 1, 2, 3)
	c.elect(1)
	c.now = c.cores[1].renewAt().Nanos
	c.tick(1)
	first := c.cores[1].attempt
	require.NotNil(t, first)
	held := c.queue
	c.queue = nil
	// The replies take most of the lease's lead to come back.
	c.now = c.cores[1].lease.expiry.Nanos - int64(c.cores[1].RoundTrip())
	for _, m := range held {
		require.NoError(t, c.cores[m.To].Step(c.reading(m.To), m))
		c.collect(m.To)
	}
	replies := c.queue
	c.queue = nil
	before := c.cores[1].Stats().RenewalsLate
	for _, m := range replies {
		if m.To == 1 && c.cores[1].attempt == first {
			require.NoError(t, c.cores[1].Step(c.reading(1), m))
		}
	}
	require.True(t, c.cores[1].IsLeader(c.reading(1)))
	next := c.cores[1].attempt
	require.True(t, next != nil && next != first && next.renewal, "the next renewal, due while the first was in flight, starts at once")
	assert.Equal(t, before, c.cores[1].Stats().RenewalsLate)
	assert.False(t, c.cores[1].lease.renewLate)
}
