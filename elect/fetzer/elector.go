package fetzer

import (
	"maps"
	"slices"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect"
)

var _ elect.Protocol = (*Elector)(nil)

// Elector is one process of the local leader election service (Figs. 30,
// 31). Not safe for concurrent use: the runtime serialises calls, like the
// lease Core's.
type Elector struct {
	cfg  Config
	self edict.ProcessID

	// Independent assessment (§VII): lastMsg for the members of aliveSet.
	alive map[edict.ProcessID]edict.Time
	// heard is the datagram layer's echo table (fast.go).
	heard map[edict.ProcessID]echo

	// The lock (§VIII): lockedTo = (lockedTo, lockedReq) until lockedUntil;
	// lockedSupport is the support set lockedTo piggy-backed (§X).
	lockedTo      edict.ProcessID
	lockedReq     edict.Time
	lockedUntil   edict.Time
	lockedSupport []edict.ProcessID

	// The candidate's state: lastRequest is zero when no Election is
	// outstanding.
	lastRequest edict.Time
	replySet    map[edict.ProcessID]bool
	targetSet   map[edict.ProcessID]bool

	imLeader   bool
	expiration edict.Time
	supportSet []edict.ProcessID

	// The alarm clocks aliveAC and releaseAC; zero when not set.
	aliveAt, releaseAt edict.Time
	// mayLockFrom: no supportive reply before it (Recovery, doc.go).
	mayLockFrom edict.Time
	started     bool

	out   []elect.Outgoing
	stats Stats
	// broken is set only by the checkers' negative controls.
	broken broken
}

// broken deliberately breaks the protocol, so that tests can show that
// the checkers catch it: alone becomes leader on its own support (breaks BI), mute never sends
// an Election (breaks T), literal keeps a leadership whose renewal failed,
// as Fig. 31 reads (see doc.go).
type broken struct{ alone, mute, literal bool }

// Stats counts what an Elector did, for measurements.
type Stats struct {
	// Elections is how many Election messages it broadcast; Won how many
	// made or kept it leader (first elections and renewals).
	Elections, Won, Renewed int
	// ElectionTime sums, over Won, the clock time from the broadcast to
	// becoming (or staying) leader: the measure of §XI, Fig. 25.
	ElectionTime time.Duration
	// RenewalTime sums the same over the renewals alone.
	RenewalTime time.Duration
	// Replies is how many Reply messages it received; Dropped how many
	// payloads did not decode.
	Replies, Dropped int
}

// New returns the Elector for cfg. It panics if cfg does not Validate: a
// configuration error is the caller's bug, and the constraints are what
// make the protocol correct.
func New(cfg Config) *Elector {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	cfg = cfg.withDefaults()
	e := &Elector{cfg: cfg, self: cfg.ID, alive: map[edict.ProcessID]edict.Time{},
		heard: map[edict.ProcessID]echo{}, replySet: map[edict.ProcessID]bool{}, targetSet: map[edict.ProcessID]bool{}}
	// "aliveAC.SetAlarm(H())" (Fig. 31): at once. A reading of nanos 0 on
	// this incarnation is due at the first opportunity.
	e.aliveAt = edict.Time{Incarnation: cfg.Incarnation}
	return e
}

// Config returns the configuration with its defaults filled in.
func (e *Elector) Config() Config { return e.cfg }

// Stats returns the counters.
func (e *Elector) Stats() Stats { return e.stats }

// touch runs on every input: it fixes the start for the recovery wait.
func (e *Elector) touch(now edict.Time) {
	if !e.started {
		e.started = true
		if e.cfg.Incarnation > 1 {
			e.mayLockFrom = now.Add(e.cfg.LockTime)
		}
	}
}

// Observe implements elect.Detector. The protocol is its own failure
// detector (the alive-sets), so observations are ignored.
func (e *Elector) Observe(elect.Observation) {}

// IsLeader is the paper's Leader?() (Fig. 31): H() < expirationTime ∧
// imLeader.
func (e *Elector) IsLeader(now edict.Time) bool {
	return e.imLeader && now.Before(e.expiration)
}

// Support returns this process's support set — its logical partition
// (§X) — while it is leader, else nil.
func (e *Elector) Support(now edict.Time) []edict.ProcessID {
	if !e.IsLeader(now) {
		return nil
	}
	return slices.Clone(e.supportSet)
}

// LeaderUntil is expirationTime while this process is leader, else zero.
func (e *Elector) LeaderUntil(now edict.Time) edict.Time {
	if !e.IsLeader(now) {
		return edict.Time{}
	}
	return e.expiration
}

