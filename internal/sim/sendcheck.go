package sim

import (
	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
)

// The send-time check, at ground truth: when a message leaves its sender,
// everything it promises about the sender's disk is already there. Since
// the runtime writes off its loop, a process's memory runs ahead of its
// disk, and a message built from memory can promise what a crash would
// take back; the check finds such a message the moment it leaves, whether
// or not a crash ever strikes there (the crash-point explorer,
// crashpoints.go, does the striking).
//
// What each kind of message promises, and is checked against the
// sender's simulated stores (lproc.store, lproc.snaps: what a crash
// leaves):
//   - an append reply that succeeds: the log up to its last index, as it
//     was when the reply was made (replyStamp), is durable;
//   - a fetch reply (not a committed fetch's: those carry committed
//     entries, facts for good): every entry it carries is durable;
//   - a grant: the log position it reports is durable;
//   - a wedge answer: the sender's wedge record for the epoch is durable;
//   - a grant request or grant (not a wedge) of an epoch: the sender's
//     stores make it active in that epoch at least, which rests on the
//     records that terminated the epochs before (its own and those of the
//     wedges it counted, which the wedge answers promised).

// replyStamp is what an append reply acknowledges: the stamp of the
// sender's in-memory entry at the reply's last index when the reply was
// made, or false when there is nothing to check (a failure, an empty
// log, an index its memory no longer has).
func replyStamp(p *lproc, m wire.Message) (edict.Stamp, bool) {
	a := m.AppendReply
	if a == nil || !a.Success || a.LastIndex == 0 {
		return edict.Stamp{}, false
	}
	pos, ok := p.core.SnapshotPosition(a.LastIndex)
	return pos.Stamp, ok
}

// checkSend checks m, which p sends now; ack is replyStamp's answer,
// taken when m was made.
func (r *lrun) checkSend(p *lproc, m wire.Message, ack edict.Stamp, hasAck bool) {
	if r.violation != "" || r.noSendCheck {
		return
	}
	if hasAck && !p.holdsDurably(m.AppendReply.LastIndex, ack) {
		r.fail("durability: %v acknowledged index %d (%v) to %v before its store held it (stored log %s, snapshot at %d)",
			p.id, m.AppendReply.LastIndex, ack, m.To, p.storedRange(), p.snapPos.Index)
		return
	}
	if f := m.FetchReply; f != nil && !f.Committed {
		for _, e := range f.Entries {
			if !p.holdsDurably(e.Index, e.Stamp) {
				r.fail("durability: %v sent %v entry %d (%v) in a fetch reply before its store held it (stored log %s)",
					p.id, m.To, e.Index, e.Stamp, p.storedRange())
				return
			}
		}
	}
	l := m.Lease
	if l == nil {
		return
	}
	switch {
	case l.Type == wire.LeaseGrant && l.Wedge:
		if l.Wedged && !p.durablyWedged(l.Epoch) {
			r.fail("durability: %v answered %v wedged in epoch %d before its wedge record was durable", p.id, m.To, l.Epoch)
		}
	case l.Type == wire.LeaseGrant:
		if l.LastIndex > 0 && !p.holdsDurably(l.LastIndex, l.LastStamp) {
			r.fail("durability: %v granted to %v reporting log position %d (%v), which its store does not hold (stored log %s, snapshot at %d)",
				p.id, m.To, l.LastIndex, l.LastStamp, p.storedRange(), p.snapPos.Index)
			return
		}
		fallthrough
	case l.Type == wire.LeaseGrantRequest && !l.Wedge:
		if s := r.storedEpoch[p.id]; l.Epoch > s {
			r.fail("durability: %v sent %v a %v in epoch %d while its stores make it active only in epoch %d", p.id, m.To, l.Type, l.Epoch, s)
		}
	}
}

// durablyWedged reports whether p's store holds its wedge record of epoch.
func (p *lproc) durablyWedged(epoch uint64) bool {
	k := wire.EpochWedgeKey(epoch)
	b, err := p.store.Get(k)
	if err != nil {
		return false
	}
	rec, err := wire.DecodeEpochRecord(k, b)
	return err == nil && rec.Wedged
}
