package sim

import (
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect"
	"github.com/edictlog/edictlog/wire"
)

// schedule sets up the run's workload and faults.
func (r *run) schedule() {
	sc := &r.sc
	// The application: every process tries to create edicts.
	for _, id := range r.ids {
		p := r.procs[id]
		r.every(sc.EdictInterval, r.end, func() { r.createEdict(p) })
	}
	// Leader verification (§10.5) between random pairs.
	r.every(sc.VerifyInterval, r.end, func() {
		ups := r.upProcesses()
		if len(ups) < 2 {
			return
		}
		q, p := ups[r.w.rng.IntN(len(ups))], ups[r.w.rng.IntN(len(ups))]
		if p != q && q.up {
			q.verifySent[p.id] = r.w.now
			r.call(q, func(now edict.Time) { q.core.VerifyLeader(now, p.id) })
		}
	})
	// Clock rates wander for the whole run (eq. 15 holds throughout).
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
	if sc.Partitions {
		r.every(900*time.Millisecond, r.gst, func() { r.net.partitionRandomly(r.ids) })
	}
	if sc.Competing {
		r.every(600*time.Millisecond, r.gst, func() {
			for _, p := range r.upProcesses() {
				r.confuse(p)
			}
		})
	} else if !sc.NoFailureDetector {
		// A realistic detector still errs before GST.
		r.every(400*time.Millisecond, r.gst, r.falseSuspicion)
	}
	if sc.Transfers {
		r.every(800*time.Millisecond, r.gst, r.transfer)
	}
	if sc.Reconfigure {
		r.w.at(r.gst/2-int64(r.w.between(0, time.Second)), r.reconfigure)
	}
	r.w.at(r.gst, r.stabilize)
	r.w.at(r.gst+int64(sc.ElectionBound()), r.chk.eventualElection)
}

func (r *run) createEdict(p *process) {
	if !p.up {
		return
	}
	r.call(p, func(now edict.Time) {
		s, err := p.core.Issue(now)
		if err == nil {
			r.chk.edict(p, s)
			return
		}
		if r.sc.RogueLeader && p.lastQT != nil {
			// The broken leader of the negative control: it stamps with
			// its last quorum timestamp without checking C_p < E_p.
			p.rogueN++
			r.chk.edict(p, edict.Stamp{Epoch: p.lastEpoch, QT: p.lastQT, Counter: 1<<40 + p.rogueN})
		}
	})
}

// crashOne crashes a random process and restarts it later (by GST at the
// latest). Its variables stay as they were (the paper's model).
func (r *run) crashOne() {
	ups := r.upProcesses()
	if len(ups) == 0 {
		return
	}
	p := ups[r.w.rng.IntN(len(ups))]
	down := r.w.between(min(50*time.Millisecond, r.sc.MaxDowntime/2), r.sc.MaxDowntime)
	// Not near GST: a retiring process grants nothing, and the elections
	// after GST must not wait for its stop.
	if p.downAfterRetire == 0 && r.w.now+int64(2*r.sc.MaxLease()) < r.gst && r.w.chance(r.sc.CleanStops) {
		// A clean stop: p goes down when its grants have lapsed
		// (onEvent, elect.Retired), unless a crash comes first.
		r.trace("%v stops cleanly", p.id)
		p.downAfterRetire = down
		p.releases = append(p.releases, r.w.now)
		r.call(p, p.core.Retire)
		return
	}
	r.down(p, down)
}

// down takes p down now and restarts it after down (by GST at the latest).
func (r *run) down(p *process, down time.Duration) {
	p.up = false
	r.trace("%v goes down", p.id)
	r.reportTo(p.id, elect.ProcessDown)
	r.w.at(min(r.w.now+int64(down), r.gst), func() { r.restart(p) })
}

func (r *run) restart(p *process) {
	if p.up || r.sc.NoFailureDetector && p.id == r.ids[0] && r.w.now >= r.gst {
		return
	}
	// A restart ends a verification promise (verify.go): the new
	// incarnation may revoke the old one's grants.
	p.releases = append(p.releases, r.w.now)
	r.restarts++
	r.start(p, r.knownEpochs(p))
	r.trace("%v restarts as incarnation %d", p.id, p.inc)
	r.reportTo(p.id, elect.ProcessUp)
}

// knownEpochs is what p's stable storage and log tell it after a restart.
func (r *run) knownEpochs(p *process) []wire.EpochConfig {
	if r.sc.ForgetOnRestart {
		return r.epochs[:1]
	}
	return p.epochs
}

