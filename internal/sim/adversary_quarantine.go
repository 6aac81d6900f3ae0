package sim

import (
	"slices"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect"
	"github.com/edictlog/edictlog/internal/replog"
	"github.com/edictlog/edictlog/wire"
)

// The forgotten-grant adversary: a granter that restarts within its grant
// to a candidate, and is reached in its quarantine by the leader the
// candidate is about to replace.
//
// A grant to a candidate carries the granter's log position, and the
// candidate's reign starts from the most up-to-date position its quorum
// reported. A granter q that crashes and restarts forgets the grant, but
// the grant still counts: the candidate may complete its lease with it
// after the restart. If q, in its restart quarantine, then accepted and
// acknowledged an append of the leader still in office, that leader could
// commit an entry on a quorum that counts q — and the candidate's quorum,
// which counts q's position from before the append, would not hold it:
// its reign-start edict takes the committed entry's index. The rule "a
// process in its restart quarantine accepts no append" (log/
// quarantine-appends) closes the hole.
//
// For it to matter, much has to line up: the granter must be outside the
// old leader's renewing quorum (its grant to the leader lapsed) while the
// leader still holds its lease; it must restart between its grant and the
// candidate's completion, which comes only after the old lease ends,
// within one attempt of the candidate; the old leader must append in
// between; and a follower outside the granter's knowledge must complete
// the candidate's quorum without the new entries. Random faults almost
// never do all of it (log-short-restarts tries). The adversary does, with
// ground truth, in phases, on a leader A of a stable epoch of at least
// five members:
//
//  1. lapse: A's lease messages to the two members with the highest ids,
//     the candidate B and the granter q, are lost (a lease connection
//     that broke), until their grants to A have lapsed. A renews with the
//     others. Being the highest ids, B and q still name a lower id weak
//     leader and stay quiet.
//  2. cut: all of A's lease messages are lost: its lease runs out at a
//     time the adversary reads from A's core. From now on A's appends to
//     the starved followers S (Q−2 of the rest) are lost too.
//  3. campaign: within one attempt's span before S's grants to A end, B's
//     detector wrongly suspects everyone else (a detector mistake, as
//     Competing makes), and B campaigns. q, free, grants, reporting its
//     log position, and crashes at once, for 1–5 ms: it comes back in
//     quarantine while A, still leading, appends to it. A's appends to q
//     from shortly before B's campaign are delayed until q is back, so
//     that q reports no more than B holds (B starts from its own log
//     instead of fetching from q) and, in quarantine, receives at once
//     everything A appended since. B's requests to S are delayed until
//     S's grants to A have ended; S then grant, and B completes with its
//     own grant, q's forgotten one and S's — none of which holds what A
//     appended after B's campaign began.
//
// With the rule in force q refuses A's appends in quarantine, A commits
// nothing B's quorum lacks, and B's reign overwrites only uncommitted
// entries. Without it A commits on q's acknowledgement, and B's
// reign-start edict takes a committed index. Everything here is a loss, a
// delay, a crash or a detector mistake before GST.

// quarantineAdversary is one run's forgotten-grant adversary.
type quarantineAdversary struct {
	plan *forgottenGrant
}

type fgPhase int

const (
	fgLapse    fgPhase = iota + 1 // A's lease messages to B and q are lost
	fgCut                         // all of A's lease messages are lost; S starve
	fgCampaign                    // B campaigns; q restarts; B's requests to S wait
)

// forgottenGrant is one plan under way.
type forgottenGrant struct {
	phase   fgPhase
	old     *lproc            // A, whose lease is left to run out
	cand    *lproc            // B, the candidate
	granter *lproc            // q, which grants to B and restarts at once
	starved []edict.ProcessID // S: A's appends never reach them
	crashed bool              // q has been crashed after its grant
	// delayed: A's appends to q, from shortly before B's campaign until
	// q's restart, wait in the network and arrive after it.
	delaying bool
	delayed  []wire.Message
	until    int64

	// The grants to A, as the messages tell them: A's requests carry δ,
	// each grant the granter's reading T_q, and the grant lasts until
	// T_q + δ·(1+ρ) on the granter's clock (step 6.1 of OQwBD).
	deltas map[edict.Time]time.Duration   // A's requests' δ, by Start_p
	finish map[edict.ProcessID]edict.Time // F_q of each grant to A
}

// forgottenGrantSpan bounds a plan: a grant's lapse, a lease's end, one
// attempt, the new reign's start, and slack.
const forgottenGrantSpan = 1500 * time.Millisecond

// scheduleQuarantine sets up the forgotten-grant adversary if the
// scenario asks for it.
func (r *lrun) scheduleQuarantine() {
	if r.sc.ForgottenGrantEvery == 0 {
		return
	}
	r.quarantine = &quarantineAdversary{}
	r.every(r.sc.ForgottenGrantEvery, r.gst-int64(forgottenGrantSpan), r.plotForgottenGrant)
}

