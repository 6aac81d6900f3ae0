package elect

import (
	"fmt"
	"slices"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
)

// wedging is an attempt to terminate an epoch by wedging a set of its
// members that meets every quorum with grantRequest(⊥, ∞) (§10.6).
type wedging struct {
	epoch   uint64
	start   edict.Time
	wedged  []edict.ProcessID
	retryAt edict.Time
}

// AddEpoch makes a new epoch's configuration known (the log delivers it in
// a committed stop edict). The epoch's quorums are the majorities of its
// Members; its Learners are not counted. Heard marks a configuration known
// only from a peer's word (wire.EpochConfig.Heard); the same epoch added
// again without it lifts the mark. The epoch stays PENDING for this process until
// it learns that its predecessor TERMINATED. A leader of the predecessor
// stops renewing from now on, its epoch ending, unless the log asks it to
// go on (RenewWhileEnding).
func (c *Core) AddEpoch(cfg wire.EpochConfig) error {
	if old, ok := c.epochs[cfg.Epoch]; ok {
		if !slices.Equal(old.members, cfg.Members) {
			return fmt.Errorf("elect: epoch %d already known with members %v, not %v", cfg.Epoch, old.members, cfg.Members)
		}
		if !cfg.Heard {
			old.heard = false // the log now holds the stop edict that began it
		}
		if old.stopIndex == 0 && cfg.StopIndex != 0 {
			old.stopIndex, old.stopStamp = cfg.StopIndex, cfg.StopStamp
		}
		return nil
	}
	if err := c.addEpoch(cfg); err != nil {
		return err
	}
	c.renewEnding = false
	defer c.moveOverGap()
	if es := c.epochs[cfg.Epoch]; cfg.Epoch < c.active {
		// Learned late: a process that installed a snapshot naming a newer
		// epoch applies, after it, the stop edicts that began the epochs
		// in between. An epoch below the active one has terminated — the
		// active one ran only after its predecessors terminated (§10.6) —
		// and knowing it must not move this process back into it.
		es.terminated = true
		c.persist(es)
	}
	return nil
}

func (c *Core) successorKnown(epoch uint64) bool {
	for e := range c.epochs {
		if e > epoch {
			return true
		}
	}
	return false
}

// EpochKnown reports whether this process knows the configuration of epoch.
func (c *Core) EpochKnown(epoch uint64) bool { _, ok := c.epochs[epoch]; return ok }

// Terminated reports whether this process knows epoch TERMINATED.
func (c *Core) Terminated(epoch uint64) bool {
	es, ok := c.epochs[epoch]
	return ok && es.terminated
}

// Wedge starts terminating epoch: grantRequest(⊥, ∞) to each of its
// members, retried until the wedged members meet every quorum (blocking). A leader of the epoch first
// gives up its lease (E_p := C_p), which lets its own grantees wedge at
// once instead of waiting the lease out (docs/protocol.md, "Epochs and wedging").
func (c *Core) Wedge(now edict.Time, epoch uint64) error {
	c.advance(now)
	es, ok := c.epochs[epoch]
	if !ok {
		return fmt.Errorf("elect: wedge of unknown epoch %d", epoch)
	}
	if es.terminated || c.wedges[epoch] != nil {
		return nil
	}
	if c.lease.valid(now) && c.lease.epoch == epoch && c.carryInto != epoch+1 {
		c.lease.expiry = now
		c.checkLease(now)
	}
	if c.attempt != nil && c.attempt.epoch == epoch {
		c.attempt = nil
	}
	w := &wedging{epoch: epoch}
	c.wedges[epoch] = w
	c.sendWedges(now, w)
	return nil
}

// WedgeKeeping is Wedge for a leader of epoch that leads the epoch after
// it next (a membership change that keeps the leader, docs/protocol.md):
// it keeps its lease, which stays valid after epoch terminates, until the
// lease ends or this process's lease in the next epoch replaces it. Its
// own granters wedge at once all the same, since they grant to it. While
// it carries the lease it issues no edict of the ended epoch (Issue) and
// renews nothing; it campaigns in the next epoch (Campaign) once the old
// one terminated.
//
// It keeps the lease only if this process is a member of epoch+1 and
// every quorum of epoch+1 meets every quorum of epoch (one member added
// or removed): then every quorum that could grant another process a lease
// in epoch+1 holds a granter of this lease, which refuses anyone else
// until its grant lapses (carriedTo). Otherwise, or if it holds no lease
// in epoch, it does nothing and reports false: the caller gives the lease
// up (Release) and wedges.
func (c *Core) WedgeKeeping(now edict.Time, epoch uint64) (bool, error) {
	c.advance(now)
	es, next := c.epochs[epoch], c.epochs[epoch+1]
	keep := es != nil && next != nil && c.lease.valid(now) && c.lease.epoch == epoch && !es.terminated &&
		next.qs.IsMember(c.id) && quorumsMeet(es.members, next.members)
	if !keep {
		return false, nil
	}
	c.carryInto = epoch + 1
	return true, c.Wedge(now, epoch)
}

