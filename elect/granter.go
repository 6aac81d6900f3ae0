package elect

import (
	"fmt"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
)

// epochState is one epoch's granter state (A_q, F_q) and what this process
// knows of the epoch. §10.6: a process in several epochs keeps separate
// state for each.
type epochState struct {
	epoch uint64
	qs    *edict.Majority

	// grantee and finish are A_q and F_q (None is ⊥). Wedging (A_q = ⊥,
	// F_q = ∞ from then on: wedged) keeps the last grant they describe:
	// it still stands until finish, and binds this process in later
	// epochs (standing, carriedTo).
	grantee edict.ProcessID
	finish  edict.Time
	wedged  bool

	// grantStart is the latest Start_p behind the current grant; a release
	// or revocation older than it is a stale message, not the grantee's
	// latest word (§10.2's FIFO requirement, without trusting the network).
	grantStart edict.Time
	// lastGrant holds, per sender, the newest request this process
	// granted it: the gap to the sender's next renewal is a stall sample
	// (observeRenewalGap).
	lastGrant map[edict.ProcessID]lastGrant
	// retired holds, per sender, the newest release/revocation reading:
	// grant requests not newer than it were aborted by their sender.
	retired map[edict.ProcessID]edict.Time
	// leaseEnd holds, per sender, the latest Start_p+δ of a request this
	// process granted it: the end, in the sender's own clock, of any lease
	// those grants helped it hold. A request started before it is a
	// renewal, not a campaign (campaigns).
	leaseEnd map[edict.ProcessID]edict.Time

	lapseReported bool
	terminated    bool
	// heard: known only from a peer's epoch news (wire.EpochConfig.Heard);
	// no campaign in it.
	heard bool
	// runs: every epoch below this one is known TERMINATED (persisted).
	runs bool
	// stopIndex and stopStamp: wire.EpochConfig's, when known.
	stopIndex uint64
	stopStamp edict.Stamp
	// members are qs's, kept for the news emit sends.
	members []edict.ProcessID
}

func newEpochState(cfg wire.EpochConfig, qs *edict.Majority) *epochState {
	return &epochState{epoch: cfg.Epoch, qs: qs, members: qs.Members(), heard: cfg.Heard, stopIndex: cfg.StopIndex, stopStamp: cfg.StopStamp, retired: map[edict.ProcessID]edict.Time{}, leaseEnd: map[edict.ProcessID]edict.Time{}, lastGrant: map[edict.ProcessID]lastGrant{}}
}

// lastGrant is a grant this process gave: its reading when it granted
// (at), the request's Start_p (start), and the F_q the grant set (until).
type lastGrant struct{ at, start, until edict.Time }

// wedge is A_q := ⊥, F_q := ∞: no grant in this epoch from now on. The
// grant given last is kept, not cleared: its grantee may be a leader that
// carries its lease past the epoch's end (WedgeKeeping), and until the
// grant lapses this process grants in later epochs to that leader only
// (carriedTo).
func (es *epochState) wedge() { es.wedged = true }

// standing reports whether this process's last grant in the epoch, to
// grantee, still holds at now, wedged or not.
func (es *epochState) standing(now edict.Time) bool {
	return es.grantee != edict.None && now.Before(es.finish)
}

// carriedTo returns a process other than p that a grant of this process
// in an epoch before epoch still backs at now, and how long it stands:
// the grant's leader may carry its lease past that epoch's end
// (WedgeKeeping), so a grant to p in epoch could make two leaders. It is
// the granter's half of the carried lease (docs/protocol.md, "Membership
// changes that keep the leader"): with the quorums of consecutive epochs
// meeting, every quorum of the later epoch holds a granter that refuses
// all but the carrier until its grant lapses, exactly as it would within
// one epoch (step 5).
func (c *Core) carriedTo(now edict.Time, epoch uint64, p edict.ProcessID) (edict.ProcessID, time.Duration) {
	if mutated(ruleCarriedGrants) {
		return edict.None, 0
	}
	for _, es := range c.epochsInOrder() {
		if es.epoch >= epoch {
			break
		}
		if es.grantee != p && es.standing(now) {
			d, _ := es.finish.Sub(now)
			return es.grantee, d
		}
	}
	return edict.None, 0
}

// granting reports γ_{p,q}: q grants a lease to p at reading now.
func (es *epochState) granting(p edict.ProcessID, now edict.Time) bool {
	return !es.wedged && es.grantee == p && p != edict.None && now.Before(es.finish)
}

