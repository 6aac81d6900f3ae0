package elect

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
)

// Ready is what the caller must do after a Tick or Step, in this order:
// persist Persist durably, then send Messages, then act on Events.
type Ready struct {
	Persist  []wire.EpochRecord
	Messages []wire.Lease
	Events   []Event
}

// IsEmpty reports whether there is nothing to do.
func (r Ready) IsEmpty() bool {
	return len(r.Persist) == 0 && len(r.Messages) == 0 && len(r.Events) == 0
}

// Core is one process's lease protocol state machine. It is not safe for
// concurrent use; every call takes the caller's current clock reading,
// which must strictly increase from call to call (eq. 8).
type Core struct {
	cfg   Config
	id    edict.ProcessID
	stats Stats
	// lastGrant is the copy of stats.LastGrant that Stats hands out,
	// made again only after the map changes: the Node publishes Stats
	// after every step, and a copy each time was 4% of a busy leader's
	// allocation.
	lastGrant map[edict.ProcessID]edict.Time
	// releaseCause is what the next lease end reported by checkLease
	// counts as: set by Release and ReleaseSuspended for their own call.
	releaseCause *uint64
	epochs       map[uint64]*epochState
	ordered      []*epochState // epochs by number
	// active is the epoch this process runs in: the lowest one it does not
	// know to be TERMINATED.
	active uint64

	lastNow         edict.Time
	quarantineUntil edict.Time
	// retiring: this life is ending cleanly (Retire): it grants nothing
	// and campaigns for nothing; retiredReported: the Retired event was
	// emitted.
	retiring, retiredReported bool
	// leaderSeen is the last reading at which this process knew a leader
	// or candidate to be at work: its own lease, or a grant it gave. The
	// campaign fallback runs from it (maybeStart); fallbackJitter
	// staggers the members' fallbacks.
	leaderSeen     edict.Time
	fallbackJitter time.Duration

	lease   leaseState
	attempt *attempt
	// stalls are the delays this process saw lately that a renewal lead
	// must cover: how late its runtime called it after the reading
	// NextTick asked for (advance); as leader, a renewal's time from
	// falling due to completing (complete); as granter, how late a
	// leader's renewal came (observeRenewalGap). They set the renewal
	// lead (leadAt).
	stalls stallWindow
	// promised is the reading by which the last NextTick asked to be
	// called (never before the reading it was asked at), until a call
	// at or after it.
	promised edict.Time
	// completed is the last attempt that completed: a grant for it that
	// arrives after the quorum did still tells Stats.LastGrant the peer
	// grants, so a peer that is always the slower one is not reported as
	// never granting.
	completed *attempt
	// failed is the last attempt fail revoked the grants of: a grant to
	// it that comes later is revoked too (onGrantReply).
	failed   *attempt
	backoff  edict.Time // no new attempt before this reading
	verifies map[edict.ProcessID]edict.Time
	wedges   map[uint64]*wedging
	// carryInto is the epoch into which this process carries the lease
	// of the one before it, past that one's end (WedgeKeeping); 0 for
	// none. Meaningful only while the lease is of carryInto−1.
	carryInto uint64
	// renewEnding: renew while the active epoch's successor is known
	// (RenewWhileEnding).
	renewEnding bool
	// carried are the grants of the last lease carried and replaced.
	carried carriedGrants
	// terminatedBelow: every epoch below it is TERMINATED, known here or
	// not (learnTerminated; persisted as wire.EpochRecord.Runs).
	terminatedBelow uint64

	ready Ready
}