// LocalLeader reports the local leader of this process's logical
// partition, that partition (the leader's support set, §X), and whether it
// is authoritative: a majority of Members (Nerio §10.3; in majority mode
// every leader is). On the leader itself the answer is exact. On a
// follower it is the leader's claim as carried by the last Election the
// follower locked to, and holds while that lock does: the follower is in
// that support set only if its earlier reply was counted, and it may lag
// the leader by a round. None, nil, false when this process knows of no
// local leader that counts it.
func (e *Elector) LocalLeader(now edict.Time) (leader edict.ProcessID, support []edict.ProcessID, authoritative bool) {
	maj := len(e.cfg.Members)/2 + 1
	if e.IsLeader(now) {
		return e.self, slices.Clone(e.supportSet), len(e.supportSet) >= maj
	}
	if e.lockedTo != edict.None && e.lockedTo != e.self && !now.After(e.lockedUntil) &&
		slices.Contains(e.lockedSupport, e.self) {
		return e.lockedTo, slices.Clone(e.lockedSupport), len(e.lockedSupport) >= maj
	}
	return edict.None, nil, false
}

// WeakLeader implements elect.Detector: who should try for the lease. A
// leader names itself; any other process names the process it is locked
// to (its candidate, possibly itself), while the lock lasts; else None.
func (e *Elector) WeakLeader(now edict.Time) edict.ProcessID {
	if e.IsLeader(now) {
		return e.self
	}
	if e.lockedTo != edict.None && !now.After(e.lockedUntil) {
		return e.lockedTo
	}
	return edict.None
}

// Outbox implements elect.Protocol.
func (e *Elector) Outbox() []elect.Outgoing {
	out := e.out
	e.out = nil
	return out
}

// NextTick implements elect.Protocol: the earlier alarm.
func (e *Elector) NextTick() edict.Time {
	switch {
	case e.aliveAt.IsZero():
		return e.releaseAt
	case e.releaseAt.IsZero():
		return e.aliveAt
	case e.releaseAt.Before(e.aliveAt):
		return e.releaseAt
	}
	return e.aliveAt
}

// Tick implements elect.Protocol: the alarm clocks' WakeUp events, those
// due at now (NextTick ≤ now). An early Tick does nothing.
func (e *Elector) Tick(now edict.Time) {
	e.touch(now)
	if !e.releaseAt.IsZero() && !now.Before(e.releaseAt) {
		e.releaseAt = edict.Time{}
		e.checkIfLeader(now)
	}
	if !e.aliveAt.IsZero() && !now.Before(e.aliveAt) {
		e.aliveAt = edict.Time{}
		e.wakeAlive(now)
	}
}

// Receive implements elect.Protocol: fa-deliver.
func (e *Elector) Receive(now edict.Time, from edict.ProcessID, payload []byte) {
	e.touch(now)
	m, err := Decode(payload)
	if err != nil || from == e.self || !slices.Contains(e.cfg.Members, from) {
		e.stats.Dropped++
		return
	}
	fast := e.classify(now, from, &m)
	switch m.Kind {
	case Election:
		e.onElection(now, from, m, fast)
	case Reply:
		e.stats.Replies++
		e.onReply(now, from, m, fast)
	case Release:
		e.onRelease(from, m.Request)
	}
}

func (e *Elector) send(to edict.ProcessID, m Message, now edict.Time) {
	e.stampFor(&m, to, now)
	b, err := m.Encode()
	if err != nil {
		panic(err) // our own messages are valid by construction
	}
	e.out = append(e.out, elect.Outgoing{To: to, Payload: b})
}

func (e *Elector) broadcast(m Message, now edict.Time) {
	for _, p := range e.cfg.Members {
		if p != e.self {
			e.send(p, m, now)
		}
	}
}

// purge is PurgeAliveSet (Fig. 31): it drops entries older than expires
// and returns the first clock time at which no smaller id can remain.
func (e *Elector) purge(now edict.Time) edict.Time {
	noMinBefore := now
	for p, last := range e.alive {
		until := last.Add(e.cfg.Expires)
		if !now.Before(until) {
			delete(e.alive, p)
		} else if e.self > p && until.After(noMinBefore) {
			noMinBefore = until
		}
	}
	return noMinBefore
}

// updateAlive is UpdateAliveSet (Fig. 31).
func (e *Elector) updateAlive(from edict.ProcessID, fast bool, now edict.Time) {
	if fast {
		e.alive[from] = now
	}
	e.purge(now)
}

func (e *Elector) aliveMin() edict.ProcessID {
	minimum := edict.None
	for p := range e.alive {
		if minimum == edict.None || p < minimum {
			minimum = p
		}
	}
	return minimum
}

func sorted(s map[edict.ProcessID]bool) []edict.ProcessID {
	return slices.Sorted(maps.Keys(s))
}

