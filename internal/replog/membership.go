package replog

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect"
	"github.com/edictlog/edictlog/wire"
)

// Membership errors. A change refused is refused before anything is
// written: nothing of it is in the log, and trying it again is safe. Each
// comes wrapped in a *MembershipError that names the change, the process
// and the epoch; errors.Is finds the sentinel, errors.As the details.
// A change refused because this process does not lead, or leads an epoch
// that is ending, is a *NotLeaderError instead (ErrNotLeader, ErrStopped):
// it may be tried again at the leader.
var (
	// ErrAlreadyMember: the process is already a member or a learner.
	ErrAlreadyMember = errors.New("edictlog: already in the configuration")
	// ErrNotMember: the process is neither a member nor a learner (Remove),
	// or not a member (a transfer's target).
	ErrNotMember = errors.New("edictlog: not in the configuration")
	// ErrNotLearner: only a learner can be promoted.
	ErrNotLearner = errors.New("edictlog: not a learner")
	// ErrLastMember: the last member cannot be removed.
	ErrLastMember = errors.New("edictlog: cannot remove the last member")
	// ErrQuorumLost: the new configuration would have no live quorum
	// among the members this leader hears from (see Force).
	ErrQuorumLost = errors.New("edictlog: the change would leave no live quorum")
	// ErrChangeInProgress: a membership edict this leader appended is not
	// committed yet; one change at a time.
	ErrChangeInProgress = errors.New("edictlog: a membership change is in progress")
	// ErrBadAddress: a learner's address no process can be reached at.
	ErrBadAddress = errors.New("edictlog: bad address")
)

// MembershipError is a membership change refused.
type MembershipError struct {
	// Op is the change: "add learner", "promote", "remove" or "transfer".
	Op      string
	Process edict.ProcessID
	// Epoch is the epoch the leader was in.
	Epoch uint64
	// Live are, for ErrQuorumLost, the members of the new configuration
	// the leader heard from within the liveness window, itself included.
	Live []edict.ProcessID
	Err  error
}

func (e *MembershipError) Error() string {
	s := fmt.Sprintf("%s %v in epoch %d: %v", e.Op, e.Process, e.Epoch, e.Err)
	if errors.Is(e.Err, ErrQuorumLost) {
		s += fmt.Sprintf(" (live members of the new configuration: %v)", e.Live)
	}
	return s
}

func (e *MembershipError) Unwrap() error { return e.Err }

// ChangeOption adjusts a membership change (Core.Promote and Core.Remove,
// Node.PromoteWith and Node.RemoveWith).
type ChangeOption func(*changeOptions)

type changeOptions struct{ force bool }

// Force lets a Promote or Remove through that the quorum check would
// refuse: one whose new configuration has no quorum among the processes
// the leader heard from lately (etcd's --strict-reconfig-check turned
// off). It is for recovery by an operator who knows the members the
// leader does not hear from will come back: until a quorum of the new
// configuration is up, the new epoch has no leader and takes no writes.
// It does not bypass anything safety rests on.
func Force() ChangeOption { return func(o *changeOptions) { o.force = true } }

func forced(opts []ChangeOption) bool {
	var o changeOptions
	for _, f := range opts {
		f(&o)
	}
	return o.force
}

// membershipDone is the highest committed index whose membership effects
// have been carried out.
func (c *Core) processCommitted(now edict.Time) {
	for c.configDone < c.commit {
		i := c.configDone + 1
		c.configDone = i
		e := c.log.entry(i)
		if e == nil || (e.Kind != wire.EntryConfig && e.Kind != wire.EntryStop) {
			continue
		}
		m, err := wire.DecodeMembership(e.Data)
		if err != nil {
			// A committed entry the leader encoded itself: if it does
			// not decode, the log is corrupt and nothing is safe.
			panic(fmt.Sprintf("edictlog: committed %v entry %d: %v", e.Kind, i, err))
		}
		if e.Kind == wire.EntryStop {
			if e.Index > c.stopProof.Index {
				c.stopProof = wire.Position{Index: e.Index, Stamp: e.Stamp}
			}
		}
		if e.Kind == wire.EntryStop {
			m.Config.StopIndex, m.Config.StopStamp = e.Index, e.Stamp
		}
		c.learnMembership(now, m, e.Kind == wire.EntryStop)
	}
}

