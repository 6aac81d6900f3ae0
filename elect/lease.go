package elect

import (
	"errors"
	"fmt"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
)

// ErrNotLeader is returned when an edict is requested while C_p ≥ E_p.
var ErrNotLeader = errors.New("elect: not leader")

// leaseState is the leader's side: E_p, QT_p and EC_p (§2, §7).
type leaseState struct {
	epoch  uint64
	expiry edict.Time // E_p
	qt     edict.QT   // QT of the last completed instance
	reign  edict.QT   // QT of the reign's first instance
	// since is Start_p of the reign's first instance: every E_p of the
	// reign was measured on readings taken after it.
	since   edict.Time
	counter uint64 // EC_p
	lost    bool   // LeaseLost already reported for this lease
	// renewedAt is Start_p of the lease's last renewal attempt: if it is
	// before renewAt when the lease ends, the renewal that was due never
	// started (standAsideIfLate).
	renewedAt edict.Time
	// renewLate: the last renewal's first attempt started more than a
	// round trip after it was due.
	renewLate bool
	// extendedAt is the reading at which the last renewal completed. A
	// renewal that falls due while another is in flight is due only from
	// then: one attempt runs at a time.
	extendedAt edict.Time
	// dueAt is when the renewal in flight, or the last one, fell due
	// (maybeStart): the renewal lead had to cover the time from it to the
	// renewal's completion (a stall sample: complete).
	dueAt edict.Time
	// lead is this lease's renewal lead: leadAt when the lease was
	// obtained or last extended.
	lead time.Duration
	// stoodAside: this process stood aside when the lease ended
	// (standAside), once.
	stoodAside bool
}

func (l *leaseState) held() bool                { return l.qt != nil && !l.lost }
func (l *leaseState) valid(now edict.Time) bool { return l.qt != nil && now.Before(l.expiry) }

// attempt is one OQwBD (or OQwBS) instance, named by (p, Start_p).
type attempt struct {
	epoch    uint64
	start    edict.Time // Start_p
	delta    time.Duration
	deadline edict.Time // Start_p + (1−ρ)δ: completion must come before it
	giveUp   edict.Time // abort and retry after this reading
	grants   []edict.Reading
	// positions are the log positions the grants reported (Log.Durable of
	// each granter), handed to the log when the instance completes.
	positions map[edict.ProcessID]wire.Position
	refusals  int
	// rivalled: a refusal named a grant to another process, a rival
	// whose lease may outlast this attempt (a refusal without a grantee,
	// a granter in quarantine or wedging, names none).
	rivalled bool
	wait     time.Duration // longest remaining grant a nack reported
	renewal  bool
	// directed: started by Campaign, for a process chosen to lead by the
	// one that led (a transfer's target, a membership change's
	// successor); it does not yield to the detector's choice
	// (yieldCampaign).
	directed bool
	// replied: the members whose grant or nack arrived (checkAttempt asks
	// again those that did not).
	replied map[edict.ProcessID]bool
	// handedBy is the leader that handed this directed campaign over
	// (CampaignFor): a refusal naming it as grantee is its release still
	// on the way, not a rival, and the member is asked again.
	handedBy edict.ProcessID
	// reask are the members whose refusal named a grant with no more
	// than a round trip left, to be asked again at reaskAt, once it has
	// ended; reasked, those already asked so (once each).
	reask   []edict.ProcessID
	reaskAt edict.Time
	reasked map[edict.ProcessID]bool
	// Of a directed campaign: namedBy, the members whose refusal named
	// each rival; quarantined, the members that refused it from their
	// restart quarantine (a refusal naming no grantee, with time left),
	// whose own campaigns give way to this one (yieldCampaign).
	namedBy     map[edict.ProcessID][]edict.ProcessID
	quarantined map[edict.ProcessID]bool
}

// IsLeader reports C_p < E_p, which by (13) implies isLeader_p (eq. 12). The
// runtime must also consult its Clock's Suspended before trusting it.
func (c *Core) IsLeader(now edict.Time) bool { return c.lease.valid(now) }

// Lease returns the epoch, E_p and the reign of the current lease; ok is
// false when the process holds none at now.
func (c *Core) Lease(now edict.Time) (epoch uint64, expiry edict.Time, reign edict.QT, ok bool) {
	if !c.lease.valid(now) {
		return 0, edict.Time{}, nil, false
	}
	return c.lease.epoch, c.lease.expiry, c.lease.reign, true
}

// LeaseSince returns Start_p of the first lease instance of the reign this
// process leads at now: the lease's expiry was measured on this clock from
// then on, so a suspend of the host at any moment since (which the raw
// clock does not count) may have outlived it. The runtime asks its clock
// whether it was suspended since this reading, before it lets anything
// that rests on the lease happen (docs/protocol.md, "Clocks").
func (c *Core) LeaseSince(now edict.Time) (edict.Time, bool) {
	if !c.lease.valid(now) {
		return edict.Time{}, false
	}
	return c.lease.since, true
}

