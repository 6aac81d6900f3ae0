package log

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect"
	"github.com/edictlog/edictlog/wire"
)

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
			panic(fmt.Sprintf("log: committed %v entry %d: %v", e.Kind, i, err))
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
	c.epochs[cfg.Epoch] = cfg
	if b, err := wire.EncodeEpochConfig(cfg); err == nil {
		c.setStable(wire.EpochConfigKey(cfg.Epoch), b)
	}
	c.event(Event{Kind: ConfigChanged, Epoch: cfg.Epoch, Membership: &m})
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
	q, err := edict.NewMajority(cfg.Members...)
	if err != nil {
		panic(fmt.Sprintf("log: committed stop edict names a bad epoch: %v", err))
	}
	if err := c.el.AddEpoch(elect.EpochConfig{Epoch: cfg.Epoch, Quorum: q, StopIndex: cfg.StopIndex, StopStamp: cfg.StopStamp}); err != nil {
		panic(fmt.Sprintf("log: committed stop edict conflicts with a known epoch: %v", err))
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
	q, err := edict.NewMajority(cfg.Members...)
	if err != nil {
		panic(fmt.Sprintf("log: committed configuration names a bad epoch: %v", err))
	}
	if err := c.el.AddEpoch(elect.EpochConfig{Epoch: cfg.Epoch, Quorum: q}); err != nil {
		panic(fmt.Sprintf("log: committed configuration conflicts with a known epoch: %v", err))
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
		panic(fmt.Sprintf("log: the lease core heard of an impossible epoch: %v", err)) // elect checked the news
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

// onEpochTerminated: this process knows an epoch TERMINATED; it now runs
// in the next one it knows.
func (c *Core) onEpochTerminated(now edict.Time, epoch uint64) {
	if c.lead != nil && c.lead.epoch <= epoch {
		c.stepDown(now, "the epoch terminated")
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

func (c *Core) currentConfig() (wire.EpochConfig, error) {
	if c.lead == nil {
		return wire.EpochConfig{}, ErrNotLeader
	}
	cfg := c.epochs[c.lead.epoch]
	cfg.Members, cfg.Learners = slices.Clone(cfg.Members), slices.Clone(cfg.Learners)
	return cfg, nil
}

// AddLearner adds a process that receives the log but does not count in
// quorums, until it is promoted (docs/protocol.md, "Epochs and wedging"). addr is how to reach it.
func (c *Core) AddLearner(now edict.Time, id edict.ProcessID, addr string) (wire.Entry, error) {
	cfg, err := c.currentConfig()
	if err != nil {
		return wire.Entry{}, err
	}
	if slices.Contains(cfg.Members, id) || slices.Contains(cfg.Learners, id) {
		return wire.Entry{}, fmt.Errorf("log: %v is already in epoch %d", id, cfg.Epoch)
	}
	// A snapshot header carries the address too (wire.SnapshotHeader),
	// and refuses one no process can be reached at.
	if err := wire.CheckAddr(addr); err != nil {
		return wire.Entry{}, fmt.Errorf("log: address of %v: %w", id, err)
	}
	cfg.Learners = append(cfg.Learners, id)
	slices.Sort(cfg.Learners)
	return c.proposeMembership(now, wire.EntryConfig, cfg, map[edict.ProcessID]string{id: addr})
}

// Promote makes a learner a member: a new epoch, through a stop edict.
// The learner should have caught up first (the caller checks Status).
func (c *Core) Promote(now edict.Time, id edict.ProcessID) (wire.Entry, error) {
	cfg, err := c.currentConfig()
	if err != nil {
		return wire.Entry{}, err
	}
	if !slices.Contains(cfg.Learners, id) {
		return wire.Entry{}, fmt.Errorf("log: %v is not a learner of epoch %d", id, cfg.Epoch)
	}
	next := wire.EpochConfig{Epoch: cfg.Epoch + 1, Members: append(cfg.Members, id),
		Learners: slices.DeleteFunc(cfg.Learners, func(p edict.ProcessID) bool { return p == id })}
	slices.Sort(next.Members)
	return c.proposeMembership(now, wire.EntryStop, next, nil)
}

// Remove takes a member or learner out: a new epoch for a member, a config
// edict for a learner.
func (c *Core) Remove(now edict.Time, id edict.ProcessID) (wire.Entry, error) {
	cfg, err := c.currentConfig()
	if err != nil {
		return wire.Entry{}, err
	}
	if slices.Contains(cfg.Learners, id) {
		cfg.Learners = slices.DeleteFunc(cfg.Learners, func(p edict.ProcessID) bool { return p == id })
		return c.proposeMembership(now, wire.EntryConfig, cfg, nil)
	}
	if !slices.Contains(cfg.Members, id) {
		return wire.Entry{}, errNotMember(id, cfg.Epoch)
	}
	if len(cfg.Members) == 1 {
		return wire.Entry{}, errors.New("log: cannot remove the last member")
	}
	next := wire.EpochConfig{Epoch: cfg.Epoch + 1, Learners: cfg.Learners,
		Members: slices.DeleteFunc(cfg.Members, func(p edict.ProcessID) bool { return p == id })}
	return c.proposeMembership(now, wire.EntryStop, next, nil)
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
		return 0, fmt.Errorf("log: forced recovery must include this process %v", c.id)
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
	q, _ := edict.NewMajority(cfg.Members...)
	if err := c.el.AddEpoch(elect.EpochConfig{Epoch: cfg.Epoch, Quorum: q}); err != nil {
		panic(err)
	}
	if err := c.el.ForceTerminated(now, cfg.Epoch); err != nil {
		panic(err)
	}
	c.drainElect(now)
}

func errNotMember(p edict.ProcessID, epoch uint64) error {
	return fmt.Errorf("log: %v is not a member of epoch %d", p, epoch)
}