// learnMembership records a configuration made known by a committed entry.
// A stop edict ends its epoch: the next one's processes wedge it (§10.6).
func (c *Core) learnMembership(now edict.Time, m wire.Membership, stop bool) {
	cfg := m.Config
	old := c.epochs[cfg.Epoch]
	wasHeard := old.Heard
	if cfg.StopIndex == 0 {
		cfg.StopIndex, cfg.StopStamp = old.StopIndex, old.StopStamp // a config edict keeps its epoch's stop
	}
	prev := old
	if stop {
		prev = c.epochs[cfg.Epoch-1]
	}
	c.epochs[cfg.Epoch] = cfg
	if b, err := wire.EncodeEpochConfig(cfg); err == nil {
		c.setStable(wire.EpochConfigKey(cfg.Epoch), b)
	}
	c.event(Event{Kind: ConfigChanged, Epoch: cfg.Epoch, Membership: &m})
	c.noteRemoval(prev, cfg)
	if l := c.lead; l != nil {
		// Tell every peer of the epoch, those the edict takes out among
		// them, that it committed, at once rather than with the next
		// heartbeat: the next epoch's members wedge and elect sooner,
		// and a process removed learns it (Removed) before the leader
		// stops replicating to it.
		for _, pr := range l.progress {
			pr.tellIndex = max(pr.tellIndex, c.configDone)
		}
		l.farewell(c, prev, cfg, c.configDone)
	}
	if !stop && (!c.el.EpochKnown(cfg.Epoch) || wasHeard) {
		// A committed config entry of an epoch the lease core does not
		// know: its stop edict lay inside a snapshot whose metadata names
		// the epoch active when it was taken, an older one. The entry was
		// written by a leader of the epoch, so the epoch ran.
		c.learnRanEpoch(now, cfg)
		return
	}
	if !stop {
		return
	}
	known := cfg
	known.Heard = false // the log holds the stop edict that began it
	if err := c.el.AddEpoch(known); err != nil {
		panic(fmt.Sprintf("edictlog: committed stop edict names a bad epoch or conflicts with a known one: %v", err))
	}
	if c.lead != nil && c.lead.epoch < cfg.Epoch {
		// Keep leading — no new proposals, and the lease core no longer
		// renews — until a quorum of the next epoch holds the stop edict
		// (leaderTick then wedges), or the lease lapses (stepDown wedges).
		// A member that holds it learns from the wedge request's proof
		// that it committed, and the next epoch can elect at once; one
		// that lacks it learns the epoch from the news and fetches the
		// edict from any peer (learn.go), or gets it from the epoch's
		// first leader. Waiting for every member once made one member cut
		// off, or a slow connection to it, cost the cluster its leader
		// until the lease lapsed — and by then the old epoch's removed
		// member may be gone, leaving the old epoch without a quorum to
		// wedge it (Jepsen, a replacement at three members while the
		// third is cut off).
		c.lead.stopped = true
		c.lead.next = cfg.Members
		c.wedgeOnStepDown = true
		return
	}
	c.wedgePredecessors(now)
}

// learnRanEpoch records epoch cfg, known to have had a leader (a
// committed entry of its reign, or a snapshot taken while it was active):
// every epoch before it is TERMINATED (§10.6), so this process learns both
// and wedges nothing — it may not even be a member of the epochs it would
// wedge.
func (c *Core) learnRanEpoch(now edict.Time, cfg wire.EpochConfig) {
	// Known from the log, so not Heard; where the stop edict that began
	// it lies is not known here (it lay inside a snapshot).
	known := wire.EpochConfig{Epoch: cfg.Epoch, Members: cfg.Members, Learners: cfg.Learners}
	if err := c.el.AddEpoch(known); err != nil {
		panic(fmt.Sprintf("edictlog: committed configuration names a bad epoch or conflicts with a known one: %v", err))
	}
	if err := c.el.EpochRan(now, cfg.Epoch); err != nil {
		panic(err)
	}
	c.drainElect(now)
}