// Issue creates an edict stamp (§7) if and only if C_p < E_p at now (eq. 2):
// the edict is created at the moment of this reading.
func (c *Core) Issue(now edict.Time) (edict.Stamp, error) {
	c.advance(now)
	if !c.lease.valid(now) || c.carrying(now) {
		// A carried lease's epoch ended with its stop edict: nothing
		// follows it there (Stoppable Paxos).
		return edict.Stamp{}, ErrNotLeader
	}
	s := edict.Stamp{Epoch: c.lease.epoch, QT: c.lease.qt, Counter: c.lease.counter}
	c.lease.counter++
	return s, nil
}

// renewAt is when a leader starts renewing. §10.1 says before
// E_p − (1+ρ)·d; we start at least three round trips early, and RenewLead
// early (0.9 of a renewal interval by default), so that a lost message, a
// busy granter or a stall of this process costs a retry, not the lease —
// or earlier still, by as much as the stalls this process saw lately ask
// (leadAt).
func (c *Core) renewAt() edict.Time {
	return c.lease.expiry.Add(-max(c.baseLead(), c.lease.lead))
}

// baseLead is the renewal lead the configuration gives: the least lead.
func (c *Core) baseLead() time.Duration {
	return max(edict.ScaleUp(3*c.cfg.RoundTrip, 1+c.cfg.Rho), c.cfg.RenewLead)
}

// renewSpacing is how far apart renewals are with the configuration's
// lead: a lease of d+i renewed when the base lead is left (40 ms with the
// defaults), and at least a round trip.
func (c *Core) renewSpacing() time.Duration {
	return max(c.cfg.RoundTrip, c.cfg.RoundTrip+c.cfg.RenewInterval-c.baseLead())
}

// leadAt is the renewal lead of a lease obtained or extended at now: the
// base lead, or twice the longest stall seen lately (stallWindow) if that
// is longer, so that a stall as long again as the longest one lately
// still leaves the renewal time to complete; but no more than leaves
// renewSpacing within MaxLease, the longest lease there is (chooseDelta).
// Stalls are heavy-tailed on a starved host: in bench/scale's
// million-key load (three processes and the load generator on two
// cores), renewals took 7 ms at the median and 209 ms at the 99th
// percentile, and 73–86 leases were lost to stalls of 270–450 ms of a
// leader's loop or of its renewals' round trips; a lead sized to the
// typical renewal would not do, and twice the worst lately is what the
// protocol can afford. It is liveness only: the lease is at most MaxLease
// either way, and MaxLease is what granters, the restart quarantine, the
// campaign fallback and the detectors are sized for. A longer lead makes
// a longer lease, which a crashed leader's successor waits out; stalls
// are forgotten after stallMemory, so a quiet host fails over at the
// configuration's speed.
func (c *Core) leadAt(now edict.Time) time.Duration {
	base := c.baseLead()
	ceiling := c.cfg.MaxLease - c.renewSpacing()
	if mutated(ruleAdaptiveLead) {
		ceiling = base
	}
	return max(base, min(2*c.stalls.peak(now), ceiling))
}

// chooseDelta is §10.1: δ = d + max(i, (1+ρ)·(E_p − C_p)), but at least
// the renewal lead of a lease obtained now plus renewSpacing, so that a
// longer lead (leadAt) still leaves renewals renewSpacing apart rather
// than back to back; capped at MaxLease. With the base lead the second
// term is d+i, which §10.1's δ already is.
func (c *Core) chooseDelta(now edict.Time) time.Duration {
	rest := time.Duration(0)
	if c.lease.valid(now) {
		r, _ := c.lease.expiry.Sub(now)
		rest = edict.ScaleUp(r, 1+c.cfg.Rho)
	}
	delta := max(c.cfg.RoundTrip+max(c.cfg.RenewInterval, rest), c.leadAt(now)+c.renewSpacing())
	return min(delta, c.cfg.MaxLease)
}

