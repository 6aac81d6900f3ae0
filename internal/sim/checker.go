package sim

import (
	"fmt"
	"slices"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect"
	"github.com/edictlog/edictlog/wire"
)

// checker evaluates the paper's properties against ground truth: the
// granters' actual variables read at the actual real time.
type checker struct {
	r         *run
	violation string
	checks    int

	edicts []edictRecord
	pairs  int

	promises []promiseRecord
	promised int

	leader    edict.ProcessID // ground-truth leader at the last check
	elections int
	// stableLeader is the first leader seen after GST: Leader Stability
	// (eq. 4) says it stays.
	stableLeader edict.ProcessID
}

type edictRecord struct {
	creator edict.ProcessID
	created int64
	stamp   edict.Stamp
}

type promiseRecord struct {
	verifier *process
	inc      uint64
	leader   edict.ProcessID
	asked    int64 // real time the verification was sent
	until    edict.Time
}

func newChecker(r *run) *checker { return &checker{r: r} }

func (c *checker) fail(format string, args ...any) {
	if c.violation == "" {
		c.violation = fmt.Sprintf("t=%v: ", time.Duration(c.r.w.now)) + fmt.Sprintf(format, args...)
	}
}

// wedgedQuorum reports whether a quorum of epoch's members is wedged.
func (c *checker) wedgedQuorum(e wire.EpochConfig, t int64) bool {
	var wedged []edict.ProcessID
	for _, q := range e.Members {
		if _, w := c.r.procs[q].effectiveGrant(e.Epoch, t); w {
			wedged = append(wedged, q)
		}
	}
	return quorum(e).IsQuorum(wedged)
}

// quorum is e's quorum system; the run's epochs are well formed.
func quorum(e wire.EpochConfig) *edict.Majority {
	q, err := e.Quorum()
	if err != nil {
		panic(err)
	}
	return q
}

// running is the epoch that is RUNNING at t (§10.6): all earlier epochs
// have a wedged quorum and it does not. ok is false if none is.
func (c *checker) running(t int64) (wire.EpochConfig, bool) {
	for _, e := range c.r.epochs {
		if !c.wedgedQuorum(e, t) {
			return e, true
		}
	}
	return wire.EpochConfig{}, false
}

// leaders computes isLeader_p(t) (eq. 12) for every p, in the running
// epoch, from the granters' effective grants.
func (c *checker) leaders(t int64) (uint64, []edict.ProcessID) {
	e, ok := c.running(t)
	if !ok {
		return 0, nil
	}
	return e.Epoch, c.holders(e, t)
}

// carried computes the leaders of epochs before the running one: a
// process that holds a lease of such an epoch (C_p < E_p, as it carries
// it past the epoch's end: elect.Core.WedgeKeeping) on the grants of a
// quorum of it that still stand at t. Grants alone do not make one: a
// leader that gave its lease up and then wedged its epoch leaves its
// granters' last grants standing (a wedge keeps them, and they bind
// those granters in later epochs), but it no longer leads on them.
func (c *checker) carried(t int64) map[edict.ProcessID]uint64 {
	run, ok := c.running(t)
	out := map[edict.ProcessID]uint64{}
	for _, e := range c.r.epochs {
		if ok && e.Epoch >= run.Epoch {
			break
		}
		for _, id := range c.holders(e, t) {
			p := c.r.procs[id]
			if p == nil || p.core == nil {
				continue
			}
			if le, _, _, held := p.core.Lease(p.now(t)); held && le == e.Epoch {
				out[id] = e.Epoch
			}
		}
	}
	return out
}

// holders are the processes a quorum of e's members grants to at t.
func (c *checker) holders(e wire.EpochConfig, t int64) []edict.ProcessID {
	grants := map[edict.ProcessID][]edict.ProcessID{}
	for _, q := range e.Members {
		if p, _ := c.r.procs[q].effectiveGrant(e.Epoch, t); p != edict.None {
			grants[p] = append(grants[p], q)
		}
	}
	var ls []edict.ProcessID
	for p, qs := range grants {
		slices.Sort(qs)
		if quorum(e).IsQuorum(qs) {
			ls = append(ls, p)
		}
	}
	slices.Sort(ls)
	return ls
}

func (c *checker) isLeader(p edict.ProcessID, epoch uint64, t int64) bool {
	e, ls := c.leaders(t)
	return e == epoch && slices.Contains(ls, p)
}