// GrantState is a granter's state in one epoch, for inspection and for the
// simulator's ground truth. Once Wedged, Grantee and Finish are the last
// grant given, which stands until Finish (it may back a lease carried past
// the epoch's end), and no grant follows it.
type GrantState struct {
	Grantee edict.ProcessID // A_q
	Finish  edict.Time      // F_q
	Wedged  bool
}

// Grant returns this process's granter state in epoch; ok is false for an
// unknown epoch.
func (c *Core) Grant(epoch uint64) (GrantState, bool) {
	es, ok := c.epochs[epoch]
	if !ok {
		return GrantState{}, false
	}
	return GrantState{Grantee: es.grantee, Finish: es.finish, Wedged: es.wedged}, true
}

func (c *Core) reply(req wire.Lease, typ wire.LeaseType, now edict.Time) wire.Lease {
	return wire.Lease{Type: typ, From: c.id, To: req.From, Epoch: req.Epoch, Start: req.Start, Wedge: req.Wedge, T: now}
}

// send delivers m: to the network, or locally when this process addresses
// itself (it is a member of its own quorums). Step uses it to dispatch
// received messages to the same handlers.
func (c *Core) send(now edict.Time, m wire.Lease) {
	if m.To != c.id {
		c.emit(m)
		return
	}
	c.deliver(now, m)
}

// deliver hands a grant-exchange message addressed to this process to its
// handler: one arriving from a peer (Step), or one this process sends
// itself, as a member of its own quorum (send).
func (c *Core) deliver(now edict.Time, m wire.Lease) {
	switch m.Type {
	case wire.LeaseGrantRequest:
		c.onGrantRequest(now, m)
	case wire.LeaseGrant, wire.LeaseNack:
		if m.Wedge {
			c.onWedgeReply(now, m)
		} else {
			c.onGrantReply(now, m)
		}
	case wire.LeaseRelease, wire.LeaseRevoke:
		c.onRelease(now, m)
	default:
		panic(fmt.Sprintf("elect: no local delivery for %v", m.Type))
	}
}

func (c *Core) nack(now edict.Time, req wire.Lease, es *epochState, grantee edict.ProcessID, remaining time.Duration) {
	n := c.reply(req, wire.LeaseNack, now)
	n.Grantee, n.Remaining, n.Wedged = grantee, max(remaining, 0), es.wedged
	c.send(now, n)
}

// onGrantRequest is steps 4–6 of OQwBD (§3) and OQwBS (§4), with the nack
// of §10.2, the restart quarantine, MaxLease, and the epoch rules of §10.6.
func (c *Core) onGrantRequest(now edict.Time, m wire.Lease) {
	es := c.epochs[m.Epoch]
	if es == nil {
		return // an epoch we have not learned of yet: the log will bring it
	}
	if m.Wedge {
		c.onWedgeRequest(now, m, es)
		return
	}
	if !es.qs.IsMember(m.From) || !es.qs.IsMember(c.id) {
		return
	}
	if m.Epoch > c.active {
		// A member of P_e asks for grants in e only once it knows e−1
		// TERMINATED (§10.6), and so may we.
		c.learnTerminated(now, m.Epoch)
	}
	if m.Epoch < c.active || es.terminated {
		c.nack(now, m, es, edict.None, 0)
		return
	}
	if !es.retired[m.From].Before(m.Start) && !es.retired[m.From].IsZero() {
		return // its sender aborted this attempt before we saw it
	}
	c.observeRenewalGap(now, m, es)
	switch {
	case c.retiring:
		// A life that ends cleanly grants nothing more, renewals
		// included, so that its last grant lapses (Retire).
		c.nack(now, m, es, edict.None, 0)
		return
	case now.Before(c.quarantineUntil) && !mutated(ruleQuarantineGrants):
		d, _ := c.quarantineUntil.Sub(now)
		c.nack(now, m, es, edict.None, d)
		return
	case m.Delta > c.cfg.MaxLease:
		c.nack(now, m, es, edict.None, 0)
		return
	case es.wedged:
		c.nack(now, m, es, edict.None, 0)
		return
	case es.grantee != m.From && now.Before(es.finish):
		// Step 5: q already grants to A_q ≠ p.
		d, _ := es.finish.Sub(now)
		c.nack(now, m, es, es.grantee, d)
		return
	}
	if g, d := c.carriedTo(now, m.Epoch, m.From); g != edict.None {
		// Step 5 across epochs: q's grant of an earlier epoch to g may
		// back a lease g carries into this one.
		c.nack(now, m, es, g, d)
		return
	}
	// Step 6.1.
	var f edict.Time
	switch c.cfg.Mode {
	case BoundedDrift:
		f = now.Add(edict.ScaleUp(m.Delta, 1+c.cfg.Rho))
	case BoundedSkew:
		f = edict.Time{Incarnation: now.Incarnation, Nanos: m.Start.Nanos}.Add(m.Delta + c.cfg.Skew)
	}
	if m.From != c.id {
		// A leader renewing, or a candidate this process backs: the
		// campaign fallback waits for it (maybeStart).
		c.leaderSeen = now
	}
	if es.grantee != m.From {
		es.grantStart = edict.Time{}
	}
	es.grantee = m.From
	if f.After(es.finish) {
		es.finish = f
	}
	if g := es.lastGrant[m.From]; m.Start.After(g.start) {
		es.lastGrant[m.From] = lastGrant{at: now, start: m.Start, until: es.finish}
	} else {
		g.until = es.finish // a copy of an older request: F_q may move, the sample's start does not
		es.lastGrant[m.From] = g
	}
	if m.Start.After(es.grantStart) {
		es.grantStart = m.Start
	}
	if end := m.Start.Add(m.Delta); end.After(es.leaseEnd[m.From]) {
		es.leaseEnd[m.From] = end
	}
	es.lapseReported = false
	if m.From != c.id {
		c.cfg.Detector.Observe(Observation{Kind: LeaderSeen, Process: m.From, At: now})
	}
	// Step 6.2, extended with T_q (§7).
	c.send(now, c.reply(m, wire.LeaseGrant, now))
}