// maybeStart applies the stability rule (docs/protocol.md, "Leases", the prose of §9): a
// leader renews whatever the detector says; a non-leader starts only if it
// is the weak leader and grants to no other process — or, the campaign
// fallback, if it has seen no leader for FallbackAfter.
//
// The fallback is for what §9's argument leaves out, a process set that
// changes: the process the detector names may not know the epoch, may not
// be a member of it, or may know it only from news (and so may not lead
// it), and then waits for nobody while everybody waits for it.
// Leases make a second candidate safe, so the fallback costs only
// contention, and rarely: FallbackAfter defaults to 4·MaxLease, beyond
// the ~3·MaxLease the detector needs to name a successor in the common
// case (a lapsed grant, MaxLease; suspicion, 2·MaxLease), so a working
// detector wins first and keeps its stability benefit. A jitter of up to
// MaxLease per member, drawn again after each fallback, lets the first
// fallback candidate finish before the next starts.
func (c *Core) maybeStart(now edict.Time) {
	es := c.epochs[c.active]
	if c.attempt != nil || c.retiring || es == nil || es.terminated || !es.qs.IsMember(c.id) || es.heard && !mutated(ruleNoCampaignHeard) {
		return
	}
	if c.successorKnown(c.active) && !c.renewEnding || c.wedges[c.active] != nil {
		return // the epoch is ending: let the lease lapse, do not renew
	}
	if c.carrying(now) {
		return // the log campaigns in the next epoch (Campaign) once it may
	}
	if c.lease.valid(now) {
		if at := c.renewAt(); !now.Before(at) {
			if c.lease.renewedAt.Before(at) {
				// The first attempt of this renewal (a retry after one
				// that failed is late by design). Did the tick that
				// should have started it come late? Then this process
				// was busy or starved (a slow disk used to do it).
				// Not before the last renewal completed: with slow
				// replies the next one can fall due while it is in
				// flight, and that is the network's doing, not this
				// process's (log-slow-replies).
				due := at
				if c.lease.extendedAt.After(due) {
					due = c.lease.extendedAt
				}
				late, _ := now.Sub(due)
				c.lease.dueAt = due
				c.lease.renewLate = late > c.cfg.RoundTrip
				if c.lease.renewLate {
					c.stats.RenewalsLate++
				}
			}
			c.lease.renewedAt = now
			c.stats.Renewals++
			c.start(now, true)
		}
		return
	}
	if now.Before(c.backoff) || es.wedged {
		return
	}
	if es.grantee != c.id && es.granting(es.grantee, now) {
		return
	}
	if c.cfg.Detector.WeakLeader(now) != c.id {
		if now.Before(c.fallbackAt()) || mutated(ruleCampaignFallback) {
			return
		}
		c.leaderSeen = now // the next fallback waits a whole FallbackAfter again
		c.drawFallbackJitter()
	}
	c.start(now, false)
}

// yieldCampaign gives up this process's campaign when a campaign of
// another, m, makes the detector name that other instead: the stability
// rule's "only as weak leader", kept while the attempt is in flight. It
// runs before m is answered, so the grant this process gave itself is
// revoked and m is granted, not refused. Without it, two members that
// each campaigned on the same lapse — each naming itself because it had
// not heard the other lately (followers rarely talk to each other) — each
// refused the other, and each refusal, naming its sender as the grantee,
// made the other take it for the leader for a lease (the detector's
// hint): a dead leader's successor then waited out its lease, that second
// lease, and a tick of up to RenewInterval (docs/benchmarks.md, "Failover
// after a SIGKILL"). Liveness only: an attempt given up
// this way is an attempt that failed (fail: its grants revoked, back-off),
// which the protocol allows at any time; a renewal, or a process that
// leads, never yields. Two candidates whose detectors each name the other
// both yield and back off with jitter, and the first to retry is granted.
// Nor does a campaign started by Campaign: the leader that handed over
// chose its candidate, and knows its log better than any detector. A
// membership change's successor yielded to the lowest id of the new
// epoch, which its detector named, restarted and in quarantine: neither
// won, and the new epoch waited out the grants of both (the simulator's
// log-membership-keep-faults, seed 345 of 500).
//
// A candidate in its restart quarantine gives way to any other member's
// campaign: it cannot grant itself, so it needs a quorum of the others,
// and beside a candidate that can count its own grant it only holds
// grants that one needs. Giving up, it revokes them (fail, and
// onGrantReply for those still on their way), and a directed campaign
// asks their granters again (onGrantReply). Two candidates in quarantine
// both give way and back off; the rule ends with the quarantine.
func (c *Core) yieldCampaign(now edict.Time, m wire.Lease) {
	a := c.attempt
	if a == nil || a.renewal || a.directed || a.epoch != m.Epoch || c.lease.valid(now) {
		return
	}
	if c.cfg.Detector.WeakLeader(now) == m.From || c.Quarantined(now) && !mutated(ruleQuarantinedYields) {
		c.fail(now)
	}
}

// fallbackAt is when maybeStart's campaign fallback is due.
func (c *Core) fallbackAt() edict.Time {
	return c.leaderSeen.Add(c.cfg.FallbackAfter + c.fallbackJitter)
}

func (c *Core) drawFallbackJitter() {
	c.fallbackJitter = time.Duration(c.cfg.Rand.Int64N(int64(c.cfg.MaxLease) + 1))
}

// LeaderHeard records that p led a moment ago: the log accepted an
// append of p's reign at now. The detector hears of p, and the campaign
// fallback (maybeStart) counts a leader at work, as it does a grant this
// process gives. Lease messages alone leave a learner, which grants
// nothing and is asked for nothing, knowing of no leader at work:
// promoted, it fell back at once and campaigned in its first epoch as a
// member against the leader that had just promoted it, and both
// campaigns failed (the simulator's log-membership-keep, seed 122 of
// 500). Liveness only: what the detector names and when the fallback
// fires decide only who campaigns, and when.
func (c *Core) LeaderHeard(now edict.Time, p edict.ProcessID) {
	if p == c.id {
		return
	}
	if now.After(c.leaderSeen) {
		c.leaderSeen = now
	}
	c.cfg.Detector.Observe(Observation{Kind: Heard, Process: p, At: now})
	c.cfg.Detector.Observe(Observation{Kind: LeaderSeen, Process: p, At: now})
}