// hearEpoch records an epoch the lease core learned from a peer's news
// (elect.EpochHeard): durably, with the records the core will persist in
// it, and marked Heard, so that after a restart too this process grants
// and wedges in it but does not lead it until its own log brings the
// stop edict (learnMembership then replaces the record). A member of the
// epoch helps wedge its predecessors at once, as it would had the log
// brought the epoch.
//
// News that names the stop edict's position says that entry is committed:
// it becomes this process's stop proof, which its wedge requests carry to
// processes that hold the entry without knowing it committed, and what
// learnCommitted fetches up to.
func (c *Core) hearEpoch(now edict.Time, ev elect.Event) {
	if ev.StopIndex > c.stopProof.Index && !mutated(RuleHeardLearns) {
		c.stopProof = wire.Position{Index: ev.StopIndex, Stamp: ev.StopStamp}
	}
	if old, known := c.epochs[ev.Epoch]; known {
		if old.Heard && old.StopIndex == 0 && ev.StopIndex != 0 {
			old.StopIndex, old.StopStamp = ev.StopIndex, ev.StopStamp
			c.epochs[ev.Epoch] = old
			if b, err := wire.EncodeEpochConfig(old); err == nil {
				c.setStable(wire.EpochConfigKey(old.Epoch), b)
			}
		}
		return
	}
	cfg := wire.EpochConfig{Epoch: ev.Epoch, Members: ev.Members, Heard: true, StopIndex: ev.StopIndex, StopStamp: ev.StopStamp}
	if err := cfg.Check(); err != nil {
		panic(fmt.Sprintf("edictlog: the lease core heard of an impossible epoch: %v", err)) // elect checked the news
	}
	if prev, ok := c.epochs[cfg.Epoch-1]; ok && !prev.Heard {
		// A Heard configuration names no learners; a member leaves an
		// epoch only by removal (a promoted learner becomes a member).
		c.noteRemoval(wire.EpochConfig{Epoch: prev.Epoch, Members: prev.Members}, cfg)
	}
	c.epochs[cfg.Epoch] = cfg
	if b, err := wire.EncodeEpochConfig(cfg); err == nil {
		c.setStable(wire.EpochConfigKey(cfg.Epoch), b)
	}
	c.wedgePredecessors(now)
}

// nextEpochHoldsStop reports whether a quorum of the next epoch has
// replicated the stop edict (this leader counts if it is a member).
func (c *Core) nextEpochHoldsStop() bool {
	l := c.lead
	var holders []edict.ProcessID
	for _, p := range l.next {
		if p == c.id && c.persisted >= c.stopProof.Index {
			holders = append(holders, p)
		} else if pr := l.progress[p]; pr != nil && pr.match >= c.stopProof.Index {
			holders = append(holders, p)
		}
	}
	q, err := edict.NewMajority(l.next...)
	return err == nil && q.IsQuorum(holders)
}

// nextEpochLive reports whether the next epoch's members this leader
// heard from lately (liveMembers, itself included) and can bring the log
// form a quorum of it: then the stop edict reaches a quorum of them in
// time (one is still catching up, say), and the leader keeps its lease
// meanwhile (elect.Core.RenewWhileEnding). If they do not, it lets the
// lease lapse: they may be cut off from it and not from each other, and
// they wedge the old epoch only once its grants have lapsed. A member
// that lacks the stop edict and refuses this reign's appends does not
// count: one that learned the next epoch from a peer's news wedged this
// one, and refuses its appends for good, so renewing for it would wait
// forever; once the lease lapses, the next epoch elects a holder of the
// edict, whose reign brings it the log.
func (c *Core) nextEpochLive(now edict.Time) bool {
	l := c.lead
	q, err := edict.NewMajority(l.next...)
	if err != nil {
		return false
	}
	live := slices.DeleteFunc(c.liveMembers(now, l.next), func(p edict.ProcessID) bool {
		pr := l.progress[p]
		return p != c.id && pr != nil && pr.refused && pr.match < c.stopProof.Index && !mutated(RuleRenewForCatchUp)
	})
	return q.IsQuorum(live)
}

// learnNamedStop: a wedge request named the stop edict its sender knows
// committed (elect.StopNamed). If our log holds that very entry, Log
// Matching makes everything up to it committed here too.
func (c *Core) learnNamedStop(now edict.Time, ev elect.Event) {
	if ev.StopIndex > c.commit && ev.StopIndex <= c.log.lastIndex() && c.log.matches(ev.StopIndex, ev.StopStamp) {
		c.commit = ev.StopIndex
		c.processCommitted(now)
	}
}

// wedgePredecessors starts terminating the epochs before the newest known
// that this process may wedge: those it is a member of, or whose successor
// it is a member of (§10.6; granters refuse a wedge from anyone else). The
// lease core retries until a quorum of each is wedged. An epoch further
// back is learned TERMINATED when a later one's wedge completes.
func (c *Core) wedgePredecessors(now edict.Time) {
	top := slices.Max(slices.Collect(maps.Keys(c.epochs)))
	mayWedge := func(e uint64) bool {
		next, ok := c.epochs[e+1]
		return slices.Contains(c.epochs[e].Members, c.id) || ok && slices.Contains(next.Members, c.id)
	}
	for e := range c.epochs {
		if e < top && mayWedge(e) && !c.el.Terminated(e) {
			if err := c.el.Wedge(now, e); err != nil {
				panic(err)
			}
		}
	}
	c.drainElect(now)
}

// succession is a leader's taking its next epoch over, or handing it
// over, once it ended its own epoch with a stop edict (succeed).
type succession struct {
	from  uint64      // the epoch that ends
	reign edict.Stamp // the reign that ended it
	// to is who leads the next epoch: this process if it is a member of
	// it, else the member it hands over to.
	to     edict.ProcessID
	handed bool       // from is terminated: the campaign or hand-over has begun
	until  edict.Time // give up the leader hint after this reading
}