// reportTo has the failure detector tell every other live process about
// target, after a detection delay.
func (r *run) reportTo(target edict.ProcessID, kind elect.ObservationKind) {
	if r.sc.NoFailureDetector {
		return
	}
	for _, q := range r.upProcesses() {
		if q.id == target {
			continue
		}
		det := q.detector
		r.w.after(r.w.between(0, r.sc.detectDelay()), func() {
			det.Observe(elect.Observation{Kind: kind, Process: target, At: q.now(r.w.now)})
		})
	}
}

func (r *run) falseSuspicion() {
	ups := r.upProcesses()
	if len(ups) < 2 {
		return
	}
	q, x := ups[r.w.rng.IntN(len(ups))], ups[r.w.rng.IntN(len(ups))]
	det := q.detector
	det.Observe(elect.Observation{Kind: elect.ProcessDown, Process: x.id, At: q.now(r.w.now)})
	r.w.after(r.w.between(50*time.Millisecond, 500*time.Millisecond), func() {
		det.Observe(elect.Observation{Kind: elect.ProcessUp, Process: x.id, At: q.now(r.w.now)})
	})
}

// confuse makes p's detector suspect everyone else, so p believes itself
// the weak leader: the competing-candidates case of §10.2.
func (r *run) confuse(p *process) {
	for _, id := range r.ids {
		if id != p.id {
			p.detector.Observe(elect.Observation{Kind: elect.ProcessDown, Process: id, At: p.now(r.w.now)})
		}
	}
}

// transfer has the current leader release (§6) and another process
// campaign at once, as a leadership transfer does.
func (r *run) transfer() {
	ups := r.upProcesses()
	for _, p := range ups {
		if p.core.IsLeader(p.now(r.w.now)) {
			p.releases = append(p.releases, r.w.now)
			r.call(p, func(now edict.Time) { p.core.Release(now, r.sc.MaxLease()) })
			t := ups[r.w.rng.IntN(len(ups))]
			if t != p {
				r.call(t, t.core.Campaign)
			}
			return
		}
	}
}

// reconfigure is the stop edict of epoch 0 becoming known: every process
// learns epoch 1 (with a delay, as the log would deliver it), the new
// member starts, and each process that knows epoch 1 wedges epoch 0 until
// it learns it terminated.
func (r *run) reconfigure() {
	next := r.epochs[1]
	for _, id := range r.ids {
		p := r.procs[id]
		r.w.after(r.w.between(0, 300*time.Millisecond), func() {
			if !p.started {
				r.start(p, r.epochs)
				r.reportTo(p.id, elect.ProcessUp)
			} else {
				p.epochs = r.epochs
				if p.up {
					r.call(p, func(edict.Time) {
						if err := p.core.AddEpoch(next); err != nil {
							r.chk.fail("AddEpoch: %v", err)
						}
					})
				}
			}
			r.every(200*time.Millisecond, r.end, func() {
				if r.sc.Carry && p.up && p.core.EpochKnown(1) && p.core.Carrying(p.now(r.w.now)) {
					// Its next reign's campaign, after a while: until
					// then it leads on the carried lease.
					r.w.after(r.w.between(0, 150*time.Millisecond), func() {
						if p.up {
							r.call(p, p.core.Campaign)
						}
					})
				}
				if p.up && p.core.EpochKnown(1) && !p.core.Terminated(0) {
					r.call(p, func(now edict.Time) {
						if r.sc.Carry && p.core.IsLeader(now) && !p.core.Wedging(0) {
							kept, err := p.core.WedgeKeeping(now, 0)
							if err != nil {
								r.chk.fail("WedgeKeeping: %v", err)
							}
							if kept {
								return
							}
						}
						if p.core.IsLeader(now) {
							// Wedging its own epoch gives the lease up,
							// as a release does (verify.go's caveat).
							p.releases = append(p.releases, r.w.now)
						}
						if err := p.core.Wedge(now, 0); err != nil {
							r.chk.fail("Wedge: %v", err)
						}
					})
				}
			})
		})
	}
}

// stabilize is GST: the network heals, crashed processes restart and every
// detector learns the truth.
func (r *run) stabilize() {
	r.net.heal()
	if r.sc.NoFailureDetector {
		r.procs[r.ids[0]].up = false // the lowest id is gone for good
	}
	for _, id := range r.ids {
		if p := r.procs[id]; p.started && !p.up && !(r.sc.NoFailureDetector && id == r.ids[0]) {
			r.restart(p)
		}
	}
	for _, q := range r.upProcesses() {
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
