package elect

import (
	"slices"
	"time"

	"github.com/edictlog/edictlog/edict"
)

// ObservationKind says what a Detector is told.
type ObservationKind uint8

const (
	// ProcessUp: a failure detector (memberlist, the simulator's oracle)
	// considers the process alive.
	ProcessUp ObservationKind = iota + 1
	// ProcessDown: the failure detector suspects the process.
	ProcessDown
	// Heard: a message arrived from the process.
	Heard
	// LeaseLapsed: this process granted to the process and the grant
	// expired unrenewed; docs/protocol.md, "Leases" counts that as a suspicion until the
	// process asks for the lease again (Campaigned).
	LeaseLapsed
	// LeaderSeen: the process holds (or was just granted) the lease.
	LeaderSeen
	// Lagging: the process asked for the lease in an epoch this process
	// knows has ended: it missed the change and cannot lead until it
	// catches up. Suspected until heard from in a later epoch (Heard).
	Lagging
	// Campaigned: the process asked for the lease (a grant request, not
	// a wedge), so it wants to lead; it follows the message's Heard. It,
	// not any message, ends a LeaseLapsed suspicion: a process whose lease
	// lapsed and that only answers — standing aside after losing its lease
	// to its own slowness, or following another leader — is not one to
	// wait for. Were a grant reply enough, a starved ex-leader answering a
	// candidate's request would make that candidate name it weak leader
	// again and give up campaigning (the simulator's log-quota-leader).
	Campaigned
)

// Observation is one input to a Detector.
type Observation struct {
	Kind    ObservationKind
	Process edict.ProcessID
	At      edict.Time
}

// Detector is a weak leader election (§9): it answers which process should
// try for the lease now. Its answer is advice only — several processes may
// believe they are the weak leader at once, and nothing in the lease
// protocol's safety depends on it — but after GST it must settle on one
// live process, or Eventual Election (eq. 5) fails.
//
// The elect core feeds it Heard, Campaigned, LeaseLapsed and LeaderSeen observations;
// the runtime or simulator feeds ProcessUp and ProcessDown from a failure
// detector. A Detector used by the pure core must itself be deterministic.
type Detector interface {
	Observe(o Observation)
	// WeakLeader returns the process that should try for the lease at now,
	// or None if the detector has no opinion.
	WeakLeader(now edict.Time) edict.ProcessID
}

// LowestLive is the weak leader election of §9: the lowest-id member that
// is not suspected. A member is suspected while the failure detector says
// it is down; after a lease we granted it lapsed unrenewed, until it asks
// for the lease again (Campaigned) — memberlist alone needs seconds to declare a death,
// the lapse is known at once; and, with SuspectAfter set, when nothing was
// heard from it for that long. The last rule matters without an external
// failure detector: a dead process that never led never lapses. It also
// suspects live followers, who rarely talk to each other; that is
// harmless, because a live lower id that campaigns is heard, and is then
// no longer suspected. To keep the election stable, a live process known
// to hold the lease stays weak leader even if a lower-id process comes
// back (docs/protocol.md, "Leases").
type LowestLive struct {
	self    edict.ProcessID
	members []edict.ProcessID
	down    map[edict.ProcessID]bool
	lapsed  map[edict.ProcessID]bool
	lagging map[edict.ProcessID]bool
	leader  edict.ProcessID
	// leaderUntil: the leader hint goes stale if nothing confirms it.
	leaderUntil edict.Time
	hintTTL     time.Duration

	// SuspectAfter, if positive, suspects a member not heard from for
	// that long (counted from the first observation for one never heard).
	SuspectAfter time.Duration
	heard        map[edict.ProcessID]edict.Time
	since        edict.Time
}