// succeed ends this leader's epoch once its stop edict has committed and
// a quorum of the next epoch holds it (§10.6: "the new epoch has
// significant control over which process it wants to be leader
// initially"). It gives its lease up and wedges its epoch — its granters
// wedge at once, since they grant to it — and once the wedged members
// meet every quorum (onEpochTerminated):
//
//   - a leader that is a member of the next epoch campaigns in it at
//     once, without waiting for its failure detector or the stability
//     rule, as a transfer's target does; its reign starts from its own
//     log, which holds everything the old epoch committed, and the
//     reign-start rule still picks the most up-to-date log of its
//     granting quorum;
//   - a leader that removed itself hands over (TimeoutNow) to the member
//     of the next epoch whose log is the most up to date, which wedges
//     the old epoch — already wedged: one round trip — and campaigns.
//
// Either is only a choice of who campaigns first in the next epoch, and
// when: a member of e+1 may campaign in it as soon as it knows e
// terminated, whoever it is (docs/protocol.md, "Membership changes that
// keep the leader").
func (c *Core) succeed(now edict.Time) {
	l := c.lead
	to := c.id
	if !slices.Contains(l.next, c.id) {
		to = edict.None
		var best uint64
		for _, p := range l.next {
			if pr := l.progress[p]; pr != nil && pr.match >= c.stopProof.Index && (to == edict.None || pr.match > best) {
				to, best = p, pr.match
			}
		}
	}
	if to != edict.None && !mutated(RuleLeaderSucceeds) {
		c.succession = &succession{from: l.epoch, reign: l.reign, to: to, until: now.Add(c.el.MaxLease())}
	}
	if to == c.id && c.succession != nil && !mutated(RuleCarryLease) {
		// Keep the lease while wedging and campaigning: reads go on, and
		// writes wait (ErrStopped) rather than find no leader.
		kept, err := c.el.WedgeKeeping(now, l.epoch)
		if err != nil {
			panic(err)
		}
		if kept {
			l.carrying = true
			c.wedgeOnStepDown = false
			c.drainElect(now)
			return
		}
	}
	// Releasing steps down, and the step down wedges (wedgeOnStepDown).
	c.release(now, "the next epoch holds the stop edict; wedging")
	if s := c.succession; s != nil && !s.handed {
		c.leaderHint = s.to
	}
}

// HandingOver reports whether this process, the leader of an epoch whose
// stop edict left it out of the next, has yet to hand the next epoch over
// (TimeoutNow): it still leads the ending epoch, or is wedging it. A
// process stopped meanwhile leaves the next epoch to its detectors: a
// lease and an election instead of one transfer.
func (c *Core) HandingOver(now edict.Time) bool {
	if l := c.lead; l != nil {
		return l.next != nil && !slices.Contains(l.next, c.id)
	}
	s := c.succession
	return s != nil && !s.handed && s.to != c.id && now.Before(s.until)
}

// successor reports whether this process is about to lead the next epoch
// of one it led and ended (succeed), or was handed (onTimeoutNow): it is
// wedging that epoch, or waiting to campaign or campaigning in the next. Its Status names it the leader meanwhile, and
// a write it refuses says ErrNotReady, so that callers wait for it
// rather than look for another leader.
func (c *Core) successor(now edict.Time) bool {
	s := c.succession
	if s == nil || s.to != c.id || c.lead != nil && !c.lead.carrying || !now.Before(s.until) {
		return false
	}
	return !s.handed && c.el.Wedging(s.from) || c.campaignIn != 0 || c.el.Campaigning()
}

// checkSuccession ends a succession that is over: the reign began
// (startReign), the hand-over is sent, or the wedging or the campaign
// failed or ran out of time. A leader hint naming this process goes with
// it, and so does one naming a hand-over's target that was never sent.
func (c *Core) checkSuccession(now edict.Time) {
	s := c.succession
	if s == nil {
		return
	}
	var pending bool
	switch {
	case c.lead != nil && !c.lead.carrying || !now.Before(s.until):
	case !s.handed:
		pending = c.el.Wedging(s.from) || c.campaignIn != 0
	case s.to == c.id:
		pending = c.campaignIn != 0 || c.el.Campaigning()
	}
	if pending {
		return
	}
	c.succession = nil
	if l := c.lead; l != nil && l.carrying {
		// The wedge or the campaign failed, or ran out of time: a lease
		// carried on would hold the next epoch's granters back from
		// anyone else until it lapsed (elect's carriedTo).
		c.release(now, "the next epoch's reign did not begin; giving the carried lease up")
	}
	if c.lead == nil && (c.leaderHint == c.id || !s.handed && c.leaderHint == s.to) {
		c.leaderHint = edict.None
	}
}