// New returns a Core starting at reading now. records are the EpochRecords
// persisted by earlier incarnations. A process whose incarnation is above 1
// has run before and may have granted leases it no longer remembers, so it
// starts in quarantine (docs/protocol.md, "Clocks"), unless the life before
// ended with a clean stop (Config.AfterCleanStop).
func New(cfg Config, records []wire.EpochRecord, now edict.Time) (*Core, error) {
	cfg.ApplyDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c := &Core{
		cfg:        cfg,
		id:         cfg.ID,
		epochs:     map[uint64]*epochState{},
		lastNow:    now,
		leaderSeen: now,
		verifies:   map[edict.ProcessID]edict.Time{},
		wedges:     map[uint64]*wedging{},
	}
	c.drawFallbackJitter()
	for _, e := range cfg.Epochs {
		if err := c.addEpoch(e); err != nil {
			return nil, err
		}
	}
	for _, r := range records {
		es, ok := c.epochs[r.Epoch]
		if !ok {
			return nil, fmt.Errorf("elect: persisted record for epoch %d, which Config.Epochs does not name", r.Epoch)
		}
		es.terminated = r.Terminated
		if r.Wedged {
			es.wedge()
		}
		if r.Runs {
			es.runs = true
			c.terminatedBelow = max(c.terminatedBelow, r.Epoch)
		}
	}
	c.active = c.lowestUnterminated()
	if now.Incarnation > 1 && !cfg.AfterCleanStop {
		c.quarantineUntil = now.Add(cfg.quarantine())
	}
	return c, nil
}

// ID returns the process id.
func (c *Core) ID() edict.ProcessID { return c.id }

// ActiveEpoch returns the epoch this process runs in.
func (c *Core) ActiveEpoch() uint64 { return c.active }

// Quarantined reports whether the process is in its restart quarantine.
func (c *Core) Quarantined(now edict.Time) bool { return now.Before(c.quarantineUntil) }

// Ready returns and clears the pending work.
func (c *Core) Ready() Ready {
	r := c.ready
	c.ready = Ready{}
	return r
}

// advance asserts that readings strictly increase and records now. A
// call later than NextTick asked for is a stall of this process's loop
// — starved of CPU, paused, busy with something else — which the
// renewal lead must cover should one fall due when it renews (leadAt).
// Only this process's own readings enter it, so no network delay or
// partition can; a runtime that does not keep to NextTick, or does not
// ask, teaches nothing this way.
func (c *Core) advance(now edict.Time) {
	if !c.lastNow.Before(now) && c.lastNow != now {
		panic(fmt.Sprintf("elect: clock went backwards: %v after %v", now, c.lastNow))
	}
	c.lastNow = now
	if !c.promised.IsZero() && !now.Before(c.promised) {
		if late, ok := now.Sub(c.promised); ok && late > 0 {
			c.stalls.observe(now, late)
		}
		c.promised = edict.Time{}
	}
}

// Step delivers a message received at reading now. The message must be
// valid (wire.Lease.Validate), as its transport's decoder makes sure; one
// that is misdirected or from a process that may not send it is refused
// with an error and changes nothing.
func (c *Core) Step(now edict.Time, m wire.Lease) error {
	if m.To != c.id {
		return fmt.Errorf("elect: %v addressed to %v delivered to %v", m.Type, m.To, c.id)
	}
	if err := c.checkSender(m); err != nil {
		return err
	}
	c.advance(now)
	c.hearNews(now, m)
	if m.Type == wire.LeaseGrantRequest && m.Wedge && m.LastIndex != 0 {
		c.event(Event{Kind: StopNamed, Epoch: m.Epoch, StopIndex: m.LastIndex, StopStamp: m.LastStamp})
	}
	// A grant that expired since the last reading must be reported before
	// this message can replace its grantee, or the lapse goes unseen and
	// the detector keeps naming a dead process.
	c.checkLapses(now)
	kind := Heard
	if m.Type == wire.LeaseGrantRequest && !m.Wedge && m.Epoch < c.active && c.epochs[m.Epoch] != nil && c.epochs[m.Epoch].terminated {
		// A campaign in an epoch that has ended: the sender missed the
		// change and cannot lead until a leader of the new epoch
		// replicates it to it — which no one will if everyone waits for
		// it as weak leader.
		kind = Lagging
	}
	c.cfg.Detector.Observe(Observation{Kind: kind, Process: m.From, At: now})
	if kind == Heard && (m.Type == wire.LeaseGrantRequest && !m.Wedge && c.campaigns(m) || mutated(ruleStandAside)) {
		c.cfg.Detector.Observe(Observation{Kind: Campaigned, Process: m.From, At: now})
		if m.Type == wire.LeaseGrantRequest && !m.Wedge {
			c.yieldCampaign(now, m)
		}
	}
	switch m.Type {
	case wire.LeaseGrantRequest, wire.LeaseGrant, wire.LeaseNack, wire.LeaseRelease, wire.LeaseRevoke:
		c.deliver(now, m)
	case wire.LeaseVerify:
		c.onVerify(now, m)
	case wire.LeaseRemainder:
		c.onRemainder(now, m)
	case wire.LeaseDetector:
		if p, ok := c.cfg.Detector.(Protocol); ok {
			p.Receive(now, m.From, m.Payload)
		}
	}
	c.tick(now)
	return nil
}

