package elect

import "github.com/edictlog/edictlog/edict"

// Retire begins this life's clean end (docs/protocol.md, "A clean stop
// ends the quarantine"). From now on the process grants nothing — it
// refuses every grant request, a leader's renewals included — and
// campaigns for nothing; a lease it holds, or an attempt in flight, is
// released first (Release). Its grants then run out: Retired reports,
// and an Event of kind Retired tells once, when the last of them has
// lapsed by this process's own clock. A runtime that then records the
// fact durably may start its next life without the restart quarantine
// (Config.AfterCleanStop): that life has nothing to forget.
//
// Wedge requests are still answered as before: a wedge takes no grant
// (A_q := ⊥, F_q := ∞), and its record is durable, so the next life
// knows it. Appends are accepted under the usual rule, which a process
// that remembers its grants applies as it always did.
//
// Retire cannot be undone: the life that called it only ends.
func (c *Core) Retire(now edict.Time) {
	if c.retiring {
		c.advance(now)
		return
	}
	if c.lease.held() || c.attempt != nil {
		c.release(now, 0, &c.stats.LostReleased)
	} else {
		c.advance(now)
	}
	c.retiring = true
	c.tick(now)
}

// Retiring reports whether Retire was called.
func (c *Core) Retiring() bool { return c.retiring }

// RetiredAt is the reading from which a retiring process holds no live
// grant: the latest F_q of its grants in every epoch it knows (a grant to
// itself included), and the end of its own restart quarantine, during
// which a grant of an earlier life may still stand. Each F_q is the bound
// the grant rule set, (1+ρ)·δ from the grant on this clock, so at most
// (1+ρ)·MaxLease after the last grant.
func (c *Core) RetiredAt() edict.Time {
	at := c.quarantineUntil
	for _, es := range c.epochsInOrder() {
		if !es.wedged && es.finish.After(at) {
			at = es.finish
		}
	}
	return at
}

// Retired reports whether this process is retiring and every grant it
// made has lapsed at reading now (RetiredAt): it will make no other.
func (c *Core) Retired(now edict.Time) bool {
	return c.retiring && (!now.Before(c.RetiredAt()) || mutated(ruleCleanStopWaits))
}

// checkRetired reports the Retired event once.
func (c *Core) checkRetired(now edict.Time) {
	if c.retiredReported || !c.Retired(now) {
		return
	}
	c.retiredReported = true
	c.event(Event{Kind: Retired})
}