// plotForgottenGrant starts a plan on the current leader, if there is one
// and every member of its epoch is up.
func (r *lrun) plotForgottenGrant() {
	a := r.quarantine
	old := r.leader()
	if a.plan != nil || old == nil || old.frozenUntil > r.w.now {
		return
	}
	members := old.core.Status(old.now(r.w.now)).Members
	quorum := len(members)/2 + 1
	if len(members) < quorum+2 {
		return // no room for both B and q outside A's renewing quorum
	}
	for _, id := range members {
		if p := r.procs[id]; !p.up || p.frozenUntil > r.w.now {
			return
		}
	}
	others := slices.DeleteFunc(slices.Clone(members), func(id edict.ProcessID) bool { return id == old.id })
	slices.Sort(others)
	hi, lo := others[len(others)-2:], others[:len(others)-2]
	cand, granter := hi[0], hi[1]
	if r.w.chance(0.5) {
		cand, granter = granter, cand
	}
	// S, the followers that complete B's quorum (Q−2 of them), are the
	// highest of the rest: when A's lease lapses, the lowest of the rest
	// names itself weak leader and campaigns; were it one of S, it would
	// grant to itself rather than to B.
	pl := &forgottenGrant{phase: fgLapse, old: old, cand: r.procs[cand], granter: r.procs[granter],
		starved: slices.Clone(lo[len(lo)-(quorum-2):]), until: min(r.w.now+int64(forgottenGrantSpan), r.gst),
		deltas: map[edict.Time]time.Duration{}, finish: map[edict.ProcessID]edict.Time{}}
	a.plan = pl
	r.w.at(pl.until, func() { r.endForgottenGrant(pl) })
	// A grant A's renewals made before the cut lasts δ·(1+ρ) on its
	// granter's clock from the request's arrival, δ = d + i (a renewal
	// starts with less than i left).
	lapse := edict.ScaleUp(r.sc.RoundTrip+r.sc.RenewInterval, (1+r.sc.Rho)/(1-r.sc.Rho))
	r.w.after(r.sc.MaxDelay+lapse+time.Millisecond, func() { r.forgottenGrantCut(pl) })
}

// forgottenGrantLive reports whether pl is still the plan under way and A
// still leads; a plan whose leader lost its lease early is abandoned.
func (r *lrun) forgottenGrantLive(pl *forgottenGrant) bool {
	if r.quarantine.plan != pl || r.w.now >= pl.until {
		return false
	}
	if !pl.old.up || pl.old.frozenUntil > r.w.now || !pl.old.core.CanServeLease(pl.old.now(r.w.now)) {
		r.endForgottenGrant(pl)
		return false
	}
	return true
}

// forgottenGrantCut is phase 2: A's lease is left to run out.
func (r *lrun) forgottenGrantCut(pl *forgottenGrant) {
	if !r.forgottenGrantLive(pl) {
		return
	}
	pl.phase = fgCut
	// Renewals already under way land within a round trip; then A's
	// lease end is known.
	r.w.after(2*r.sc.MaxDelay+time.Millisecond, func() { r.forgottenGrantAim(pl) })
}

// forgottenGrantAim reads when A's lease ends and schedules B's campaign
// within one attempt's span of it.
func (r *lrun) forgottenGrantAim(pl *forgottenGrant) {
	if !r.forgottenGrantLive(pl) {
		return
	}
	st := pl.old.core.Status(pl.old.now(r.w.now))
	if !st.IsLeader || st.LeaseExpiry.Incarnation != pl.old.inc {
		r.endForgottenGrant(pl)
		return
	}
	// B's requests reach S the moment their grants to A end: before the
	// rest's campaigns, which start when they see A's lease lapse.
	end := pl.old.clock.realAt(st.LeaseExpiry.Nanos)
	release := end
	for _, id := range pl.starved {
		release = max(release, r.grantEnd(pl, id))
	}
	// B's attempt gives up max(4d, δ/4)·(1+ρ) after it starts: S's grants
	// must reach B before then. And q's grant, its restart and A's
	// append to it and back must fit before A's lease ends.
	d := r.sc.RoundTrip
	span := edict.ScaleUp(max(4*d, (d+r.sc.RenewInterval)/4), 1+r.sc.Rho)
	earliest := release - int64(span) + int64(r.sc.MaxDelay+2*time.Millisecond)
	latest := end - int64(3*r.sc.MaxDelay+5*time.Millisecond)
	at := earliest
	if latest > earliest {
		at += int64(r.w.between(0, time.Duration(latest-earliest)))
	}
	if at <= r.w.now {
		r.endForgottenGrant(pl)
		return
	}
	r.w.at(at, func() { r.forgottenGrantCampaign(pl) })
	r.w.at(max(r.w.now, at-int64(r.sc.MaxDelay+time.Millisecond)), func() { pl.delaying = true })
	pl.until = min(pl.until, release+int64(300*time.Millisecond))
	r.w.at(pl.until, func() { r.endForgottenGrant(pl) })
}

// grantEnd is the real time at which q's grant to A ends: from the grants
// seen, or, if none was, a bound (a one-way delay after A's lease ends,
// with drift).
func (r *lrun) grantEnd(pl *forgottenGrant, id edict.ProcessID) int64 {
	q := r.procs[id]
	if f, ok := pl.finish[id]; ok && f.Incarnation == q.inc {
		return q.clock.realAt(f.Nanos)
	}
	st := pl.old.core.Status(pl.old.now(r.w.now))
	return pl.old.clock.realAt(st.LeaseExpiry.Nanos) + int64(r.sc.MaxDelay+time.Millisecond)
}

