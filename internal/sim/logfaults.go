package sim

import (
	"fmt"
	"slices"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect"
	"github.com/edictlog/edictlog/internal/replog"
	"github.com/edictlog/edictlog/wire"
)

func (r *lrun) schedule() {
	sc := &r.sc
	for i := range sc.Clients {
		r.runClient(i)
	}
	r.every(300*time.Millisecond, r.end, func() {
		p := r.procs[r.ids[r.w.rng.IntN(len(r.ids))]]
		p.clock.setRate(r.w.now, r.sc.pickRate(r.w))
		if p.up {
			p.tick.reset()
			r.armTick(p)
		}
	})
	if sc.Crashes {
		r.every(sc.CrashEvery, r.gst, r.crashOne)
	}
	if sc.ShortRestartEvery > 0 {
		r.every(sc.ShortRestartEvery, r.gst, r.shortRestart)
	}
	if sc.ConnectionCuts {
		r.every(300*time.Millisecond, r.gst, r.cutConnections)
	}
	if sc.SuspendEvery > 0 {
		r.every(sc.SuspendEvery, r.gst, r.suspendOne)
	}
	if sc.StarveEvery > 0 {
		r.every(sc.StarveEvery, r.end, r.starveOne)
	}
	if sc.QuotaLeader > 0 {
		r.w.at(int64(time.Second), r.quotaLeader)
	}
	if sc.Partitions {
		r.every(900*time.Millisecond, r.gst, func() { r.net.partitionRandomly(r.ids) })
	}
	if sc.Transfers {
		r.every(800*time.Millisecond, r.gst, func() {
			l := r.leader()
			if l == nil {
				return
			}
			st := l.core.Status(l.now(r.w.now))
			target := st.Members[r.w.rng.IntN(len(st.Members))]
			if target != l.id {
				r.call(l, func(d *replog.Driver) { _ = d.Core().TransferLeadership(d.Now(), target) })
			}
		})
	}
	if sc.Membership {
		r.membershipPlan()
	}
	if sc.CutOff > 0 {
		cut := false
		r.every(50*time.Millisecond, r.gst, func() {
			l := r.leader()
			if cut || r.w.now < int64(200*time.Millisecond) || l == nil {
				return
			}
			for i := len(r.ids) - 1; i >= 0; i-- {
				if p := r.procs[r.ids[i]]; p.up && (l == p) == sc.CutLeader {
					cut = true
					r.net.partition([]edict.ProcessID{p.id}, r.ids, false)
					r.w.after(sc.CutOff, r.net.heal)
					if sc.CutLeader {
						r.healWhenSnapshotSplits(p, r.w.now+int64(sc.CutOff))
					}
					return
				}
			}
		})
	}
	if sc.Figure8 {
		r.startFigure8()
	}
	r.scheduleReplay()
	r.scheduleQuarantine()
	r.scheduleStopIsolation()
	r.scheduleEpochGap()
	r.w.at(r.gst, r.stabilize)
}

func (r *lrun) crashOne() {
	ups := r.runningProcs()
	if len(ups) == 0 {
		return
	}
	p := ups[r.w.rng.IntN(len(ups))]
	r.crash(p, r.w.between(50*time.Millisecond, r.sc.MaxDowntime))
}

// crash stops p now and restarts it after down (at GST at the latest).
// Its stores keep what they hold; everything else it knew is lost.
func (r *lrun) crash(p *lproc, down time.Duration) {
	if traceHook != nil {
		traceHook("%12v %v crashes for %v, losing %d queued writes", time.Duration(r.w.now), p.id, down, len(p.disk))
	}
	r.faults++
	p.up = false
	p.disk = nil // what the disk had not finished writing is lost
	r.dropPending(p)
	r.report(p.id, elect.ProcessDown)
	r.w.at(min(r.w.now+int64(down), r.gst), func() { r.restart(p) })
}

// healWhenSnapshotSplits heals the network, before until, as soon as
// another process leads whose newest snapshot ends inside cut's
// uncommitted tail: the snapshot it then sends cut replaces cut's log,
// and cut's log reached past it.
func (r *lrun) healWhenSnapshotSplits(cut *lproc, until int64) {
	r.every(5*time.Millisecond, until, func() {
		l := r.leader()
		if l == nil || l == cut || !cut.up || r.net.blocked == nil {
			return
		}
		st := cut.core.Status(cut.now(r.w.now))
		if s := l.snapPos.Index; s > st.Commit && s < st.LastIndex {
			if pos, ok := cut.core.SnapshotPosition(s); ok && !pos.Stamp.Equal(l.snapPos.Stamp) {
				r.net.heal()
			}
		}
	})
}