// RenewWhileEnding tells a leader whose epoch is ending (its successor
// is known: AddEpoch) whether to go on renewing its lease until it wedges
// the epoch. By default it does not: the lease lapses, and the next
// epoch's members can wedge the old one without it. The log asks for
// renewals while the next epoch's members it hears from form a quorum of
// that epoch, so that one of them still catching up (a snapshot, a slow
// disk) does not cost the cluster its leader; it lets the lease lapse
// when they do not, since they may be cut off from it but not from each
// other. Liveness only: a renewal in an epoch that has not terminated is
// the lease protocol's own. AddEpoch clears it.
func (c *Core) RenewWhileEnding(on bool) { c.renewEnding = on }

// Campaigning reports whether an attempt at a new lease (not a renewal)
// is in flight.
func (c *Core) Campaigning() bool { return c.attempt != nil && !c.attempt.renewal }

// Campaign starts an attempt at once, bypassing the detector and back-off
// but not the stability rule's safety parts: it is how a leadership
// transfer's target takes over (docs/protocol.md, "The replicated log").
func (c *Core) Campaign(now edict.Time) { c.CampaignFor(now, edict.None) }

// CampaignFor is Campaign for a process that leader handed leadership
// over to (TimeoutNow): leader released its lease before it handed over,
// so a member's refusal naming leader as its grantee means the release
// has not reached that member yet — a release and the hand-over need not
// arrive in the order they left — and the member is asked again in the
// same instance after the patience, rather than counted as refusing.
// Liveness only: asking again is a copy of the request, and a grant is
// still given only by a granter free to give it.
func (c *Core) CampaignFor(now edict.Time, leader edict.ProcessID) {
	c.advance(now)
	// A lease that ended is reported first, so that its standing aside
	// (standAsideIfLate) comes before this campaign, which overrides it,
	// rather than after, cancelling it.
	c.checkLease(now)
	es := c.epochs[c.active]
	if es == nil || c.retiring || !es.qs.IsMember(c.id) || c.lease.valid(now) && !(c.carrying(now) && c.lease.epoch < c.active) || es.heard && !mutated(ruleNoCampaignHeard) {
		return
	}
	// Supersede, do not revoke: a revocation stamped now would also
	// cancel the new attempt's requests, which carry the same reading.
	c.attempt = nil
	c.backoff = edict.Time{}
	a := &attempt{directed: true}
	if leader != c.id && !mutated(ruleHandOverRelease) {
		a.handedBy = leader
	}
	c.startAttempt(now, a)
}

// start is steps 1–3: sample Start_p, choose δ, broadcast.
func (c *Core) start(now edict.Time, renewal bool) {
	c.startAttempt(now, &attempt{renewal: renewal})
}

// startAttempt is start for an attempt whose kind (renewal, directed,
// handedBy) is set: set before the broadcast, since this process's own
// reply is delivered within it.
func (c *Core) startAttempt(now edict.Time, a *attempt) {
	delta := c.chooseDelta(now)
	a.epoch, a.start, a.delta = c.active, now, delta
	switch c.cfg.Mode {
	case BoundedDrift:
		a.deadline = now.Add(edict.Scale(delta, 1-c.cfg.Rho))
	case BoundedSkew:
		a.deadline = now.Add(delta)
	}
	a.giveUp = c.patience(now, a)
	c.attempt = a
	for _, q := range c.epochs[a.epoch].qs.Members() {
		c.send(now, wire.Lease{Type: wire.LeaseGrantRequest, From: c.id, To: q, Epoch: a.epoch, Start: now, Delta: delta})
	}
}

