package bully

import (
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect"
)

var _ elect.Protocol = (*Bully)(nil)

// phase is where a Bully candidate is in its own election.
type phase uint8

const (
	idle    phase = iota
	probing       // phase 1: AreYouThere sent to stronger nodes
	backoff       // a stronger node answered: wait to be halted
	halting       // phase 2 step 1: Halt sent to weaker nodes, collecting HaltAcks
	reorg         // NewCoordinator sent; Ready follows
	halted        // halted by S(i).h: waiting for NewCoordinator and Ready
)

// Bully is Garcia-Molina's Bully Algorithm for one process. Stronger means
// a higher id (Garcia-Molina's order, not the slides'; see the package
// comment).
type Bully struct {
	cfg   Config
	self  edict.ProcessID
	stage time.Duration

	st State

	ph      phase
	elid    Group // the election this process runs (probing..reorg)
	seq     uint64
	pending map[edict.ProcessID]bool // stronger nodes not yet answered (probing); weaker not yet acked (halting)
	up      map[edict.ProcessID]bool // S(i).Up: nodes that acked the Halt
	down    map[edict.ProcessID]bool // suspected by the failure detector (Stoller's DownSig)
	answer  edict.ProcessID          // the stronger node whose answer made this one back off

	deadline  timer // of the current phase
	suspectAt timer // follower: the coordinator has been silent too long
	probe     Group // follower: the AreYouThere sent to the coordinator
	probeEnd  timer
	checkAt   timer // coordinator: next Check
	start     timer // the Recovery procedure, run at the first Tick

	out     []elect.Outgoing
	Dropped int // payloads that did not decode
}

// NewBully returns process cfg.ID's instance. Like Garcia-Molina's
// Recovery procedure it starts an election at once (at its first Tick).
func NewBully(cfg Config) *Bully {
	cfg = cfg.withDefaults()
	b := &Bully{cfg: cfg, self: cfg.ID, stage: cfg.Stage(), down: map[edict.ProcessID]bool{}}
	b.st.S = Election
	b.start = edict.Time{Incarnation: cfg.Incarnation}
	return b
}

// State returns S(i).
func (b *Bully) State() State { return b.st }

// Timeouts, each derived from the model's bounds (package comment).
func (b *Bully) suspectAfter() time.Duration { return b.cfg.CheckPeriod + b.stage }
func (b *Bully) reorgDelay() time.Duration   { return b.cfg.T + b.cfg.Processing }

// backoffTimeout covers a stronger node's own detection lag and whole
// election (3 stages), or the coordinator's next Check and the election
// it starts (CheckPeriod + 3 stages), with a stage to spare.
func (b *Bully) backoffTimeout() time.Duration { return b.cfg.CheckPeriod + 5*b.stage }

// haltedTimeout covers the halter's wait for HaltAcks, its
// reorganization and Ready's delay.
func (b *Bully) haltedTimeout() time.Duration { return 2*b.stage + b.reorgDelay() }

func (b *Bully) send(to edict.ProcessID, t Type, g Group, ok bool) {
	b.out = append(b.out, elect.Outgoing{To: to, Payload: Message{Type: t, G: g, OK: ok}.Encode()})
}

// election starts an election (GM's Election procedure): phase 1 probes
// every stronger node not known to be down, concurrently (Stoller §4
// item 2; Garcia-Molina probes them one by one).
func (b *Bully) election(now edict.Time) {
	b.seq++
	b.elid = Group{Creator: b.self, Incarnation: b.cfg.Incarnation, Seq: b.seq}
	b.st = State{S: Election, H: b.self}
	b.suspectAt, b.probeEnd, b.checkAt = timer{}, timer{}, timer{}
	b.pending = map[edict.ProcessID]bool{}
	for _, m := range b.cfg.Members {
		if m > b.self && !b.down[m] {
			b.pending[m] = true
			b.send(m, MsgAreYouThere, b.elid, false)
		}
	}
	b.ph = probing
	b.deadline = now.Add(b.stage)
	if len(b.pending) == 0 {
		b.haltPhase(now)
	}
}

// haltPhase is phase 2 step 1: no stronger node answered.
func (b *Bully) haltPhase(now edict.Time) {
	b.ph = halting
	b.pending = map[edict.ProcessID]bool{}
	b.up = map[edict.ProcessID]bool{}
	for _, m := range b.cfg.Members {
		if m < b.self {
			b.pending[m] = true
			b.send(m, MsgHalt, b.elid, false)
		}
	}
	b.deadline = now.Add(b.stage)
	if len(b.pending) == 0 {
		b.newCoordinator(now)
	}
}

// newCoordinator is phase 2 step 2, sent only to Up ("The Actual Bully
// Algorithm (2/3)"); Ready follows after reorgDelay.
func (b *Bully) newCoordinator(now edict.Time) {
	b.ph = reorg
	b.st = State{S: Reorganization, C: b.self, H: b.self, D: b.elid}
	for _, m := range b.cfg.Members {
		if b.up[m] {
			b.send(m, MsgNewCoordinator, b.elid, false)
		}
	}
	b.deadline = now.Add(b.reorgDelay())
}

func (b *Bully) ready(now edict.Time) {
	b.ph = idle
	b.deadline = timer{}
	b.st.S = Normal
	for _, m := range b.cfg.Members {
		if b.up[m] {
			b.send(m, MsgReady, b.elid, false)
		}
	}
	b.checkAt = now.Add(b.cfg.CheckPeriod)
}