// onEpochTerminated: this process knows an epoch TERMINATED; it now runs
// in the next one it knows.
func (c *Core) onEpochTerminated(now edict.Time, epoch uint64) {
	if l := c.lead; l != nil && l.epoch <= epoch && !(l.carrying && c.el.Carrying(now)) {
		c.stepDown(now, "the epoch terminated")
	}
	if s := c.succession; s != nil && !s.handed && epoch >= s.from {
		s.handed = true
		if s.to == c.id {
			c.campaignIn = s.from + 1 // afterStep campaigns once the next epoch is active
		} else {
			// TimeoutNow goes with the messages sent after the batch
			// that holds the termination records.
			c.handOver(s.to, s.from+1, s.reign)
		}
	}
	active := c.el.ActiveEpoch()
	c.event(Event{Kind: EpochChanged, Epoch: active})
	// Tell the detector at once, in whichever form it takes it: the
	// gossip detector also advertises the epoch to its peers.
	switch d := c.cfg.Elect.Detector.(type) {
	case interface {
		SetEpoch(uint64, []edict.ProcessID)
	}:
		d.SetEpoch(active, c.epochs[active].Members)
	case interface{ SetMembers([]edict.ProcessID) }:
		d.SetMembers(c.epochs[active].Members)
	}
}

// proposeMembership appends a config or stop edict.
func (c *Core) proposeMembership(now edict.Time, kind wire.EntryKind, next wire.EpochConfig, addrs map[edict.ProcessID]string) (wire.Entry, error) {
	data, err := wire.EncodeMembership(wire.Membership{Config: next, Addrs: addrs})
	if err != nil {
		return wire.Entry{}, err
	}
	e, err := c.Propose(now, kind, data)
	if err == nil && kind == wire.EntryStop {
		c.lead.stopped = true // the stop edict is the epoch's last (Stoppable Paxos)
	}
	return e, err
}

// currentConfig is the configuration a membership change, op of process
// id, starts from: the leader's epoch's, once every membership edict this
// leader appended has committed. The configuration is the committed one,
// so a second change proposed before the first commits would be derived
// from a configuration that lacks the first, and undo it.
func (c *Core) currentConfig(op string, id edict.ProcessID) (wire.EpochConfig, error) {
	switch {
	case c.lead == nil && c.successor(c.lastNow):
		return wire.EpochConfig{}, ErrNotReady
	case c.lead == nil:
		return wire.EpochConfig{}, ErrNotLeader
	case c.lead.phase != phaseReady:
		return wire.EpochConfig{}, ErrNotReady
	case c.lead.stopped:
		return wire.EpochConfig{}, ErrStopped
	}
	cfg := c.epochs[c.lead.epoch]
	cfg.Members, cfg.Learners = slices.Clone(cfg.Members), slices.Clone(cfg.Learners)
	for i := max(c.configDone, c.log.snap.Index) + 1; i <= c.log.lastIndex(); i++ {
		if e := c.log.entry(i); e != nil && (e.Kind == wire.EntryConfig || e.Kind == wire.EntryStop) {
			return wire.EpochConfig{}, &MembershipError{Op: op, Process: id, Epoch: cfg.Epoch, Err: ErrChangeInProgress}
		}
	}
	return cfg, nil
}

// AddLearner adds a process that receives the log but does not count in
// quorums, until it is promoted (docs/protocol.md, "Epochs and wedging").
// addr is how to reach it. A config edict, not a new epoch: the leader
// goes on leading.
func (c *Core) AddLearner(now edict.Time, id edict.ProcessID, addr string) (wire.Entry, error) {
	c.advanceClock(now)
	cfg, err := c.currentConfig("add learner", id)
	if err != nil {
		return wire.Entry{}, err
	}
	if slices.Contains(cfg.Members, id) || slices.Contains(cfg.Learners, id) {
		return wire.Entry{}, &MembershipError{Op: "add learner", Process: id, Epoch: cfg.Epoch, Err: ErrAlreadyMember}
	}
	// A snapshot header carries the address too (wire.SnapshotHeader),
	// and refuses one no process can be reached at.
	if err := wire.CheckAddr(addr); err != nil {
		return wire.Entry{}, &MembershipError{Op: "add learner", Process: id, Epoch: cfg.Epoch, Err: fmt.Errorf("%w: %w", ErrBadAddress, err)}
	}
	cfg.Learners = append(cfg.Learners, id)
	slices.Sort(cfg.Learners)
	return c.proposeMembership(now, wire.EntryConfig, cfg, map[edict.ProcessID]string{id: addr})
}