// onGrantReply is steps 7–8 for one ok or nack.
func (c *Core) onGrantReply(now edict.Time, m wire.Lease) {
	a := c.attempt
	if a == nil || m.Epoch != a.epoch || m.Start != a.start && !mutated(ruleReplyAttempt) {
		if d := c.completed; m.Type == wire.LeaseGrant && d != nil && m.Epoch == d.epoch && m.Start == d.start &&
			c.epochs[d.epoch] != nil && c.epochs[d.epoch].qs.IsMember(m.From) {
			c.noteGrant(now, m.From) // late for the quorum, but a grant
		} else if f := c.failed; m.Type == wire.LeaseGrant && f != nil && m.Epoch == f.epoch && m.Start == f.start &&
			a == nil && !c.lease.valid(now) && c.Quarantined(now) && !mutated(ruleRevokeLateGrants) {
			// A grant to the attempt fail gave up in quarantine (it gave
			// way to another's campaign, yieldCampaign), which fail could
			// not revoke with the others because it had not come yet:
			// revoke it now, so that the granter is free for the campaign
			// it gave way to instead of holding the grant for its whole
			// length. Only with no attempt and no lease under way: a
			// later attempt's grant from the same member, or a lease it
			// backs, would go with it. Not outside quarantine: a grant
			// left to lapse makes its granter suspect a candidate that
			// failed (LeaseLapsed), a revoked one does not, and the
			// detectors would go on naming it.
			c.send(now, wire.Lease{Type: wire.LeaseRevoke, From: c.id, To: m.From, Epoch: m.Epoch, Start: now})
		}
		return // a reply to an aborted, superseded or completed instance
	}
	qs := c.epochs[a.epoch].qs
	if !qs.IsMember(m.From) {
		return
	}
	for _, r := range a.grants {
		if r.Process == m.From {
			return // duplicate
		}
	}
	if a.replied == nil {
		a.replied = map[edict.ProcessID]bool{}
	}
	if m.Type == wire.LeaseNack && a.replied[m.From] {
		return // a member refuses once per instance, however often asked
	}
	a.replied[m.From] = true
	if m.Type == wire.LeaseNack && a.handedBy != edict.None && m.Grantee == a.handedBy {
		// The leader that handed over gave its lease up before it did
		// (its release, sent first, may come after its hand-over and
		// this request): ask again at the patience, not a refusal.
		delete(a.replied, m.From)
		if at := now.Add(edict.ScaleUp(c.cfg.RoundTrip, 1+c.cfg.Rho)); at.Before(a.giveUp) {
			a.giveUp = at
		}
		return
	}
	if m.Type == wire.LeaseNack && a.directed && !mutated(ruleDirectedOverQuarantined) {
		switch {
		case m.Grantee == edict.None && m.Remaining > 0:
			// m.From is in its restart quarantine: a campaign of its own
			// gives way to this one when this request reaches it
			// (yieldCampaign) and revokes its grants, late ones too. The
			// members that refused this campaign for it are asked again
			// after a round trip. Its own refusal counts.
			if a.quarantined == nil {
				a.quarantined = map[edict.ProcessID]bool{}
			}
			a.quarantined[m.From] = true
			if refusers := a.namedBy[m.From]; len(refusers) > 0 {
				for _, q := range refusers {
					a.refusals--
					delete(a.replied, q)
				}
				delete(a.namedBy, m.From)
				a.rivalled = len(a.namedBy) > 0
				c.askAgainSoon(now, a)
			}
		case m.Grantee != edict.None && m.Grantee != c.id && a.quarantined[m.Grantee] && !a.reasked[m.From]:
			delete(a.replied, m.From)
			if a.reasked == nil {
				a.reasked = map[edict.ProcessID]bool{}
			}
			a.reasked[m.From] = true
			c.askAgainSoon(now, a)
			return
		}
	}
	if m.Type == wire.LeaseNack && c.lapsing(a, m) {
		// The grant this member refused for ends within a round trip:
		// most often a dead leader's, which this member dated from a
		// later reading than this process did. Ask it again once that
		// grant has ended (a copy of the request, in the same instance),
		// rather than wait out the patience for the dead leader's answer
		// and back off for up to RenewInterval while the member waits for
		// this campaign. Liveness only: the member still grants only if
		// it is free to.
		delete(a.replied, m.From)
		if a.reasked == nil {
			a.reasked = map[edict.ProcessID]bool{}
		}
		a.reasked[m.From] = true
		a.reask = append(a.reask, m.From)
		// Not before a round trip from the attempt's start, by when a
		// rival's refusal has come back (then the refusals count after
		// all: the candidates back off, and the first to retry wins).
		at := now.Add(edict.ScaleUp(m.Remaining, (1+c.cfg.Rho)/(1-c.cfg.Rho)))
		if first := a.start.Add(edict.ScaleUp(c.cfg.RoundTrip, 1+c.cfg.Rho)); at.Before(first) {
			at = first
		}
		if at.After(a.reaskAt) {
			a.reaskAt = at
		}
		if a.reaskAt.Before(a.giveUp) {
			a.giveUp = a.reaskAt
		}
		return
	}
	if m.Type == wire.LeaseNack {
		a.refusals++
		a.wait = max(a.wait, m.Remaining)
		if m.Grantee != edict.None && m.Grantee != c.id {
			a.rivalled = true
			if a.directed {
				if a.namedBy == nil {
					a.namedBy = map[edict.ProcessID][]edict.ProcessID{}
				}
				a.namedBy[m.Grantee] = append(a.namedBy[m.Grantee], m.From)
			}
			c.cfg.Detector.Observe(Observation{Kind: LeaderSeen, Process: m.Grantee, At: now})
			for _, q := range a.reask {
				a.refusals++
				a.replied[q] = true
			}
			a.reask = nil
		}
		if len(qs.Members())-a.refusals < quorumFloor(qs) {
			c.fail(now)
		}
		return
	}
	a.grants = append(a.grants, edict.Reading{Process: m.From, T: m.T})
	c.noteGrant(now, m.From)
	if m.From != c.id {
		if a.positions == nil {
			a.positions = map[edict.ProcessID]wire.Position{}
		}
		a.positions[m.From] = wire.Position{Index: m.LastIndex, Stamp: m.LastStamp}
	}
	qt, err := edict.NewQT(a.grants...)
	if err != nil {
		panic(fmt.Sprintf("elect: own grants form a malformed QT: %v", err))
	}
	if !qs.IsQuorum(qt.Processes()) || !now.Before(a.deadline) {
		return
	}
	c.complete(now, a, qt)
}