// campaigns reports whether grant request m is a campaign rather than a
// renewal: started, in its sender's clock, at or after the end of every
// lease this process's grants gave it. A renewal sent while that lease
// held can arrive after the grant lapsed here — its sender starved, or
// the network slow — and it says nothing of whether the sender still
// wants to lead: a leader that stood aside (standAsideIfLate) sent it
// before it knew. Readings of one process compare across its
// incarnations too, so a restarted sender's request is a campaign.
func (c *Core) campaigns(m wire.Lease) bool {
	es := c.epochs[m.Epoch]
	if es == nil {
		return true
	}
	end, ok := es.leaseEnd[m.From]
	return !ok || !m.Start.Before(end)
}

// checkSender refuses lease messages from processes outside the epoch:
// misconfiguration or an attack, never a message of a correct run. A
// message of an epoch this process does not know yet is left to the
// handlers, which ignore it until the log brings the epoch.
func (c *Core) checkSender(m wire.Lease) error {
	es := c.epochs[m.Epoch]
	if es == nil || m.Type == wire.LeaseVerify || m.Type == wire.LeaseRemainder || m.Type == wire.LeaseDetector {
		return nil
	}
	if es.qs.IsMember(m.From) {
		return nil
	}
	if m.Type == wire.LeaseGrantRequest && m.Wedge {
		// A member of the next epoch may wedge this one (§10.6); until
		// this process learns that epoch it cannot tell, and ignores it.
		if next := c.epochs[m.Epoch+1]; next == nil || next.qs.IsMember(m.From) {
			return nil
		}
	}
	return fmt.Errorf("elect: %v from %v, which is not a member of epoch %d", m.Type, m.From, m.Epoch)
}

// Tick lets timers fire at reading now: attempt deadlines, renewals, lease
// expiry, lapsed grants, quarantine end, retries.
func (c *Core) Tick(now edict.Time) {
	c.advance(now)
	c.tick(now)
}

func (c *Core) tick(now edict.Time) {
	c.tickProtocol(now)
	c.checkLapses(now)
	// The lease's end first: a process that stands aside drops its
	// renewal rather than revoke it (standAsideIfLate).
	c.checkLease(now)
	c.checkAttempt(now)
	c.retryWedges(now)
	c.maybeStart(now)
	c.checkRetired(now)
}