// runningProcs are the processes that are up and whose host is not
// suspended: the ones a fault may crash or suspend.
func (r *lrun) runningProcs() []*lproc {
	var ps []*lproc
	for _, p := range r.upProcs() {
		if p.frozenUntil <= r.w.now {
			ps = append(ps, p)
		}
	}
	return ps
}

// shortRestart crashes a process for 1–30 ms: shorter than one lease
// attempt, so it comes back in its restart quarantine while the grants
// it forgot still stand. Most often it is not the leader: a granter.
func (r *lrun) shortRestart() {
	ps := r.runningProcs()
	if len(ps) == 0 {
		return
	}
	if l := r.leader(); l != nil && len(ps) > 1 {
		ps = slices.DeleteFunc(ps, func(p *lproc) bool { return p == l })
	}
	r.stopOrCrash(ps[r.w.rng.IntN(len(ps))], r.w.between(time.Millisecond, 30*time.Millisecond))
}

// stopOrCrash crashes p for down or, with the scenario's CleanStops
// chance, stops it cleanly first: p retires (replog.Core.Retire) and goes
// down for down once its clean-stop record is durable (drain). Not near
// GST: a stopping process grants nothing, and the elections after GST
// must not wait for it.
func (r *lrun) stopOrCrash(p *lproc, down time.Duration) {
	if p.stopFor == 0 && r.w.now+int64(2*r.sc.MaxLease()) < r.gst && r.w.chance(r.sc.CleanStops) {
		if traceHook != nil {
			traceHook("%12v %v stops cleanly", time.Duration(r.w.now), p.id)
		}
		p.stopFor = down
		r.call(p, func(d *replog.Driver) { d.Retire() })
		return
	}
	r.crash(p, down)
}

// maybeCrashGranter, on a grant p sends to a candidate (a process that
// does not hold a lease: not a renewal), crashes p soon after for 1–30 ms
// (or stops it cleanly, stopOrCrash),
// with the scenario's CrashGranters chance: it forgets the grant while the
// candidate completes its attempt with the log position p reported, and
// in its quarantine a leader still in office may reach it.
func (r *lrun) maybeCrashGranter(p, to *lproc) {
	if r.w.now >= r.gst || r.sc.CrashGranters == 0 || to.up && to.core.CanServeLease(to.now(r.w.now)) ||
		!r.w.chance(r.sc.CrashGranters) {
		return
	}
	inc := p.inc
	r.w.after(r.w.between(0, 5*time.Millisecond), func() {
		if p.up && p.inc == inc && p.frozenUntil <= r.w.now && r.w.now < r.gst {
			r.stopOrCrash(p, r.w.between(time.Millisecond, 30*time.Millisecond))
		}
	})
}

// cutConnections heals every connection, or breaks each directed link's
// lease connection or log connection with chance 0.3.
func (r *lrun) cutConnections() {
	r.connCut = nil
	if r.w.chance(0.3) {
		return
	}
	r.connCut = map[connection]bool{}
	for _, a := range r.ids {
		for _, b := range r.ids {
			if a != b && r.w.chance(0.3) {
				r.connCut[connection{a, b, r.w.chance(0.5)}] = true
			}
		}
	}
}

// connection is a directed link's lease connection, or its log one.
type connection struct {
	from, to edict.ProcessID
	lease    bool
}

// suspendOne suspends a process's host — most often the leader's — for
// 0.1–2 s (before GST): its clock stops and it runs nothing, while real
// time and the others go on. On resume it must find out (Suspended) and
// give its lease up before trusting it again.
func (r *lrun) suspendOne() {
	p := r.leader()
	if p == nil || p.frozenUntil > r.w.now || r.w.chance(0.3) {
		ps := r.runningProcs()
		if len(ps) == 0 {
			return
		}
		p = ps[r.w.rng.IntN(len(ps))]
	}
	r.suspend(p, r.w.between(100*time.Millisecond, 2*time.Second))
}

// suspend stops p's host for d (until GST at the latest): its clock stops
// and nothing runs on it.
func (r *lrun) suspend(p *lproc, d time.Duration) {
	until := min(r.w.now+int64(d), r.gst)
	if until <= r.w.now {
		return
	}
	r.faults++
	p.clock.suspend(r.w.now, until)
	p.frozenUntil = until
	r.w.at(until, func() {
		p.clock.resume(r.w.now, p.inc)
		p.frozenUntil = 0
		p.tick.reset()
		if p.up {
			r.call(p, (*replog.Driver).Tick)
		}
	})
}