// check runs after every event.
func (c *checker) check() {
	c.checks++
	t := c.r.w.now
	epoch, ls := c.leaders(t)
	// Leader Uniqueness (eq. 1), across epochs: a lease carried past its
	// epoch's end still leads.
	carried := c.carried(t)
	all := slices.Clone(ls)
	for p := range carried {
		if !slices.Contains(all, p) {
			all = append(all, p)
		}
	}
	if len(all) > 1 {
		slices.Sort(all)
		c.fail("Leader Uniqueness (eq. 1): %v all lead (running epoch %d: %v; carried from earlier epochs: %v)", all, epoch, ls, carried)
		return
	}
	var leader edict.ProcessID
	if len(all) == 1 {
		leader = all[0]
	}
	if leader != c.leader {
		c.r.trace("ground-truth leader %v → %v (epoch %d)", c.leader, leader, epoch)
		if leader != edict.None {
			c.elections++
		}
		c.leader = leader
	}
	// Invariant (14): C_p < E_p ⇒ isLeader_p, for crashed processes too.
	for _, id := range c.r.ids {
		p := c.r.procs[id]
		if p.core == nil {
			continue
		}
		now := p.now(t)
		if le, _, _, ok := p.core.Lease(now); ok && (le != epoch || leader != p.id) && (carried[p.id] != le || le >= epoch) {
			c.fail("invariant (14): %v has C_p < E_p in epoch %d but ground-truth leaders of epoch %d are %v (carried %v)", p.id, le, epoch, ls, carried)
			return
		}
		if len(p.past) > 0 && t%int64(100*time.Millisecond) < int64(time.Millisecond) {
			p.pruneGrants(t, c.r.epochs)
		}
	}
	c.checkPromises(t, epoch, leader)
	// Leader Stability (eq. 4) after GST. Its premise is a correct leader:
	// grants may still name a process that crashed before GST (or one that
	// crashed mid-attempt, so a quorum grants to it although it never
	// learned so), and such a phantom lapses; and a lease in force at GST
	// may be due for renewal by messages sent just before GST and lost.
	// So tracking starts one lease after GST, at the first leader that is
	// up and knows it leads: its lease, and every renewal, is then the
	// work of timely messages.
	if t >= c.r.gst+int64(c.r.sc.stabilityDelay()) {
		if c.stableLeader == edict.None {
			if p := c.r.procs[leader]; p != nil && p.up && p.core.IsLeader(p.now(t)) {
				c.stableLeader = leader
			}
		} else if leader != c.stableLeader {
			c.fail("Leader Stability (eq. 4): after GST %v led, now %v does", c.stableLeader, leader)
		}
	}
}

// checkF asserts eq. 16 for p's current core: F_q never decreases, except
// by a release or revocation delivered from the grantee — over the network,
// or locally when the grantee is p itself withdrawing its own grant after
// an aborted attempt or a release (whether p may do so is invariant (14)'s
// business). The grant p withdrew may have been its own before the step
// and another's after it: a candidate that yields to another's campaign
// (elect's yieldCampaign) revokes its own grant and grants the other in
// the step that delivers the other's request. Wedging is final.
func (c *checker) checkF(p *process) {
	for _, e := range p.epochs {
		gs, ok := p.core.Grant(e.Epoch)
		if !ok {
			continue
		}
		prev := p.prevF[e.Epoch]
		m := c.r.delivering
		released := m != nil && (m.Type == wire.LeaseRelease || m.Type == wire.LeaseRevoke) && m.To == p.id && m.From == gs.Grantee
		released = released || gs.Grantee == p.id || prev.grantee == p.id
		if prev.wedged && !gs.Wedged {
			c.fail("eq. 16: %v un-wedged in epoch %d", p.id, e.Epoch)
		}
		if gs.Finish.Before(prev.finish) && !released {
			c.fail("eq. 16: %v's F went from %v to %v in epoch %d", p.id, prev.finish, gs.Finish, e.Epoch)
		}
		p.prevF[e.Epoch] = fState{finish: gs.Finish, grantee: gs.Grantee, wedged: gs.Wedged}
	}
}

// edict records an edict created now and checks Edict Validity (eq. 2).
func (c *checker) edict(p *process, s edict.Stamp) {
	t := c.r.w.now
	if !c.isLeader(p.id, s.Epoch, t) {
		_, ls := c.leaders(t)
		c.fail("Edict Validity (eq. 2): %v created %v while not leader (leaders %v)", p.id, s, ls)
	}
	c.edicts = append(c.edicts, edictRecord{creator: p.id, created: t, stamp: s})
}

func (c *checker) promise(q *process, ev elect.Event) {
	c.promised++
	c.promises = append(c.promises, promiseRecord{verifier: q, inc: q.inc, leader: ev.Leader, asked: q.verifySent[ev.Leader], until: ev.Until})
}

// checkPromises checks leader verification (§10.5, verify.go): while the
// verifier's clock is before Until, the leader leads, unless it released.
func (c *checker) checkPromises(t int64, epoch uint64, leader edict.ProcessID) {
	keep := c.promises[:0]
	for _, pr := range c.promises {
		q := pr.verifier
		if q.inc != pr.inc || !q.clock.read(t, pr.inc).Before(pr.until) {
			continue
		}
		keep = append(keep, pr)
		released := false
		for _, rt := range c.r.procs[pr.leader].releases {
			released = released || rt >= pr.asked
		}
		if leader != pr.leader && !released {
			c.fail("leader verification (§10.5): %v was promised %v leads until %v, but leaders are %v", q.id, pr.leader, pr.until, leader)
		}
	}
	c.promises = keep
}

// eventualElection runs at GST + ElectionBound (eq. 5).
func (c *checker) eventualElection() {
	if _, ls := c.leaders(c.r.w.now); len(ls) == 0 {
		c.fail("Eventual Election (eq. 5): no leader %v after GST", c.r.sc.ElectionBound())
	}
}

// finish checks Edict Ordering (eq. 3) on every pair of edicts: the stamp
// order is the creation order.
func (c *checker) finish() {
	es := c.edicts
	for i := range es {
		for j := i + 1; j < len(es); j++ {
			c.pairs++
			cmp, err := es[i].stamp.Compare(es[j].stamp)
			if err != nil || cmp >= 0 {
				c.fail("Edict Ordering (eq. 3): %v by %v at %v and %v by %v at %v compare %d, %v",
					es[i].stamp, es[i].creator, time.Duration(es[i].created), es[j].stamp, es[j].creator, time.Duration(es[j].created), cmp, err)
				return
			}
		}
	}
}