// Promote makes a learner a member: a new epoch, through a stop edict.
// The learner should have caught up first (the caller checks Status).
// Unless Force is given, it is refused with ErrQuorumLost if the new
// configuration has no quorum among the processes this leader heard
// from lately (checkQuorum). When the stop edict has committed and a
// quorum of the new epoch holds it, this leader, a member of the new
// epoch too, wedges the old one and leads the new one from its own log
// at once (docs/protocol.md, "Membership changes that keep the leader").
func (c *Core) Promote(now edict.Time, id edict.ProcessID, opts ...ChangeOption) (wire.Entry, error) {
	c.advanceClock(now)
	cfg, err := c.currentConfig("promote", id)
	if err != nil {
		return wire.Entry{}, err
	}
	if !slices.Contains(cfg.Learners, id) {
		return wire.Entry{}, &MembershipError{Op: "promote", Process: id, Epoch: cfg.Epoch, Err: ErrNotLearner}
	}
	next := wire.EpochConfig{Epoch: cfg.Epoch + 1, Members: append(cfg.Members, id), Retiring: cfg.Retiring,
		Learners: slices.DeleteFunc(cfg.Learners, func(p edict.ProcessID) bool { return p == id })}
	slices.Sort(next.Members)
	if err := c.checkQuorum(now, "promote", id, cfg.Epoch, next.Members, opts); err != nil {
		return wire.Entry{}, err
	}
	return c.proposeMembership(now, wire.EntryStop, next, nil)
}

// Remove takes a member or learner out: a new epoch for a member (a stop
// edict), a config edict for a learner. A member's removal is checked
// like Promote's (checkQuorum, Force). When this leader removes another
// member it goes on leading the new epoch after a short gap, as for
// Promote.
//
// When it removes itself it retires instead (retire): the edict it
// appends is a config edict of the current epoch that names it Retiring.
// Once that commits it hands leadership to the member whose log is the
// most up to date, and the next leader, a member of the new
// configuration, removes it with a stop edict and leads on as through any
// other removal: the cluster's gap is the transfer's. The removal is
// decided before the transfer, in the log, so a leader that follows a
// failed transfer, or the retiring process leading again, carries it out
// all the same. With Force, the leader ends the epoch itself and hands
// the next one over once it is wedged (succeed): a round trip longer, but
// without the next leader's own quorum check.
func (c *Core) Remove(now edict.Time, id edict.ProcessID, opts ...ChangeOption) (wire.Entry, error) {
	c.advanceClock(now)
	cfg, err := c.currentConfig("remove", id)
	if err != nil {
		return wire.Entry{}, err
	}
	if slices.Contains(cfg.Learners, id) {
		cfg.Learners = slices.DeleteFunc(cfg.Learners, func(p edict.ProcessID) bool { return p == id })
		return c.proposeMembership(now, wire.EntryConfig, cfg, nil)
	}
	if !slices.Contains(cfg.Members, id) {
		return wire.Entry{}, &MembershipError{Op: "remove", Process: id, Epoch: cfg.Epoch, Err: ErrNotMember}
	}
	if len(cfg.Members) == 1 {
		return wire.Entry{}, &MembershipError{Op: "remove", Process: id, Epoch: cfg.Epoch, Err: ErrLastMember}
	}
	next := wire.EpochConfig{Epoch: cfg.Epoch + 1, Learners: cfg.Learners, Retiring: cfg.Retiring,
		Members: slices.DeleteFunc(slices.Clone(cfg.Members), func(p edict.ProcessID) bool { return p == id })}
	if next.Retiring == id {
		next.Retiring = edict.None
	}
	if err := c.checkQuorum(now, "remove", id, cfg.Epoch, next.Members, opts); err != nil {
		return wire.Entry{}, err
	}
	if id == c.id && !forced(opts) && !mutated(RuleRetireFirst) {
		if cfg.Retiring == c.id {
			return wire.Entry{}, ErrTransferring // retiring already: retire hands over
		}
		cfg.Retiring = c.id
		return c.proposeMembership(now, wire.EntryConfig, cfg, nil)
	}
	return c.proposeMembership(now, wire.EntryStop, next, nil)
}