// maybeSuspendCandidate, on a lease request p sends while it holds no
// lease (an attempt to start a reign, not a renewal), suspends p's host
// right after with the scenario's SuspendCandidates chance: the lease
// completes after the resume, on a Start_p read before the suspend, so its
// end by p's clock lies past its granters' grants in real time. The
// suspend must count from Start_p, not from when p first leads.
func (r *lrun) maybeSuspendCandidate(p *lproc) {
	if r.w.now >= r.gst || r.sc.SuspendCandidates == 0 || p.core.CanServeLease(p.now(r.w.now)) ||
		!r.w.chance(r.sc.SuspendCandidates) {
		return
	}
	r.w.after(r.w.between(0, time.Millisecond), func() {
		if p.up && p.frozenUntil <= r.w.now {
			r.suspend(p, r.w.between(200*time.Millisecond, 2*time.Second))
		}
	})
}

func (r *lrun) restart(p *lproc) {
	if p.up || !p.started || r.sc.NoFailureDetector && p.id == r.ids[0] && r.w.now >= r.gst || r.stopIso.keepsDown(p) {
		return
	}
	if r.w.chance(r.sc.RebootClock) {
		// A host reboot: CLOCK_MONOTONIC_RAW starts again near zero; only
		// the incarnation keeps the process's readings increasing.
		p.clock.reboot(r.w.now, float64(r.w.between(0, time.Millisecond)))
	}
	r.faults++
	// This life's memory starts from the disk: at least its maximum.
	r.memAccepted[p.id] = r.maxAccepted[p.id]
	r.memEpoch[p.id] = r.storedEpoch[p.id]
	r.start(p)
	r.report(p.id, elect.ProcessUp)
}

// report has the failure detector tell the other live processes.
func (r *lrun) report(target edict.ProcessID, kind elect.ObservationKind) {
	if r.sc.NoFailureDetector {
		return
	}
	for _, q := range r.upProcs() {
		if q.id == target {
			continue
		}
		det, q := q.detector, q
		r.w.after(r.w.between(0, r.sc.detectDelay()), func() {
			det.Observe(elect.Observation{Kind: kind, Process: target, At: q.now(r.w.now)})
		})
	}
}

// membershipPlan replaces members one at a time: it adds a learner,
// promotes it, then removes the lowest-id member, each step retried until
// the leader takes it, Replacements times.
func (r *lrun) membershipPlan() {
	round, step := 0, 0
	r.every(400*time.Millisecond, r.gst-int64(time.Second), func() {
		if round == r.sc.Replacements {
			return
		}
		newID := edict.ProcessID(r.sc.N + 1 + round)
		l := r.leader()
		if l == nil {
			return
		}
		st := l.core.Status(l.now(r.w.now))
		switch step {
		case 0:
			p := r.procs[newID]
			if !p.started {
				r.start(p)
			}
			if r.proposeAdmin(l, func(now edict.Time) (wire.Entry, error) { return l.core.AddLearner(now, newID, "sim") }) {
				step++
			}
		case 1:
			if st.Match[newID] >= st.Commit && st.Commit > 0 {
				if r.proposeAdmin(l, func(now edict.Time) (wire.Entry, error) { return l.core.Promote(now, newID) }) {
					step++
				}
			}
		case 2:
			if slices.Contains(st.Members, newID) && len(st.Members) == r.sc.N+1 {
				victim := st.Members[0]
				if r.proposeAdmin(l, func(now edict.Time) (wire.Entry, error) { return l.core.Remove(now, victim) }) {
					round, step = round+1, 0
				}
			}
		}
	})
}

// proposeAdmin appends a membership edict through l's Driver, as
// edictlog.Node's AddLearner, Promote and Remove do, and reports whether it was
// appended (its outcome comes later, like any write's).
func (r *lrun) proposeAdmin(l *lproc, f func(now edict.Time) (wire.Entry, error)) bool {
	appended := false
	r.call(l, func(d *replog.Driver) {
		refused := false
		d.ProposeWith(f, func(_ replog.ApplyResult, err error) {
			if !appended && err != nil {
				refused = true
			}
		})
		if appended = !refused; appended {
			d.Flush()
		}
	})
	return appended
}

// stabilize is GST: the network heals, crashed processes restart, every
// detector learns the truth.
func (r *lrun) stabilize() {
	r.net.heal()
	r.connCut = nil
	if p := r.procs[r.ids[0]]; r.sc.NoFailureDetector && p.up {
		p.up = false // the lowest id is gone for good
		r.dropPending(p)
	}
	for _, id := range r.ids {
		if p := r.procs[id]; p.started && !p.up {
			r.restart(p)
		}
	}
	for _, q := range r.upProcs() {
		if r.sc.NoFailureDetector {
			break
		}
		for _, id := range r.ids {
			kind := elect.ProcessDown
			if r.procs[id].up {
				kind = elect.ProcessUp
			}
			q.detector.Observe(elect.Observation{Kind: kind, Process: id, At: q.now(r.w.now)})
		}
	}
}

