package bully

import (
	"slices"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect"
)

var _ elect.Protocol = (*Invitation)(nil)

// Invitation is Garcia-Molina's Invitation Algorithm for one process
// ("The Invitation Algorithm (1/2), (2/2)", "Concurrency", "Liveness").
// Groups replace the global coordinator: S(i).g names the group, and only
// Normal nodes of one group must agree (Assertion 3).
type Invitation struct {
	cfg   Config
	self  edict.ProcessID
	stage time.Duration

	st  State
	seq uint64
	up  map[edict.ProcessID]bool // coordinator: its group's other members (S(i).Up)

	// Coordinator timers: next Check; the AreYouCoordinator collection;
	// the merge after the priority delay; the wait for Accepts.
	checkAt, collectEnd, mergeAt, acceptEnd timer
	coords                                  map[edict.ProcessID]bool
	// Member timers: next AreYouThere to the coordinator, its answer's
	// deadline, and the wait for Ready after Accept.
	probeAt, probeEnd, readyEnd timer
	probe                       Group
	start                       timer

	out     []elect.Outgoing
	Dropped int
}

// NewInvitation returns process cfg.ID's instance; its first Tick runs
// the Recovery procedure (a singleton group).
func NewInvitation(cfg Config) *Invitation {
	cfg = cfg.withDefaults()
	v := &Invitation{cfg: cfg, self: cfg.ID, stage: cfg.Stage()}
	v.st.S = Election
	v.start = edict.Time{Incarnation: cfg.Incarnation}
	return v
}

// State returns S(i).
func (v *Invitation) State() State { return v.st }

// acceptWait covers an Invitation forwarded by a coordinator and the
// Accept that follows: three message delays and processing.
func (v *Invitation) acceptWait() time.Duration {
	return 3*(v.cfg.T+v.cfg.Processing) + v.cfg.Processing
}

// readyWait covers the candidate's acceptWait from before the Accept was
// sent, and Ready's delay.
func (v *Invitation) readyWait() time.Duration { return v.acceptWait() + v.stage }

// mergeDelay is "a delay inversely proportional to its priority": zero
// for the strongest (highest id), one merge's length more per rank below,
// so that a stronger merge has finished before a weaker one starts.
func (v *Invitation) mergeDelay() time.Duration {
	rank := len(v.cfg.Members) - 1 - slices.Index(v.cfg.Members, v.self)
	return time.Duration(rank) * (v.acceptWait() + v.stage)
}

func (v *Invitation) send(to edict.ProcessID, t Type, g Group, ok bool) {
	v.out = append(v.out, elect.Outgoing{To: to, Payload: Message{Type: t, G: g, OK: ok}.Encode()})
}

func (v *Invitation) newGroup() Group {
	v.seq++
	return Group{Creator: v.self, Incarnation: v.cfg.Incarnation, Seq: v.seq}
}

func (v *Invitation) clearTimers() {
	v.checkAt, v.collectEnd, v.mergeAt, v.acceptEnd = timer{}, timer{}, timer{}, timer{}
	v.probeAt, v.probeEnd, v.readyEnd = timer{}, timer{}, timer{}
}

// recovery is GM's Recovery: a singleton group with itself coordinator
// (Election, Reorganization and Normal in one step: nothing to tell).
func (v *Invitation) recovery(now edict.Time) {
	v.clearTimers()
	g := v.newGroup()
	v.st = State{S: Normal, C: v.self, G: g, D: g}
	v.up = map[edict.ProcessID]bool{}
	v.checkAt = now.Add(v.cfg.CheckPeriod)
}

// check is GM's Check: ask everyone whether it is a coordinator.
func (v *Invitation) check(now edict.Time) {
	v.coords = map[edict.ProcessID]bool{}
	for _, m := range v.cfg.Members {
		if m != v.self {
			v.send(m, MsgAreYouCoordinator, v.st.G, false)
		}
	}
	v.collectEnd = now.Add(v.stage)
}

// merge is GM's Merge: invite the coordinators found and the own group.
func (v *Invitation) merge(now edict.Time) {
	g := v.newGroup()
	v.st = State{S: Election, C: v.self, G: g}
	invite := v.coords
	for m := range v.up {
		invite[m] = true
	}
	for _, m := range v.cfg.Members {
		if invite[m] {
			v.send(m, MsgInvitation, g, false)
		}
	}
	v.up = map[edict.ProcessID]bool{}
	v.acceptEnd = now.Add(v.acceptWait())
}