// NewLowestLive returns the detector for self among members. hintTTL is how
// long a LeaderSeen observation keeps the leader's role against a lower id
// (a lease length is a good choice).
func NewLowestLive(self edict.ProcessID, members []edict.ProcessID, hintTTL time.Duration) *LowestLive {
	ms := slices.Clone(members)
	slices.Sort(ms)
	return &LowestLive{self: self, members: ms, down: map[edict.ProcessID]bool{}, lapsed: map[edict.ProcessID]bool{}, lagging: map[edict.ProcessID]bool{},
		hintTTL: hintTTL, heard: map[edict.ProcessID]edict.Time{}}
}

// Observe implements Detector.
func (d *LowestLive) Observe(o Observation) {
	if d.since.IsZero() {
		d.since = o.At
	}
	switch o.Kind {
	case ProcessUp:
		delete(d.down, o.Process)
	case ProcessDown:
		d.down[o.Process] = true
		if d.leader == o.Process {
			d.leader = edict.None
		}
	case Heard:
		delete(d.lagging, o.Process)
		d.heard[o.Process] = o.At
	case Campaigned:
		delete(d.lapsed, o.Process)
	case Lagging:
		d.lagging[o.Process] = true
		d.heard[o.Process] = o.At
		if d.leader == o.Process {
			d.leader = edict.None
		}
	case LeaseLapsed:
		d.lapsed[o.Process] = true
		if d.leader == o.Process {
			d.leader = edict.None
		}
	case LeaderSeen:
		// Only a hint: it may come second-hand (a nack naming the
		// grantee), so it does not clear a suspicion.
		d.leader = o.Process
		d.leaderUntil = o.At.Add(d.hintTTL)
	}
}

func (d *LowestLive) suspected(p edict.ProcessID, now edict.Time) bool {
	if p == d.self {
		return false
	}
	if d.down[p] || d.lapsed[p] || d.lagging[p] {
		return true
	}
	if d.SuspectAfter > 0 && !d.since.IsZero() {
		last, ok := d.heard[p]
		if !ok || last.Before(d.since) {
			last = d.since
		}
		if !now.Before(last.Add(d.SuspectAfter)) {
			return true
		}
	}
	return false
}

// WeakLeader implements Detector.
func (d *LowestLive) WeakLeader(now edict.Time) edict.ProcessID {
	if d.since.IsZero() {
		d.since = now
	}
	if d.leader != edict.None && now.Before(d.leaderUntil) && !d.suspected(d.leader, now) {
		return d.leader
	}
	for _, m := range d.members {
		if !d.suspected(m, now) {
			return m
		}
	}
	return edict.None
}

// SetMembers replaces the member set, for an epoch change.
func (d *LowestLive) SetMembers(members []edict.ProcessID) {
	d.members = slices.Clone(members)
	slices.Sort(d.members)
}

// Protocol is a weak leader election that runs its own exchange of
// messages: the election algorithms of the papers (Garcia-Molina's Bully
// and Invitation, Stoller's, Aguilera et al.'s Ω, Fetzer and Cristian's
// local leader election). Like the lease Core it is a deterministic state
// machine with no goroutines, sockets or clock of its own: the runtime, or
// the simulator, delivers its messages, ticks it at NextTick, and sends
// what Outbox hands out. Its WeakLeader is its current opinion.
//
// A crash is modelled by dropping the instance; a recovery by a new one
// (algorithms that keep state across crashes say so and take it in their
// constructor).
type Protocol interface {
	Detector
	// Tick runs the timers due at now.
	Tick(now edict.Time)
	// Receive delivers payload, sent by from's Protocol (Outgoing). A
	// payload that does not decode is dropped (and may be counted); it
	// never panics.
	Receive(now edict.Time, from edict.ProcessID, payload []byte)
	// Outbox returns the messages to send since the last call, and
	// forgets them.
	Outbox() []Outgoing
	// NextTick is the next reading at which Tick must run; zero if no
	// timer is set.
	NextTick() edict.Time
}

// Outgoing is one message a Protocol asks to send. Payload is the
// algorithm's own encoding (a version byte and msgpack), opaque to the
// runtime.
type Outgoing struct {
	To      edict.ProcessID
	Payload []byte
}
