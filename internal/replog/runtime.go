package replog

import (
	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect"
	"github.com/edictlog/edictlog/wire"
)

// What a runtime around the Driver (edictlog.Node) reads of it and of its
// Core between steps, on the Driver's goroutine like every other call.

// Readings counts the readings Now has taken: a runtime that sees it
// unchanged across a step knows the step took none.
func (d *Driver) Readings() uint64 { return d.readings }

// Last is the latest reading Now took.
func (d *Driver) Last() edict.Time { return d.last }

// Recent is the step's own reading, checked again for a suspend against
// the lease as the step left it: what carries a step on decides at it.
func (d *Driver) Recent() edict.Time { return d.recent() }

// ProposeAt is ProposeWith at a reading now taken after every proposal
// of a batch arrived: one reading serves the batch, each proposal
// decided as if it had arrived at it. Call FlushProposed after the batch.
func (d *Driver) ProposeAt(now edict.Time, appendEntry func(now edict.Time) (wire.Entry, error), done func(ApplyResult, error)) {
	d.proposeAt(now, appendEntry, done)
}

// FlushProposed is Flush at the reading the batch's proposals were
// appended at.
func (d *Driver) FlushProposed() { d.flush() }

// ActiveEpoch is the epoch this process runs in.
func (c *Core) ActiveEpoch() uint64 { return c.el.ActiveEpoch() }

// LeaseStats are the lease protocol's counters.
func (c *Core) LeaseStats() elect.Stats { return c.el.Stats() }

// Syncs are the sequence number of the last Ready batch handed out and
// of the newest one known durable (Synced).
func (c *Core) Syncs() (handed, synced uint64) { return c.syncSeq, c.syncedTo }

// Leads reports whether this process leads, its reign ready or not.
func (c *Core) Leads() bool { return c.lead != nil }

// InConfig reports whether id is a member or a learner of the
// configuration in force.
func (c *Core) InConfig(id edict.ProcessID) bool { return c.inConfig(id) }

// LastIndex is the index of the last entry in the log.
func (c *Core) LastIndex() uint64 { return c.log.lastIndex() }

// EntryPosition is the position of the entry at index i (its Index,
// Reign and Stamp; no Data), if the log holds it.
func (c *Core) EntryPosition(i uint64) (wire.Entry, bool) {
	e := c.log.entry(i)
	if e == nil {
		return wire.Entry{}, false
	}
	return wire.Entry{Index: e.Index, Reign: e.Reign, Stamp: e.Stamp}, true
}

// Refusal is err, one of the Core's refusals, as the *NotLeaderError
// naming where to retry that the Driver answers a proposal with; other
// errors are returned as they are.
func (c *Core) Refusal(err error) error { return notLeader(c, err) }