// noteGrant records for Stats that from granted to this process at now.
func (c *Core) noteGrant(now edict.Time, from edict.ProcessID) {
	if c.stats.LastGrant == nil {
		c.stats.LastGrant = map[edict.ProcessID]edict.Time{}
	}
	c.stats.LastGrant[from] = now
	c.lastGrant = nil // Stats copies the map again
}

// quorumFloor is the fewest processes that can form a quorum: a lower
// bound used only to give up early, so an overestimate is harmless.
func quorumFloor(qs edict.QuorumSystem) int {
	ms := qs.Members()
	for k := 1; k <= len(ms); k++ {
		if qs.IsQuorum(ms[:k]) {
			return k
		}
	}
	return len(ms) + 1
}

// complete is step 8: E_p := Start_p + (1−ρ)δ (or + δ under OQwBS).
func (c *Core) complete(now edict.Time, a *attempt, qt edict.QT) {
	c.attempt = nil
	c.completed = a
	if a.renewal && !c.lease.dueAt.IsZero() {
		// From due to done, in time or not: what the lead had to cover
		// this time (bounded by the attempt's deadline, about a lease).
		if d, ok := now.Sub(c.lease.dueAt); ok {
			c.stalls.observe(now, d)
		}
	}
	wasLeader := c.lease.valid(now) && c.lease.epoch == a.epoch
	if !wasLeader && c.lease.qt != nil && a.start.Before(c.lease.expiry) && c.lease.epoch == a.epoch {
		// Started while leader, completed after the lease lapsed: it can
		// neither continue the reign nor start one (docs/protocol.md, "The replicated log"). Try
		// again, unless this process is standing aside (standAsideIfLate):
		// then its grants run out at their granters, who see the lapse.
		// The end is reported first: a process starved through its
		// lease's end handles what waited (these grants) before its tick.
		// That its renewal's grants came back too late to keep the lease
		// is itself evidence of its slowness.
		c.checkLease(now)
		c.standAside(now)
		if now.Before(c.backoff) {
			return
		}
		c.start(now, false)
		return
	}
	c.leaderSeen = now
	if wasLeader {
		if a.deadline.After(c.lease.expiry) {
			c.lease.expiry = a.deadline
		}
		c.lease.qt = qt
		c.lease.extendedAt = now
		c.lease.lead = c.leadAt(now)
	} else {
		// A carried lease ends here, replaced by this one: its grants
		// are given back, so that they hold no granter of a later epoch
		// back (carriedTo) should this process lose the new lease or
		// hand it over; a release lost on the way is given again by the
		// next Release.
		c.releaseCarried(now)
		c.carryInto = 0
		c.lease = leaseState{epoch: a.epoch, expiry: a.deadline, qt: qt, reign: qt, since: a.start, counter: c.lease.counter, lead: c.leadAt(now)}
	}
	c.event(Event{Kind: LeaseAcquired, Epoch: a.epoch, QT: qt, Reign: c.lease.reign, NewReign: !wasLeader, Expiry: c.lease.expiry, Start: a.start, Leader: c.id, Positions: a.positions})
}

// patience is when an attempt started (or asked again) at now stops
// waiting for its replies. Give up early only when replies are clearly
// lost: a slow round trip (a granter in an fsync) must not abort attempt
// after attempt.
func (c *Core) patience(now edict.Time, a *attempt) edict.Time {
	at := now.Add(edict.ScaleUp(max(4*c.cfg.RoundTrip, a.delta/4), 1+c.cfg.Rho))
	if at.After(a.deadline) {
		return a.deadline
	}
	return at
}

// checkAttempt gives up an attempt that has not completed in time — but
// not a renewal while the lease holds. Its replies are more likely late
// than lost (granters on a loaded host, behind their appends), and a new
// attempt would throw away the grants on their way: a leader beside a
// disk hog lost its lease so, each renewal aborted before its grants came
// back. It asks again the members that have not answered, in the same
// instance (p, Start_p) — a granter answers it as it would a copy the
// network made, which the protocol already tolerates — and waits again.
// The lease's end, or enough refusals, still end it (fail).
//
// A directed campaign (Campaign: a transfer's target, a membership
// change's successor) that no refusal showed a rival waits the same way,
// until its deadline. Its grants are as likely late as a renewal's — each
// granter of a new epoch makes the old one's termination durable before
// it answers — and it has no rival to make room for: giving up would
// leave the epoch leaderless for a back-off of up to RenewInterval and a
// second attempt. A refusal that names no grantee (a granter in
// quarantine after a restart) leaves the others to make a quorum, which
// enough such refusals rule out at once (onGrantReply). A refusal that
// names a grant to another may outlast the deadline; then the back-off
// past it (fail) is the way to win.
func (c *Core) checkAttempt(now edict.Time) {
	a := c.attempt
	if a == nil || now.Before(a.giveUp) {
		return
	}
	if len(a.reask) > 0 && !now.Before(a.reaskAt) && now.Before(a.deadline) {
		for _, q := range a.reask {
			c.send(now, wire.Lease{Type: wire.LeaseGrantRequest, From: c.id, To: q, Epoch: a.epoch, Start: a.start, Delta: a.delta})
		}
		a.reask = a.reask[:0]
		a.giveUp = c.patience(now, a)
		return
	}
	renewing := a.renewal && c.lease.valid(now) && !mutated(ruleRenewalPatience)
	if (renewing || a.directed && !a.rivalled && !mutated(ruleDirectedPatience)) && now.Before(a.deadline) {
		for _, q := range c.epochs[a.epoch].qs.Members() {
			if !a.replied[q] {
				c.send(now, wire.Lease{Type: wire.LeaseGrantRequest, From: c.id, To: q, Epoch: a.epoch, Start: a.start, Delta: a.delta})
			}
		}
		a.giveUp = c.patience(now, a)
		return
	}
	c.fail(now)
}