// NextTick returns the reading at which Tick next has work to do, so a
// runtime can sleep until then (it may call Tick earlier). A deadline that
// is already past but not yet acted on — a renewal due and not started,
// an expiry not yet reported, an attempt to give up, a lapse to report —
// is returned as it is, so that a runtime checking "is NextTick ≤ now?"
// ticks at once. Readings taken by other calls (every Issue takes one)
// must not hide it: under a steady stream of proposals a leader once
// stopped renewing that way. Deadlines that are past and need no action
// (a back-off or a quarantine that has ended) are left out, so an idle
// runtime does not spin. The reading returned is also taken as the
// runtime's promise: a call that comes later than it tells the core that
// its process stalled that long, and the renewal lead grows to match
// (Stats.Stall, Stats.RenewLead).
func (c *Core) NextTick() edict.Time {
	var next edict.Time
	due := func(t edict.Time) { // pending work, overdue or not
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	future := func(t edict.Time) { // matters only until it passes
		if t.After(c.lastNow) {
			due(t)
		}
	}
	if c.attempt != nil {
		due(c.attempt.giveUp)
		due(c.attempt.deadline)
	}
	if c.lease.held() {
		// A renewal is due only if maybeStart would start one: not while
		// the epoch is ending (it lets the lease lapse on purpose).
		if c.attempt == nil && !c.successorKnown(c.active) && c.wedges[c.active] == nil {
			due(c.renewAt())
		}
		due(c.lease.expiry)
	}
	future(c.backoff)
	future(c.quarantineUntil)
	if c.retiring && !c.retiredReported {
		due(c.RetiredAt())
	}
	for _, es := range c.epochsInOrder() {
		if es.grantee != edict.None && es.grantee != c.id && !es.lapseReported && !es.wedged {
			due(es.finish)
		}
	}
	for _, w := range c.wedges {
		due(w.retryAt)
	}
	if p, ok := c.cfg.Detector.(Protocol); ok {
		due(p.NextTick())
	}
	if next.IsZero() {
		// Nothing scheduled: a weak leader still retries; look again after
		// one renewal interval.
		next = c.lastNow.Add(c.cfg.RenewInterval)
	}
	c.promised = next
	if next.Before(c.lastNow) {
		c.promised = c.lastNow // overdue: at once
	}
	return next
}

// tickProtocol runs a Protocol detector's timers when due and sends what
// it asks to send, as wire.LeaseDetector messages of the active epoch.
func (c *Core) tickProtocol(now edict.Time) {
	p, ok := c.cfg.Detector.(Protocol)
	if !ok {
		return
	}
	if next := p.NextTick(); !next.IsZero() && !now.Before(next) {
		p.Tick(now)
	}
	for _, o := range p.Outbox() {
		if o.To == c.id || o.To == edict.None {
			continue
		}
		c.emit(wire.Lease{Type: wire.LeaseDetector, From: c.id, To: o.To, Epoch: c.active, Start: now, Payload: o.Payload})
	}
}

func (c *Core) emit(m wire.Lease) {
	if m.To == c.id {
		panic("elect: self-addressed message must be handled locally")
	}
	newest := c.ordered[len(c.ordered)-1]
	m.Newest, m.NewestMembers, m.NewestRan = newest.epoch, newest.members, newest.epoch == c.active
	m.NewestStopIndex, m.NewestStopStamp = newest.stopIndex, newest.stopStamp
	if c.cfg.Log != nil {
		switch {
		case m.Type == wire.LeaseGrant:
			// A grant reports the granter's durable log, so that a new
			// reign starts from its quorum's most up-to-date one
			// (docs/protocol.md, "The replicated log"); what is not yet on
			// disk may be lost to a crash and then could not be fetched.
			m.LastIndex, m.LastStamp = c.cfg.Log.Durable()
		case m.Type == wire.LeaseGrantRequest && m.Wedge:
			// A wedge names the stop edict its sender knows committed, so
			// that a granter whose log holds it learns it committed
			// (docs/protocol.md, "Epochs and wedging").
			m.LastIndex, m.LastStamp = c.cfg.Log.StopProof()
		}
	}
	c.ready.Messages = append(c.ready.Messages, m)
}

// hearNews learns from the epoch news every message carries (§10.6 as
// docs/protocol.md, "Epochs and wedging" extends it). An epoch newer than any known is learned as
// Heard: its configuration comes from a committed stop edict somewhere,
// so it is the epoch's one true configuration, but this log may not hold
// that edict, so this process may grant and wedge in it and not lead it.
// News that the epoch runs means its sender knows every epoch before it
// TERMINATED (it runs in the lowest it does not), and so may we: a
// wedged quorum stays wedged for good. Older news adds nothing, and news
// that disagrees with a known configuration cannot come from a correct
// peer; both are ignored.
func (c *Core) hearNews(now edict.Time, m wire.Lease) {
	if len(m.NewestMembers) == 0 {
		return
	}
	es := c.epochs[m.Newest]
	if es == nil {
		if m.Newest < c.ordered[len(c.ordered)-1].epoch {
			return
		}
		cfg := wire.EpochConfig{Epoch: m.Newest, Members: slices.Clone(m.NewestMembers), Heard: true, StopIndex: m.NewestStopIndex, StopStamp: m.NewestStopStamp}
		if c.addEpoch(cfg) != nil {
			return
		}
		c.event(Event{Kind: EpochHeard, Epoch: m.Newest, Members: slices.Clone(m.NewestMembers), StopIndex: m.NewestStopIndex, StopStamp: m.NewestStopStamp})
		es = c.epochs[m.Newest]
		c.moveOverGap()
	} else if es.heard && es.stopIndex == 0 && m.NewestStopIndex != 0 && slices.Equal(es.members, m.NewestMembers) {
		// Heard first from a peer that did not know where the stop edict
		// is; now from one that does.
		es.stopIndex, es.stopStamp = m.NewestStopIndex, m.NewestStopStamp
		c.event(Event{Kind: EpochHeard, Epoch: m.Newest, Members: slices.Clone(m.NewestMembers), StopIndex: m.NewestStopIndex, StopStamp: m.NewestStopStamp})
	}
	if m.NewestRan && m.Newest > c.active && !es.terminated {
		c.learnTerminated(now, m.Newest)
	}
}

func (c *Core) event(e Event) { c.ready.Events = append(c.ready.Events, e) }

func (c *Core) persist(es *epochState) {
	c.ready.Persist = append(c.ready.Persist, wire.EpochRecord{Epoch: es.epoch, Wedged: es.wedged, Terminated: es.terminated, Runs: es.runs})
}

// epochsInOrder returns the known epochs by number. It runs on every Step
// and NextTick, so the order is kept, not recomputed: epochs are only
// added (addEpoch).
func (c *Core) epochsInOrder() []*epochState { return c.ordered }

// addEpoch records a new epoch's state and keeps the order. It refuses a
// configuration no epoch can have (wire.EpochConfig.Check).
func (c *Core) addEpoch(cfg wire.EpochConfig) error {
	if err := cfg.Check(); err != nil {
		return fmt.Errorf("elect: %w", err)
	}
	qs, err := cfg.Quorum()
	if err != nil {
		return fmt.Errorf("elect: %w", err)
	}
	es := newEpochState(cfg, qs)
	c.epochs[cfg.Epoch] = es
	i, _ := slices.BinarySearchFunc(c.ordered, cfg.Epoch, func(e *epochState, n uint64) int { return cmp.Compare(e.epoch, n) })
	c.ordered = slices.Insert(c.ordered, i, es)
	return nil
}

// lowestUnterminated is the epoch this process runs in: the lowest it
// knows and does not know TERMINATED — unless an epoch before it is one
// this process has never known and does not know TERMINATED either (news
// named a newer epoch before the log brought the one between): then it
// stays in the terminated epoch below the gap, and grants in none, until
// it learns the gap closed. Moving past the gap once let a process whose
// predecessor epoch had merely ended run in the epoch after next while
// the next still had a leader, and grant there: two leaders at once (the
// simulator's log-replacements-faults, seed 501 of 2,000).
func (c *Core) lowestUnterminated() uint64 {
	eps := c.epochsInOrder()
	for i, es := range eps {
		if es.terminated {
			continue
		}
		if i > 0 && eps[i-1].epoch+1 != es.epoch && c.terminatedBelow < es.epoch && !mutated(ruleNoEpochSkip) {
			return eps[i-1].epoch
		}
		return es.epoch
	}
	return eps[len(eps)-1].epoch
}

// Debug describes the lease core's state in one line, for failure reports.
func (c *Core) Debug(now edict.Time) string {
	s := fmt.Sprintf("active=%d leader=%t backoff=%v weak=%v", c.active, c.lease.valid(now), c.backoff, c.cfg.Detector.WeakLeader(now))
	if a := c.attempt; a != nil {
		s += fmt.Sprintf(" attempt{start=%v grants=%d refusals=%d renewal=%t}", a.start, len(a.grants), a.refusals, a.renewal)
	}
	return s
}

// Stats returns what became of this process's leases so far. Its
// LastGrant is shared by the calls until a grant changes it: read it, do
// not write it.
func (c *Core) Stats() Stats {
	s := c.stats
	if c.lastGrant == nil {
		c.lastGrant = maps.Clone(c.stats.LastGrant)
	}
	s.LastGrant = c.lastGrant
	s.Stall = c.stalls.peak(c.lastNow)
	s.RenewLead = c.leadAt(c.lastNow)
	if c.lease.held() {
		s.RenewLead = max(c.baseLead(), c.lease.lead)
	}
	return s
}