// observeRenewalGap learns a stall from a grant request that renews a
// lease this process's grants gave: the time since it granted the
// sender's previous request, less the spacing renewals have anyway
// (renewSpacing), is how late the renewal came — the sender's stall, the
// network's, or this process's own (it reads now only when it gets to
// the message). It is this process's business because, should it lead
// next, it leads on the same host, or through the same network, as far
// as it can tell: on a host where every process waits for a CPU the next
// leader starts its reign with the lead the last one needed (leadAt).
//
// Only a request newer than the last one granted, started before the
// lease that grant helped hold ended (campaigns), arriving while that
// grant still holds here, from a sender that has not released or revoked
// since, is a sample. So a copy, a reordered or an older request, or one
// from an earlier life of its sender (its readings order below the new
// life's, and the new life's first request is a campaign), teaches
// nothing; and a gap longer than the grant — the sender renewed through
// other granters while this one was cut off, or lost the lease — is no
// stall that a lead could have covered: a sample is at most the grant's
// length, MaxLease at most, and, like any, forgotten after stallMemory.
func (c *Core) observeRenewalGap(now edict.Time, m wire.Lease, es *epochState) {
	g, ok := es.lastGrant[m.From]
	if !ok || m.From == c.id || !m.Start.After(g.start) || !now.Before(g.until) ||
		!es.retired[m.From].Before(g.start) || c.campaigns(m) {
		return
	}
	if gap, ok := now.Sub(g.at); ok && gap > c.renewSpacing() {
		c.stalls.observe(now, gap-c.renewSpacing())
	}
}

// onRelease handles a release (§6) or revocation (§10.2) from the grantee:
// the grant expires at once. F_q decreases here, which eq. 16 otherwise
// forbids; it is safe because the sender gave up its lease (E_p := C_p) or
// never had one before sending. A wedged epoch's last grant ends so too,
// which frees this process to grant to others in later epochs (carriedTo).
func (c *Core) onRelease(now edict.Time, m wire.Lease) {
	es := c.epochs[m.Epoch]
	if es == nil || !es.qs.IsMember(m.From) {
		return
	}
	if m.Start.After(es.retired[m.From]) {
		es.retired[m.From] = m.Start
	}
	if es.grantee != m.From || !m.Start.After(es.grantStart) {
		return // not the grantee, or older than the grant it would cancel
	}
	if now.Before(es.finish) {
		es.finish = now
	}
	es.lapseReported = true // given up, not lapsed: no suspicion
}

// checkLapses tells the detector about grants that expired unrenewed.
func (c *Core) checkLapses(now edict.Time) {
	for _, es := range c.epochsInOrder() {
		if es.wedged || es.lapseReported || es.grantee == edict.None || es.grantee == c.id {
			continue
		}
		if !now.Before(es.finish) {
			es.lapseReported = true
			c.cfg.Detector.Observe(Observation{Kind: LeaseLapsed, Process: es.grantee, At: now})
		}
	}
}