// finalCheck: linearizability of the history, and liveness after GST: a
// leader within LivenessBound, and a write acknowledged.
func (r *lrun) finalCheck() {
	if v := r.hist.check(); v != "" {
		r.fail("%s", v)
		return
	}
	if r.modelEnd(); r.violation != "" {
		return
	}
	bound := r.sc.LivenessBound()
	switch {
	case r.leaderAfterGST == 0 && r.end-r.gst >= int64(bound):
		r.fail("liveness: no leader in the %v after GST (bound %v)%s", time.Duration(r.end-r.gst), bound, r.describe())
	case r.leaderAfterGST-r.gst > int64(bound):
		r.fail("liveness: the first leader after GST came %v after it, beyond the bound %v%s", time.Duration(r.leaderAfterGST-r.gst), bound, r.describe())
	case r.ackAfterGST == 0:
		r.fail("no write was acknowledged after GST: the log made no progress%s", r.describe())
	}
}

// LivenessBound is how soon after GST (the last fault healed) a leader
// must exist: the lease scenario's ElectionBound, in which the detector
// names a live process and it takes the lease, plus the campaign fallback
// (elect.Config.FallbackAfter, 4·MaxLease, and its jitter of up to
// MaxLease) for when the named process cannot lead — it is outside the
// epoch, does not know it, or knows it only from news — plus
// one more MaxLease for the news that the epoch runs to reach a quorum
// and for the grants the fallback candidate's predecessor left to lapse.
func (sc *LogScenario) LivenessBound() time.Duration {
	return sc.ElectionBound() + 6*sc.MaxLease()
}

// describe summarizes each process's state, for a failure message.
func (r *lrun) describe() string {
	var b []byte
	for _, id := range r.ids {
		p := r.procs[id]
		if !p.started {
			continue
		}
		now := p.now(r.w.now)
		st := p.core.Status(now)
		b = fmt.Appendf(b, "\n  %v up=%t epoch=%d heard=%t leader=%v isLeader=%t commit=%d applied=%d last=%d members=%v learners=%v %s",
			id, p.up, st.Epoch, st.EpochHeard, st.Leader, st.IsLeader, st.Commit, st.Applied, st.LastIndex, st.Members, st.Learners, p.core.Debug(now))
	}
	return string(b) + r.stopIso.summary() + r.epochGap.summary()
}

// every runs f at jittered intervals until until, or a violation.
func (r *lrun) every(interval time.Duration, until int64, f func()) {
	r.w.every(interval, until, func() bool { return r.violation != "" }, f)
}

// starveOne stops a running process, most often the leader, for a burst
// of StarveMin..StarveMax in which it runs nothing: what it receives waits
// and its timers fire late, but its clock goes on (unlike a suspend).
func (r *lrun) starveOne() {
	ps := r.runningProcs()
	if len(ps) == 0 {
		return
	}
	p := ps[r.w.rng.IntN(len(ps))]
	if l := r.leader(); l != nil && l.frozenUntil <= r.w.now && r.w.chance(0.5) {
		p = l
	}
	p.frozenUntil = r.w.now + int64(r.w.between(r.sc.StarveMin, r.sc.StarveMax))
	r.faults++
}

// quotaLeader holds the leader of the moment to a CPU quota for
// QuotaLeader: it runs 10 ms at a time, frozen 90–800 ms between. The
// simulator's processes do their work in no time, so a quota of 10 ms in
// every 100 ms alone would cost nothing; the longer stops stand for the
// backlog a real process builds at 10% of a CPU (its clients' requests,
// its garbage collector), which Jepsen saw cost a lease about once a
// second. Stops reach past MaxLease (620 ms by default), so that the
// leader loses its lease even with the longest renewal lead its stalls
// can teach it (elect's adaptive lead): it must then stand aside, not win
// the lease back. Leadership may change once meanwhile, no more (checked
// in onEvent).
func (r *lrun) quotaLeader() {
	l := r.leader()
	if l == nil {
		r.w.after(50*time.Millisecond, r.quotaLeader)
		return
	}
	r.quota = &quota{id: l.id, from: r.w.now, until: r.w.now + int64(r.sc.QuotaLeader)}

	var burst func()
	burst = func() {
		if r.w.now >= r.quota.until {
			return
		}
		stop := r.w.between(90*time.Millisecond, 800*time.Millisecond)
		if p := r.procs[r.quota.id]; p.up {
			p.frozenUntil = max(p.frozenUntil, r.w.now+int64(stop))
		}
		r.w.after(stop+10*time.Millisecond, burst)
	}
	burst()
}

// quota is the CPU quota quotaLeader holds a leader to, and the reigns
// that began meanwhile.
type quota struct {
	id          edict.ProcessID
	from, until int64
	reigns      []edict.ProcessID
}