// retire carries out a committed retirement (wire.EpochConfig.Retiring)
// of the epoch this process leads. The retiring leader transfers
// leadership to the member whose log is the most up to date, again after
// a transfer that lapsed, though not in its reign's first MaxLease unless
// every member granted the reign; any other leader removes the retiring
// member, again after a refusal (a change in flight, the quorum check),
// as soon as its reign serves membership changes. Both are only a choice
// of what this leader proposes next: safety rests on the transfer and the
// removal themselves.
func (c *Core) retire(now edict.Time) {
	l := c.lead
	if l == nil || l.phase != phaseReady || l.stopped || l.transfer != edict.None {
		return
	}
	cfg := c.epochs[l.epoch]
	switch cfg.Retiring {
	case edict.None:
	case c.id:
		if now.Before(l.attempt.Add(c.el.MaxLease())) && !c.grantedByAll(cfg.Members, l.attempt) && !mutated(RuleRetireSettled) {
			// A reign just won, after a transfer that failed: a member
			// that has not granted it may still campaign, or hold a
			// grant given to a rival, and refuse the target. Such grants
			// lapse within MaxLease; the reign serves meanwhile.
			return
		}
		// A member that granted the current lease is out of quarantine.
		if to := c.mostUpToDate(cfg.Members, now.Add(-c.el.MaxLease())); to != edict.None {
			// Tell the members the retirement committed before the
			// hand-over (tellIndex, from learnMembership): its target
			// and the others then know it without waiting for the next
			// reign's start to commit it.
			c.sendAppends(now)
			_ = c.TransferLeadership(now, to)
		}
	default:
		if _, err := c.Remove(now, cfg.Retiring); err == nil {
			c.sendAppends(now)
		}
	}
}

// grantedByAll reports whether every member other than this process
// granted it a lease at reading since or later.
func (c *Core) grantedByAll(members []edict.ProcessID, since edict.Time) bool {
	grants := c.el.Stats().LastGrant
	for _, p := range members {
		if g, ok := grants[p]; p != c.id && (!ok || g.Before(since)) {
			return false
		}
	}
	return true
}

// mostUpToDate is the member of members, other than this leader and a
// retiring member, whose log matches the leader's furthest (None if no
// other member answered this reign yet). With grantedSince set, only a
// member that granted this leader its lease at that reading or later
// qualifies: one that restarted lately grants nothing while in
// quarantine, and would not campaign on a transfer either until it ends.
func (c *Core) mostUpToDate(members []edict.ProcessID, grantedSince edict.Time) edict.ProcessID {
	l := c.lead
	retiring := c.epochs[l.epoch].Retiring
	var grants map[edict.ProcessID]edict.Time
	if !grantedSince.IsZero() {
		grants = c.el.Stats().LastGrant
	}
	to := edict.None
	var best uint64
	for _, p := range members {
		pr := l.progress[p]
		if p == c.id || p == retiring || pr == nil || to != edict.None && pr.match <= best {
			continue
		}
		if g, ok := grants[p]; grants != nil && (!ok || g.Before(grantedSince)) {
			continue
		}
		to, best = p, pr.match
	}
	return to
}

// checkQuorum refuses a change whose new configuration, members, has no
// quorum among the processes this leader heard from within liveWindow
// (etcd's strict reconfiguration check, isConnectedToQuorumSince): its
// stop edict would commit in the old epoch, and the new one could then
// elect no leader until enough of its members came back. This leader
// counts as heard; a peer counts if it answered an append of this reign
// (a refusal too: it is up) or granted this process a lease lately.
func (c *Core) checkQuorum(now edict.Time, op string, id edict.ProcessID, epoch uint64, members []edict.ProcessID, opts []ChangeOption) error {
	if forced(opts) {
		return nil
	}
	live := c.liveMembers(now, members)
	q, err := edict.NewMajority(members...)
	if err != nil {
		return &MembershipError{Op: op, Process: id, Epoch: epoch, Err: err}
	}
	if !q.IsQuorum(live) {
		return &MembershipError{Op: op, Process: id, Epoch: epoch, Live: live, Err: ErrQuorumLost}
	}
	return nil
}

// liveWindow is how recently a peer must have answered for checkQuorum
// to count it live: twice the longest lease. A peer that is up answers
// every heartbeat (every 50 ms by default) and every renewal (one about
// every 40 ms), so a peer silent that long has missed dozens of each,
// while a stall of the peer's host or of the network as long as a lease
// — which the lease protocol rides out — does not make it look dead.
// etcd asks more of a peer (isConnectedSince: its connection up for the
// last 5 s, HealthInterval), from a transport this Core does not see; a
// leader here knows only what its reign has heard, since its progress
// starts empty with every reign, so a change asked for in the first
// moments of a reign, before a slow member's first answer, may be
// refused, and can be tried again.
func (c *Core) liveWindow() time.Duration {
	return max(2*c.el.MaxLease(), 4*c.cfg.Heartbeat)
}