// carrying reports whether this process holds, at now, a lease it carries
// past the end of its epoch (WedgeKeeping): from the wedge on, whether or
// not the epoch is known terminated yet.
func (c *Core) carrying(now edict.Time) bool {
	return c.lease.valid(now) && c.lease.epoch+1 == c.carryInto
}

// Carrying reports whether this process leads at now on a lease it
// carries past its epoch's end (WedgeKeeping), its next reign not begun:
// it may serve reads under the lease, and must issue nothing.
func (c *Core) Carrying(now edict.Time) bool { return c.carrying(now) }

// quorumsMeet reports whether every majority of a meets every majority of
// b: true when the two differ by one member added or removed, false for a
// replacement in one step. The smallest majority of each that avoids the
// other's members as far as it can takes the rest from the shared ones;
// they meet if those rests overlap.
func quorumsMeet(a, b []edict.ProcessID) bool {
	shared := 0
	for _, p := range a {
		if slices.Contains(b, p) {
			shared++
		}
	}
	fromShared := func(ms []edict.ProcessID) int { return max(0, len(ms)/2+1-(len(ms)-shared)) }
	return fromShared(a)+fromShared(b) > shared
}

// Wedging reports whether this process is wedging epoch: Wedge was
// called and the epoch is not yet known TERMINATED.
func (c *Core) Wedging(epoch uint64) bool { return c.wedges[epoch] != nil }

// WedgeNow asks again at once the members not yet wedged of every epoch
// this process is wedging, whatever back-off their refusals asked for. A
// refusal's back-off covers the grant it named; the log calls this when
// it learns that grant has ended (a hand-over from the leader that held
// it, which wedged its own granters first). Liveness only: a wedge request
// may be sent at any time, and answering one is idempotent.
func (c *Core) WedgeNow(now edict.Time) {
	c.advance(now)
	for _, es := range c.epochsInOrder() {
		if w := c.wedges[es.epoch]; w != nil {
			c.sendWedges(now, w)
		}
	}
}

func (c *Core) sendWedges(now edict.Time, w *wedging) {
	w.start = now
	w.retryAt = now.Add(edict.ScaleUp(2*c.cfg.RoundTrip, 1+c.cfg.Rho))
	for _, q := range c.epochs[w.epoch].qs.Members() {
		done := false
		for _, x := range w.wedged {
			done = done || x == q
		}
		if !done {
			c.send(now, wire.Lease{Type: wire.LeaseGrantRequest, From: c.id, To: q, Epoch: w.epoch, Start: now, Wedge: true})
		}
	}
}

func (c *Core) retryWedges(now edict.Time) {
	for _, es := range c.epochsInOrder() {
		if w := c.wedges[es.epoch]; w != nil && !now.Before(w.retryAt) {
			c.sendWedges(now, w)
		}
	}
}

// onWedgeRequest wedges this process in the epoch if it grants to no one
// else: A_q := ⊥, F_q := ∞, persisted before the reply leaves. A process
// in restart quarantine may still be granting a lease it forgot, so it
// refuses like any granter with an outstanding grant; the requester
// retries, which has the effect of the paper's buffering.
func (c *Core) onWedgeRequest(now edict.Time, m wire.Lease, es *epochState) {
	next := c.epochs[m.Epoch+1]
	if !es.qs.IsMember(c.id) || !(es.qs.IsMember(m.From) || next != nil && next.qs.IsMember(m.From)) {
		return
	}
	switch {
	case es.wedged:
	case now.Before(c.quarantineUntil):
		d, _ := c.quarantineUntil.Sub(now)
		c.nack(now, m, es, edict.None, d)
		return
	case es.grantee != m.From && es.granting(es.grantee, now):
		d, _ := es.finish.Sub(now)
		c.nack(now, m, es, es.grantee, d)
		return
	default:
		if es.grantee == c.id && c.lease.valid(now) && c.lease.epoch == es.epoch && m.From != c.id {
			// Unreachable: our own grant to ourselves is granting to
			// another than the requester. Kept as the invariant's guard.
			panic("elect: wedging would break this process's own lease")
		}
		es.wedge()
		c.persist(es)
	}
	r := c.reply(m, wire.LeaseGrant, now)
	r.Wedged = true
	c.send(now, r)
}