// Tick implements elect.Protocol.
func (b *Bully) Tick(now edict.Time) {
	if due(b.start, now) {
		b.start = timer{}
		b.election(now)
	}
	if due(b.deadline, now) {
		b.deadline = timer{}
		switch b.ph {
		case probing:
			b.haltPhase(now)
		case halting:
			b.newCoordinator(now)
		case reorg:
			b.ready(now)
		case backoff, halted:
			// The stronger node or the halter failed: "Failure of the
			// candidate during the second phase will trigger a new election".
			b.election(now)
		}
	}
	if due(b.suspectAt, now) {
		// The failure suspector's TIMEOUT in Normal: ask the coordinator.
		b.suspectAt = timer{}
		b.seq++
		b.probe = Group{Creator: b.self, Incarnation: b.cfg.Incarnation, Seq: b.seq}
		b.send(b.st.C, MsgAreYouThere, b.probe, false)
		b.probeEnd = now.Add(b.stage)
	}
	if due(b.probeEnd, now) {
		b.probeEnd = timer{}
		b.election(now)
	}
	if due(b.checkAt, now) {
		// Check ("The Actual Bully Algorithm (3/3)").
		for _, m := range b.cfg.Members {
			if m != b.self {
				b.send(m, MsgAreYouNormal, b.st.D, false)
			}
		}
		b.checkAt = now.Add(b.cfg.CheckPeriod)
	}
}

// Receive implements elect.Protocol.
func (b *Bully) Receive(now edict.Time, from edict.ProcessID, payload []byte) {
	m, err := Decode(payload)
	if err != nil || from == b.self {
		b.Dropped++
		return
	}
	delete(b.down, from)
	if b.st.S == Normal && from == b.st.C && b.st.C != b.self {
		b.heard(now)
	}
	switch m.Type {
	case MsgAreYouThere:
		b.send(from, MsgAYTAnswer, m.G, true)
		// A stronger node answers and runs its own election ("The Bully
		// Election Algorithm (2/3)") only when it is not already in one
		// and its coordinator is weaker than itself; otherwise, as in
		// GM's actual algorithm, ARE-U-THERE is a null RPC (see package
		// comment).
		if from < b.self && b.st.S == Normal && b.st.C < b.self {
			b.election(now)
		}
	case MsgAYTAnswer:
		if b.ph == probing && m.G == b.elid && from > b.self {
			b.ph, b.answer = backoff, from
			b.deadline = now.Add(b.backoffTimeout())
		}
		if m.G == b.probe && from == b.st.C {
			b.probe, b.probeEnd = Group{}, timer{}
		}
	case MsgHalt:
		if from < b.self {
			// A weaker node halting a live stronger one missed our answer
			// (we recovered after its phase 1): bully it back.
			if b.ph != probing && b.ph != halting && b.ph != reorg {
				b.election(now)
			}
			return
		}
		b.ph = halted
		b.st = State{S: Election, H: from}
		b.elid = m.G
		b.suspectAt, b.probeEnd, b.checkAt = timer{}, timer{}, timer{}
		b.deadline = now.Add(b.haltedTimeout())
		b.send(from, MsgHaltAck, m.G, true)
	case MsgHaltAck:
		if b.ph == halting && m.G == b.elid && b.pending[from] {
			delete(b.pending, from)
			b.up[from] = true
			if len(b.pending) == 0 {
				b.newCoordinator(now)
			}
		}
	case MsgNewCoordinator:
		if b.ph == halted && b.st.H == from && m.G == b.elid {
			b.st = State{S: Reorganization, C: from, H: from, D: m.G}
		}
	case MsgReady:
		if b.ph == halted && b.st.H == from && m.G == b.elid {
			b.ph, b.deadline = idle, timer{}
			b.st = State{S: Normal, C: from, H: from, D: m.G}
			b.heard(now)
		}
	case MsgAreYouNormal:
		b.send(from, MsgNormalAnswer, m.G, b.st.S == Normal && b.st.C == from)
	case MsgNormalAnswer:
		if !m.OK && b.st.S == Normal && b.st.C == b.self && m.G == b.st.D {
			b.election(now)
		}
	}
}

// heard restarts the failure suspector on a message from the coordinator.
func (b *Bully) heard(now edict.Time) {
	b.suspectAt = now.Add(b.suspectAfter())
}

// Observe implements elect.Detector: ProcessDown is Stoller's DownSig and
// replaces the timeouts where it is faster.
func (b *Bully) Observe(o elect.Observation) {
	switch o.Kind {
	case elect.ProcessUp, elect.Heard:
		delete(b.down, o.Process)
		return
	case elect.ProcessDown:
	default:
		return
	}
	p, now := o.Process, o.At
	b.down[p] = true
	switch {
	case b.st.S == Normal && p == b.st.C && p != b.self:
		b.election(now)
	case b.ph == halted && p == b.st.H, b.ph == backoff && p == b.answer:
		b.election(now)
	case b.ph == probing && b.pending[p]:
		delete(b.pending, p)
		if len(b.pending) == 0 {
			b.haltPhase(now)
		}
	case b.ph == halting && b.pending[p]:
		delete(b.pending, p)
		if len(b.pending) == 0 {
			b.newCoordinator(now)
		}
	}
}

// WeakLeader implements elect.Detector: the coordinator while Normal, and
// no opinion otherwise — the slides' specification only speaks of Normal
// nodes (Assertion 1), and None keeps a half-elected coordinator from
// campaigning for the lease.
func (b *Bully) WeakLeader(edict.Time) edict.ProcessID {
	if b.st.S == Normal {
		return b.st.C
	}
	return edict.None
}

// Outbox implements elect.Protocol.
func (b *Bully) Outbox() []elect.Outgoing {
	out := b.out
	b.out = nil
	return out
}

// NextTick implements elect.Protocol.
func (b *Bully) NextTick() edict.Time {
	return earliest(b.start, b.deadline, b.suspectAt, b.probeEnd, b.checkAt)
}