// askAgainSoon brings a's patience forward to a round trip from now, when
// checkAttempt asks the members that have not answered again.
func (c *Core) askAgainSoon(now edict.Time, a *attempt) {
	if at := now.Add(edict.ScaleUp(c.cfg.RoundTrip, 1+c.cfg.Rho)); at.Before(a.giveUp) {
		a.giveUp = at
	}
}

// lapsing reports whether m, a refusal of attempt a, names a grant to
// another process that ends within a round trip, from a member not yet
// asked again for it (onGrantReply asks it again once the grant ended).
// A rival's campaign or a live leader's renewal leaves its granters a
// whole lease, not a round trip; a renewal of this process's own lease
// waits for its answers anyway (checkAttempt).
func (c *Core) lapsing(a *attempt, m wire.Lease) bool {
	return !a.renewal && !a.rivalled && m.Grantee != edict.None && m.Grantee != c.id && m.Remaining <= c.cfg.RoundTrip &&
		!a.reasked[m.From] && !mutated(ruleAskAfterLapse)
}

// fail aborts the attempt. A process without a lease revokes the grants it
// collected (§10.2) so other candidates need not wait them out, and backs
// off: past the longest grant a nack reported, plus jitter.
func (c *Core) fail(now edict.Time) {
	a := c.attempt
	if a == nil {
		return
	}
	c.attempt = nil
	if c.lease.valid(now) && c.lease.epoch == a.epoch {
		return // a renewal: maybeStart retries at once, the old grants stand
	}
	for _, r := range a.grants {
		c.send(now, wire.Lease{Type: wire.LeaseRevoke, From: c.id, To: r.Process, Epoch: a.epoch, Start: now})
	}
	c.failed = a
	wait := edict.ScaleUp(a.wait, (1+c.cfg.Rho)/(1-c.cfg.Rho))
	jitter := c.cfg.RoundTrip + time.Duration(c.cfg.Rand.Int64N(int64(c.cfg.RenewInterval)+1))
	c.backoff = now.Add(wait + jitter)
}

// checkLease reports the end of a lease.
func (c *Core) checkLease(now edict.Time) {
	if c.lease.held() && !c.lease.valid(now) {
		if c.releaseCause != nil {
			*c.releaseCause++
		} else {
			c.stats.LostExpired++
			c.standAsideIfLate(now)
		}
		c.lease.lost = true
		c.event(Event{Kind: LeaseLost, Epoch: c.lease.epoch, Leader: c.id})
	}
}

// standAsideIfLate keeps a leader whose lease ran out through its own
// slowness out of the next election for MaxLease. The evidence is local:
// its last renewal started more than a round trip late, or the one due
// never started, or it noticed the end more than a round trip late — its
// ticks came late, so it was busy or starved (a CPU quota, a stalled
// host) — or the renewal's grants, asked for RenewLead before the end,
// came back only after it. (A renewal whose grants never come — a
// partition — is not evidence: the process seeks the lease again as
// before.) Campaigning again at once, as it otherwise would (it is still
// its own weak leader, and its request is a campaign, which ends the
// granters' suspicion), wins the lease back only to lose it again: under
// a CPU quota a leader lost it five times in three seconds in Jepsen, each
// loss leaving its clients' writes unknown. Standing aside, it sends
// nothing: the granters' grants to it run out unrenewed, their detectors
// suspect it (LeaseLapsed), and a healthy member takes over. A renewal in
// flight is dropped, not revoked: a granter takes a revoked grant as given
// up, not lapsed, and would suspect nothing. If no one else leads by
// then, it campaigns again, so this delays an election by at most MaxLease
// and never prevents one. Alone in its quorum system it has no one to
// stand aside for. Safety does not depend on it: it only holds back this
// process's own attempts (Campaign, a transfer's, still goes ahead).
func (c *Core) standAsideIfLate(now edict.Time) {
	if c.successorKnown(c.lease.epoch) || c.wedges[c.lease.epoch] != nil {
		return // the epoch is ending: the lease was let lapse
	}
	noticed, _ := now.Sub(c.lease.expiry)
	if c.lease.renewLate || c.lease.renewedAt.Before(c.renewAt()) || noticed > c.cfg.RoundTrip {
		c.standAside(now)
	}
}