// Tick implements elect.Protocol.
func (v *Invitation) Tick(now edict.Time) {
	if due(v.start, now) {
		v.start = timer{}
		v.recovery(now)
	}
	if due(v.checkAt, now) {
		v.checkAt = timer{}
		v.check(now)
	}
	if due(v.collectEnd, now) {
		v.collectEnd = timer{}
		if len(v.coords) > 0 {
			v.mergeAt = now.Add(v.mergeDelay())
		} else {
			v.checkAt = now.Add(v.cfg.CheckPeriod)
		}
	}
	if due(v.mergeAt, now) {
		v.mergeAt = timer{}
		v.merge(now)
	}
	if due(v.acceptEnd, now) {
		// Reorganization: tell the accepted members the group is ready.
		v.acceptEnd = timer{}
		v.st.S = Reorganization
		for _, m := range v.cfg.Members {
			if v.up[m] {
				v.send(m, MsgReady, v.st.G, false)
			}
		}
		v.st.S, v.st.D = Normal, v.st.G
		v.checkAt = now.Add(v.cfg.CheckPeriod)
	}
	if due(v.probeAt, now) {
		v.probeAt = timer{}
		v.probe = v.st.G
		v.send(v.st.C, MsgAreYouThere, v.st.G, false)
		v.probeEnd = now.Add(v.stage)
	}
	if due(v.probeEnd, now) || due(v.readyEnd, now) {
		// "Upon timeout … Initiating recovery procedure".
		v.recovery(now)
	}
}

// Receive implements elect.Protocol.
func (v *Invitation) Receive(now edict.Time, from edict.ProcessID, payload []byte) {
	m, err := Decode(payload)
	if err != nil || from == v.self {
		v.Dropped++
		return
	}
	coordinator := v.st.S == Normal && v.st.C == v.self
	switch m.Type {
	case MsgAreYouCoordinator:
		// Answered only in Normal ("Concurrency").
		if v.st.S == Normal {
			v.send(from, MsgAYCAnswer, m.G, coordinator)
		}
	case MsgAYCAnswer:
		if m.OK && coordinator && !v.collectEnd.IsZero() && m.G == v.st.G {
			v.coords[from] = true
		}
	case MsgInvitation:
		// Accepted only in Normal: one election at a time.
		if v.st.S != Normal || m.G == v.st.G {
			return
		}
		if coordinator {
			for _, k := range v.cfg.Members {
				if v.up[k] {
					v.send(k, MsgInvitation, m.G, false)
				}
			}
		}
		v.clearTimers()
		v.up = nil
		v.st = State{S: Election, C: m.G.Creator, G: m.G}
		v.send(m.G.Creator, MsgAccept, m.G, true)
		v.st.S = Reorganization
		v.readyEnd = now.Add(v.readyWait())
	case MsgAccept:
		if v.st.S == Election && v.st.C == v.self && m.G == v.st.G {
			v.up[from] = true
		}
	case MsgReady:
		if v.st.S == Reorganization && v.st.C == from && m.G == v.st.G {
			v.readyEnd = timer{}
			v.st.S, v.st.D = Normal, m.G
			v.probeAt = now.Add(v.cfg.CheckPeriod)
		}
	case MsgAreYouThere:
		v.send(from, MsgAYTAnswer, m.G, v.st.C == v.self && m.G == v.st.G && v.up[from])
	case MsgAYTAnswer:
		if m.G == v.probe && from == v.st.C && !v.probeEnd.IsZero() {
			v.probeEnd = timer{}
			if !m.OK {
				v.recovery(now)
				return
			}
			v.probeAt = now.Add(v.cfg.CheckPeriod)
		}
	}
}

// Observe implements elect.Detector: a failure detector's ProcessDown of
// the coordinator (or of the candidate awaited) replaces the timeouts.
func (v *Invitation) Observe(o elect.Observation) {
	if o.Kind != elect.ProcessDown || v.st.C == v.self || o.Process != v.st.C {
		return
	}
	if v.st.S == Normal || v.st.S == Reorganization {
		v.recovery(o.At)
	}
}

// WeakLeader implements elect.Detector: the coordinator while Normal.
// Under partitions several groups may each name their coordinator; that
// is what a weak leader election allows.
func (v *Invitation) WeakLeader(edict.Time) edict.ProcessID {
	if v.st.S == Normal {
		return v.st.C
	}
	return edict.None
}

// Outbox implements elect.Protocol.
func (v *Invitation) Outbox() []elect.Outgoing {
	out := v.out
	v.out = nil
	return out
}

// NextTick implements elect.Protocol.
func (v *Invitation) NextTick() edict.Time {
	return earliest(v.start, v.checkAt, v.collectEnd, v.mergeAt, v.acceptEnd, v.probeAt, v.probeEnd, v.readyEnd)
}