// liveMembers are the processes among members this leader heard from
// within liveWindow, itself included.
func (c *Core) liveMembers(now edict.Time, members []edict.ProcessID) []edict.ProcessID {
	since := edict.Time{Incarnation: now.Incarnation, Nanos: now.Nanos - int64(c.liveWindow())}
	grants := c.el.Stats().LastGrant
	var live []edict.ProcessID
	for _, p := range members {
		heard := p == c.id
		if pr := c.lead.progress[p]; pr != nil && !pr.lastReply.IsZero() && !pr.lastReply.Before(since) {
			heard = true
		}
		if g, ok := grants[p]; ok && !g.Before(since) {
			heard = true
		}
		if heard {
			live = append(live, p)
		}
	}
	return live
}

// noteRemoval emits Removed when cfg, the configuration that follows
// prev, leaves out this process, which prev has as a member or learner.
// The edict that made cfg is committed, so the removal stands unless a
// later change adds the process again; a process that learns it from
// its log after a restart is told again.
func (c *Core) noteRemoval(prev, cfg wire.EpochConfig) {
	in := func(e wire.EpochConfig) bool {
		return slices.Contains(e.Members, c.id) || slices.Contains(e.Learners, c.id)
	}
	if !in(prev) || in(cfg) || c.removedFrom >= cfg.Epoch+1 {
		return
	}
	c.removedFrom = cfg.Epoch + 1
	c.event(Event{Kind: Removed, Epoch: cfg.Epoch})
}

// RemovedAfter reports whether this process knows a configuration of an
// epoch after epoch that leaves it out, from a committed edict or a
// peer's news (the Removed event).
func (c *Core) RemovedAfter(epoch uint64) bool { return c.removedFrom > epoch+1 }

// farewell keeps the processes cfg leaves out of prev among the peers
// this leader replicates to, until each has been sent the commit of the
// edict at index (or MaxLease has passed): a learner removed by a config
// edict would otherwise drop out of peers at once, and never learn it
// was removed. A member removed by a stop edict stays a peer of the
// leader's epoch anyway, until the epoch ends.
func (l *leader) farewell(c *Core, prev, cfg wire.EpochConfig, index uint64) {
	if prev.Epoch != cfg.Epoch {
		return
	}
	for _, p := range prev.Learners {
		if p != c.id && !slices.Contains(cfg.Members, p) && !slices.Contains(cfg.Learners, p) {
			if l.leaving == nil {
				l.leaving = map[edict.ProcessID]leaving{}
			}
			l.leaving[p] = leaving{index: index, until: c.lastNow.Add(c.el.MaxLease())}
		}
	}
}

// ForceRecovery is the operator's way out after the loss of a quorum (the
// paper's "manual intervention", §10.6). It starts a new epoch whose members
// are the given survivors, declaring every earlier epoch TERMINATED
// without wedging it.
//
// It is UNSAFE if any process left out is in fact alive and can still
// reach a quorum of the old epoch: two epochs could then run at once and
// committed writes could be lost or diverge. Run it only when the missing
// processes are gone for good, on every survivor, with the same members.
// The survivor with the most up-to-date log should campaign first; the
// reign-start rule picks the best log among those that grant.
func (c *Core) ForceRecovery(now edict.Time, members []edict.ProcessID) (uint64, error) {
	c.advanceClock(now)
	if !slices.Contains(members, c.id) {
		return 0, &MembershipError{Op: "forced recovery", Process: c.id, Epoch: slices.Max(slices.Collect(maps.Keys(c.epochs))), Err: ErrNotMember}
	}
	top := slices.Max(slices.Collect(maps.Keys(c.epochs)))
	cfg := wire.EpochConfig{Epoch: top + 1, Members: slices.Sorted(slices.Values(members))}
	if err := cfg.Check(); err != nil {
		return 0, err
	}
	c.stepDown(now, "forced recovery")
	c.learnMembershipForced(now, cfg)
	return cfg.Epoch, nil
}

func (c *Core) learnMembershipForced(now edict.Time, cfg wire.EpochConfig) {
	c.epochs[cfg.Epoch] = cfg
	if b, err := wire.EncodeEpochConfig(cfg); err == nil {
		c.setStable(wire.EpochConfigKey(cfg.Epoch), b)
	}
	if err := c.el.AddEpoch(wire.EpochConfig{Epoch: cfg.Epoch, Members: cfg.Members, Learners: cfg.Learners}); err != nil {
		panic(err)
	}
	if err := c.el.ForceTerminated(now, cfg.Epoch); err != nil {
		panic(err)
	}
	c.drainElect(now)
}

func errNotMember(p edict.ProcessID, epoch uint64) error {
	return &MembershipError{Op: "transfer", Process: p, Epoch: epoch, Err: ErrNotMember}
}