// standAside is standAsideIfLate's action, once per lease.
func (c *Core) standAside(now edict.Time) {
	if c.lease.stoodAside || mutated(ruleStandAside) {
		return
	}
	if es := c.epochs[c.lease.epoch]; es == nil || len(es.qs.Members()) < 2 {
		return
	}
	c.lease.stoodAside = true
	c.stats.LostLate++
	c.attempt = nil
	if until := now.Add(c.cfg.MaxLease); c.backoff.Before(until) {
		c.backoff = until
	}
}

// Release gives up leadership and this process's grants (§6): abort any
// attempt, E_p := C_p, and ask every granter to expire its grant. The
// process then stays out of the race for holdOff, so that another (a
// transfer target, or the weak leader after a shutdown) can win.
func (c *Core) Release(now edict.Time, holdOff time.Duration) {
	c.release(now, holdOff, &c.stats.LostReleased)
}

// ReleaseSuspended is Release for a lease this process gives up because
// its host was suspended while it led (the runtime's clock says so): the
// lease may have outlived the grants behind it. Stats count it apart.
func (c *Core) ReleaseSuspended(now edict.Time, holdOff time.Duration) {
	c.release(now, holdOff, &c.stats.LostSuspended)
}

func (c *Core) release(now edict.Time, holdOff time.Duration, cause *uint64) {
	c.advance(now)
	c.attempt = nil
	// A lease carried into the active epoch rests on grants of the epoch
	// before, which the active epoch's release below does not reach.
	c.releaseCarried(now)
	if c.lease.valid(now) {
		c.lease.expiry = now
	}
	c.releaseCause = cause
	c.checkLease(now)
	c.releaseCause = nil
	es := c.epochs[c.active]
	if es != nil && es.qs.IsMember(c.id) {
		for _, q := range es.qs.Members() {
			c.send(now, wire.Lease{Type: wire.LeaseRelease, From: c.id, To: q, Epoch: c.active, Start: now})
		}
	}
	c.backoff = now.Add(holdOff)
}

// carriedGrants are the grants of the epoch whose lease this process
// carried into the next one (WedgeKeeping), and when that lease would
// have ended: until then they may still stand.
type carriedGrants struct {
	epoch uint64
	until edict.Time
}

// releaseCarried asks the granters of a lease this process carries, or
// carried and replaced since, to expire their grants, if those may still
// stand: the active epoch's release does not reach them, and until they
// lapse they hold the next epoch's granters back from anyone else
// (carriedTo) — the member a leader that removed itself hands the epoch
// over to included. Call it before the carried lease is given up or
// replaced.
func (c *Core) releaseCarried(now edict.Time) {
	if c.carrying(now) {
		c.carried = carriedGrants{epoch: c.lease.epoch, until: c.lease.expiry}
	}
	cg := c.carried
	es := c.epochs[cg.epoch]
	if es == nil || cg.epoch == c.active || !now.Before(cg.until) || !es.qs.IsMember(c.id) {
		return
	}
	for _, q := range es.qs.Members() {
		c.send(now, wire.Lease{Type: wire.LeaseRelease, From: c.id, To: q, Epoch: cg.epoch, Start: now})
	}
}

// MaxLease is the configured bound on δ.
func (c *Core) MaxLease() time.Duration { return c.cfg.MaxLease }

// RoundTrip is the configured round-trip estimate d of §10.1.
func (c *Core) RoundTrip() time.Duration { return c.cfg.RoundTrip }

// stallMemory is how long a stall keeps the renewal lead up (leadAt), at
// least: a busy period on a shared host lasts minutes, and a lead that
// fell back between its stalls would lose the lease to each of them. A
// crashed leader's successor waits out a longer lease meanwhile, so not
// longer: once the stalls stop, the lead is the configuration's again
// within 2·stallMemory.
const stallMemory = 30 * time.Second

// stallWindow is the longest stall observed in the last stallMemory to
// 2·stallMemory: the longest of the current bucket and the one before.
// It keeps two durations, whatever the number of samples.
type stallWindow struct {
	start     edict.Time // of the current bucket
	cur, prev time.Duration
}

func (w *stallWindow) observe(now edict.Time, d time.Duration) {
	age, ok := now.Sub(w.start)
	switch {
	case !ok || w.start.IsZero() || age >= 2*stallMemory:
		w.start, w.cur, w.prev = now, 0, 0
	case age >= stallMemory:
		w.start, w.cur, w.prev = w.start.Add(stallMemory), 0, w.cur
	}
	w.cur = max(w.cur, d)
}

// peak is the longest stall in the window as of now.
func (w *stallWindow) peak(now edict.Time) time.Duration {
	age, ok := now.Sub(w.start)
	switch {
	case !ok || w.start.IsZero() || age >= 2*stallMemory:
		return 0
	case age >= stallMemory:
		return w.cur
	}
	return max(w.cur, w.prev)
}