// wakeAlive is "when aliveAC.WakeUp" (Fig. 31).
func (e *Elector) wakeAlive(now edict.Time) {
	next := e.purge(now)
	clear(e.replySet)
	clear(e.targetSet)
	for p := range e.alive {
		e.targetSet[p] = true
	}
	if minimum := e.aliveMin(); minimum != edict.None && e.self > minimum {
		// Not the smallest: sleep until the smaller ids could expire. That
		// is after now (purge kept only entries that expire after now), and
		// the Tick then purges them.
		e.lastRequest = edict.Time{}
		e.aliveAt = next
		return
	}
	if e.broken.mute {
		e.aliveAt = now.Add(e.cfg.EP)
		return
	}
	e.lastRequest = now
	e.stats.Elections++
	m := Message{Kind: Election, Request: now, Alive: sorted(e.targetSet)}
	if e.IsLeader(now) {
		m.Support = slices.Clone(e.supportSet) // §X piggy-back
	}
	e.broadcast(m, now)
	e.releaseAt = now.Add(scale(2*e.cfg.Delta, 1+e.cfg.Rho))
	// fa-broadcast delivers to the sender too; locally, at once and fast.
	e.onElection(now, e.self, m, true)
}

// onElection is "when fa-deliver(Election)" (Fig. 31).
func (e *Elector) onElection(now edict.Time, from edict.ProcessID, m Message, fast bool) {
	e.updateAlive(from, fast, now)
	support := fast && from == e.aliveMin() && from <= e.self &&
		(e.lockedUntil.Before(now) || from == e.lockedTo) && !now.Before(e.mayLockFrom)
	if support {
		e.lockedTo, e.lockedReq = from, m.Request
		e.lockedUntil = now.Add(e.cfg.LockTime)
		e.lockedSupport = slices.Clone(m.Support)
	}
	if from == e.self {
		if support && m.Request == e.lastRequest {
			e.replySet[e.self] = true
		}
		return
	}
	// Deviation (doc.go, "Bootstrap"): a slow Election is answered too,
	// never supportively, so that the round trip that classifies the next
	// message exists.
	e.send(from, Message{Kind: Reply, Request: m.Request, Supportive: support}, now)
}

// onReply is "when fa-deliver(Reply)" (Fig. 31).
func (e *Elector) onReply(now edict.Time, from edict.ProcessID, m Message, fast bool) {
	e.updateAlive(from, fast, now)
	if !fast || e.lastRequest.IsZero() || m.Request != e.lastRequest || !m.Supportive {
		return
	}
	e.replySet[from] = true
	if maps.Equal(e.replySet, e.targetSet) && e.IsLeader(now) {
		// A leader renews as soon as all of its target set replied.
		e.releaseAt = edict.Time{}
		e.checkIfLeader(now)
	}
}

// onRelease is "when fa-deliver(Release)" (Fig. 31).
func (e *Elector) onRelease(from edict.ProcessID, request edict.Time) {
	if e.lockedTo == from && e.lockedReq == request {
		e.lockedUntil = edict.Time{}
	}
}

// checkIfLeader is CheckIfLeader (Fig. 31).
func (e *Elector) checkIfLeader(now edict.Time) {
	if e.lastRequest.IsZero() {
		return
	}
	e.purge(now)
	aliveSet := map[edict.ProcessID]bool{}
	for p := range e.alive {
		aliveSet[p] = true
	}
	replies := sorted(e.replySet)
	ok := e.targetSet[e.self] && maps.Equal(e.replySet, aliveSet) &&
		len(replies) > 0 && replies[0] == e.self && len(replies) >= e.cfg.MinSupporters()
	if e.broken.alone {
		ok = e.targetSet[e.self] && e.replySet[e.self]
		replies = []edict.ProcessID{e.self}
	}
	took, _ := now.Sub(e.lastRequest)
	if ok {
		if e.IsLeader(now) {
			e.stats.Renewed++
			e.stats.RenewalTime += took
		}
		e.stats.Won++
		e.stats.ElectionTime += took
		e.supportSet = replies
		e.imLeader = true
		e.expiration = e.lastRequest.Add(scale(e.cfg.LockTime, 1-2*e.cfg.Rho))
		e.aliveAt = e.expiration.Add(-scale(2*e.cfg.Delta, 1+e.cfg.Rho) - e.cfg.Sigma)
	} else {
		// Deviation (doc.go, "Failed renewal"): a leader whose renewal
		// failed steps down before releasing, or its supporters could
		// lock elsewhere while it still counts them (SO).
		if !e.broken.literal {
			e.imLeader = false
		}
		e.aliveAt = e.lastRequest.Add(e.cfg.EP - e.cfg.Sigma)
		if len(e.replySet) > 0 {
			e.broadcast(Message{Kind: Release, Request: e.lastRequest}, now)
			e.onRelease(e.self, e.lastRequest)
		}
	}
	if e.aliveAt.Before(now) {
		e.aliveAt = now
	}
	e.lastRequest = edict.Time{}
}
