package elect

import (
	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
)

// Leader verification (§10.5), re-derived.
//
// q samples Start_q = C_q(t_s) and sends ⟨verifyLeadership, q, Start_q⟩ to
// p. p, at real time t_r ≥ t_s, answers with δ := (E_p − C_p)/(1+ρ): by
// eq. 15 p's clock needs at least that much real time to advance by
// E_p − C_p, so p holds its lease (and by (13) is leader) throughout
// [t_r, t_r + δ]. If p holds no lease it answers δ = 0.
//
// q does not know t_r, only that t_r ≥ t_s, so p is leader throughout
// [t_r, t_s + δ] ⊆ [t_r, t_r + δ]. q receives the answer after t_r, so
// every later instant t with t < t_s + δ is covered. In q's clock:
// C_q(t_s + δ) ≥ Start_q + (1−ρ)·δ by eq. 15, so whenever
//
//	C_q < T := Start_q + (1−ρ)·δ
//
// the real time is before t_s + δ and p is leader. The paper's text has
// T = Start_q + δ·(ρ−1) and "as long as T < C_q": both signs are inverted
// (that T precedes Start_q, and the condition would hold forever after).
//
// One caveat the paper leaves out: p may give up its lease voluntarily
// after answering — a release (§6), or wedging its own epoch (§10.6) — and
// then the promise ends early. A restart of p ends it too: p's new
// incarnation no longer knows its lease, and its first aborted attempt
// revokes (§10.2) whatever grants the old incarnation still held, which
// frees the cluster sooner than waiting them out. The simulator checks
// the promise against ground truth except after such a release.

// VerifyLeader asks p whether it leads; the answer arrives as a
// LeaderVerified event.
func (c *Core) VerifyLeader(now edict.Time, p edict.ProcessID) {
	c.advance(now)
	if p == c.id {
		return
	}
	c.verifies[p] = now
	c.emit(wire.Lease{Type: wire.LeaseVerify, From: c.id, To: p, Epoch: c.active, Start: now})
}

// remainder is step 3: the least real time left of the lease.
func (c *Core) onVerify(now edict.Time, m wire.Lease) {
	r := wire.Lease{Type: wire.LeaseRemainder, From: c.id, To: m.From, Epoch: m.Epoch, Start: m.Start}
	if c.lease.valid(now) && c.lease.epoch == m.Epoch {
		left, _ := c.lease.expiry.Sub(now)
		r.Delta = edict.Scale(left, 1/(1+c.cfg.Rho))
	}
	c.emit(r)
}

func (c *Core) onRemainder(now edict.Time, m wire.Lease) {
	start, ok := c.verifies[m.From]
	if !ok || start != m.Start {
		return
	}
	delete(c.verifies, m.From)
	ev := Event{Kind: LeaderVerified, Epoch: m.Epoch, Leader: m.From}
	if m.Delta > 0 {
		ev.Until = start.Add(edict.Scale(m.Delta, 1-c.cfg.Rho))
	}
	c.event(ev)
}