// onWedgeReply counts wedged members; a set of them that meets every
// quorum terminates the epoch (blocking). Wedged state is durable, so a reply to any round counts.
func (c *Core) onWedgeReply(now edict.Time, m wire.Lease) {
	w := c.wedges[m.Epoch]
	es := c.epochs[m.Epoch]
	if w == nil || es == nil || m.Type != wire.LeaseGrant || !m.Wedged || !es.qs.IsMember(m.From) {
		if w != nil && m.Type == wire.LeaseNack && m.Remaining > 0 {
			at := now.Add(edict.ScaleUp(m.Remaining, (1+c.cfg.Rho)/(1-c.cfg.Rho)))
			if at.After(w.retryAt) && m.Start == w.start {
				w.retryAt = at
			}
		}
		return
	}
	for _, x := range w.wedged {
		if x == m.From {
			return
		}
	}
	w.wedged = append(w.wedged, m.From)
	if blocking(es.qs, w.wedged) || mutated(ruleWedgeOnEpochChange) {
		c.learnTerminated(now, m.Epoch+1)
	}
}

// blocking reports whether the wedged members meet every quorum of qs:
// then no quorum can grant in the epoch again, so no one leads it again,
// and no lease of it is still valid — a lease rests on a quorum's grants,
// one of them a wedged member's, which wedged only once its grant had
// ended or its grantee had given the lease up (onWedgeRequest). §10.6
// asks for a wedged quorum; a blocking set is all the argument uses, and
// is smaller when the epoch has an even number of members (two of four):
// a replacement passes through one (three members, then four, then
// three), and a quorum of the four may not be reachable once the removed
// member is gone and another is cut off, while two of them are.
func blocking(qs edict.QuorumSystem, wedged []edict.ProcessID) bool {
	rest := slices.DeleteFunc(qs.Members(), func(p edict.ProcessID) bool { return slices.Contains(wedged, p) })
	return !qs.IsQuorum(rest)
}

// moveOverGap: an epoch just learned may close a gap that kept this
// process in a terminated epoch (lowestUnterminated); it then runs in the
// next, as if it had just learned its predecessor terminated.
func (c *Core) moveOverGap() {
	if a := c.lowestUnterminated(); a != c.active {
		c.active = a
		c.event(Event{Kind: EpochTerminated, Epoch: a - 1})
	}
}

// learnTerminated records that every epoch below upTo is TERMINATED and
// moves this process to the lowest epoch it does not know terminated.
func (c *Core) learnTerminated(now edict.Time, upTo uint64) {
	c.terminatedBelow = max(c.terminatedBelow, upTo)
	if es := c.epochs[upTo]; es != nil && !es.runs {
		es.runs = true
		c.persist(es)
	}
	for _, es := range c.epochsInOrder() {
		if es.epoch >= upTo || es.terminated {
			continue
		}
		es.terminated = true
		c.persist(es)
		delete(c.wedges, es.epoch)
		c.event(Event{Kind: EpochTerminated, Epoch: es.epoch})
		if c.lease.valid(now) && c.lease.epoch == es.epoch && !(c.carryInto == es.epoch+1 && upTo == c.carryInto) {
			// Only a lease carried into the next epoch (WedgeKeeping)
			// outlives its epoch; a wedged quorum intersects every other
			// granting quorum. Drop the lease rather than trust it.
			c.lease.expiry = now
			c.checkLease(now)
		}
		if c.attempt != nil && c.attempt.epoch == es.epoch {
			c.attempt = nil
		}
	}
	c.active = c.lowestUnterminated()
}

// EpochRan records that epoch, which must be known, has had a leader: an
// entry its reign wrote is committed. By §10.6 a lease in an epoch is
// granted only once its predecessor is TERMINATED, so every epoch below it
// is; this process learns so without wedging anything. The log layer
// calls it when it learns of an epoch from such an entry rather than from
// the stop edict that began it (which lay inside a snapshot).
func (c *Core) EpochRan(now edict.Time, epoch uint64) error {
	c.advance(now)
	if _, ok := c.epochs[epoch]; !ok {
		return fmt.Errorf("elect: unknown epoch %d ran", epoch)
	}
	c.learnTerminated(now, epoch)
	return nil
}

// ForceTerminated is the operator's forced recovery after quorum loss (the
// paper's "manual intervention", §10.6): it declares every epoch below
// upTo TERMINATED without a wedged quorum. It is unsafe by design — if the
// "lost" processes are alive, two epochs may run at once — and exists only
// for when a quorum is gone for good. It must be called on every survivor
// with the same epoch configuration, which must already be known.
func (c *Core) ForceTerminated(now edict.Time, upTo uint64) error {
	c.advance(now)
	if _, ok := c.epochs[upTo]; !ok {
		return fmt.Errorf("elect: forced recovery into unknown epoch %d", upTo)
	}
	c.learnTerminated(now, upTo)
	return nil
}