// deliverAfterGrant delivers B's request m to s once s's grant to A has
// ended: at the moment it does (a clock rate change may move it).
func (r *lrun) deliverAfterGrant(pl *forgottenGrant, m wire.Message) {
	s := r.procs[m.To]
	if f, ok := pl.finish[s.id]; ok && f.Incarnation == s.inc && s.now(r.w.now).Before(f) {
		r.w.at(max(s.clock.realAt(f.Nanos), r.w.now+1), func() { r.deliverAfterGrant(pl, m) })
		return
	}
	r.deliver(m)
}

// forgottenGrantCampaign is phase 3: B's detector errs and B campaigns.
func (r *lrun) forgottenGrantCampaign(pl *forgottenGrant) {
	if !r.forgottenGrantLive(pl) {
		return
	}
	b := pl.cand
	if !b.up || b.frozenUntil > r.w.now || !pl.granter.up {
		r.endForgottenGrant(pl)
		return
	}
	pl.phase = fgCampaign
	for _, id := range r.ids {
		if id != b.id {
			b.detector.Observe(elect.Observation{Kind: elect.ProcessDown, Process: id, At: b.now(r.w.now)})
		}
	}
	r.call(b, (*replog.Driver).Tick)
}

// flushDelayed delivers A's appends to q that the network delayed, in
// the order they were sent.
func (r *lrun) flushDelayed(pl *forgottenGrant) {
	pl.delaying = false
	for i, m := range pl.delayed {
		r.w.after(time.Duration(i)*time.Microsecond, func() { r.deliver(m) })
	}
	pl.delayed = nil
}

// endForgottenGrant ends pl: the network carries A's messages again, and
// B's detector learns that the others are up.
func (r *lrun) endForgottenGrant(pl *forgottenGrant) {
	if r.quarantine.plan != pl {
		return
	}
	r.quarantine.plan = nil
	r.flushDelayed(pl)
	if pl.phase == fgCampaign && pl.cand.up {
		b := pl.cand
		for _, id := range r.ids {
			if id != b.id && r.procs[id].up {
				b.detector.Observe(elect.Observation{Kind: elect.ProcessUp, Process: id, At: b.now(r.w.now)})
			}
		}
	}
}

// quarantineIntercept carries out the plan on a message as it is sent;
// it reports whether it dropped or held m.
func (r *lrun) quarantineIntercept(m wire.Message) bool {
	a := r.quarantine
	if a == nil || a.plan == nil || r.w.now >= r.gst {
		return false
	}
	pl := a.plan
	lease := m.Lease != nil && !m.Lease.Wedge
	if lease && m.From == pl.old.id && m.Lease.Type == wire.LeaseGrantRequest {
		pl.deltas[m.Lease.Start] = m.Lease.Delta
	}
	if lease && m.To == pl.old.id && m.Lease.Type == wire.LeaseGrant {
		if delta, ok := pl.deltas[m.Lease.Start]; ok && r.sc.Mode == elect.BoundedDrift {
			if f := m.Lease.T.Add(edict.ScaleUp(delta, 1+r.sc.Rho)); f.After(pl.finish[m.From]) {
				pl.finish[m.From] = f
			}
		}
	}
	switch {
	case m.Lease != nil && m.From == pl.old.id:
		if pl.phase >= fgCut || m.To == pl.cand.id || m.To == pl.granter.id {
			r.net.lost++
			return true
		}
	case m.Append != nil && m.From == pl.old.id && pl.phase >= fgCut && slices.Contains(pl.starved, m.To):
		r.net.lost++
		return true
	case m.Append != nil && m.From == pl.old.id && m.To == pl.granter.id && pl.delaying:
		pl.delayed = append(pl.delayed, m)
		return true
	case pl.phase == fgCampaign && lease && m.Lease.Type == wire.LeaseGrantRequest && m.From == pl.cand.id && slices.Contains(pl.starved, m.To):
		// Delayed until S's grants to A have ended.
		r.w.at(max(r.grantEnd(pl, m.To), r.w.now+int64(r.sc.MinDelay)), func() { r.deliverAfterGrant(pl, m) })
		return true
	case pl.phase == fgCampaign && lease && m.Lease.Type == wire.LeaseGrant && m.From == pl.granter.id && m.To == pl.cand.id && !pl.crashed:
		// q has granted, reporting its position: it crashes right after,
		// and comes back within the grant's lifetime, in quarantine.
		pl.crashed = true
		q, inc := pl.granter, pl.granter.inc
		r.w.after(0, func() {
			if q.up && q.inc == inc && q.frozenUntil <= r.w.now {
				down := r.w.between(time.Millisecond, 5*time.Millisecond)
				r.crash(q, down)
				r.w.after(down+r.sc.MinDelay, func() { r.flushDelayed(pl) })
			}
		})
	}
	return false
}
