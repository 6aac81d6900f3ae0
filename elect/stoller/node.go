package stoller

import (
	"slices"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect"
)

// Status is a node's status (§3): Norm, or one of the election stages.
type Status uint8

const (
	Norm  Status = iota + 1
	Elec1        // stage 1: waiting for DownSig from every lesser node (Fig. 1 only)
	Elec2        // stage 2: halting the greater nodes one by one
	Wait         // halted, waiting for the organiser's Ldr
)

func (s Status) String() string {
	switch s {
	case Norm:
		return "Norm"
	case Elec1:
		return "Elec1"
	case Elec2:
		return "Elec2"
	case Wait:
		return "Wait"
	}
	return "?"
}

// DefaultTau is the default period τ of Norm? messages.
const DefaultTau = 50 * time.Millisecond

// Config configures either algorithm for one node.
type Config struct {
	// ID is this node; Members every node, this one included. Lower ids
	// have higher priority (§4).
	ID      edict.ProcessID
	Members []edict.ProcessID
	// Incarnation is the paper's stable incarn, already incremented for
	// this start ("On recovery: incarn := incarn + 1"): the runtime keeps
	// it on stable storage, the simulator passes its incarnation count.
	Incarnation uint64
	// Tau is τ, the period of the leader's Norm? messages (default
	// DefaultTau).
	Tau time.Duration
	// FD builds the failure detector. Default: NewOracle for NewBully (a
	// synchronous system's perfect FD, fed by ProcessDown/ProcessUp), and
	// NewPing(FDConfig{}) for NewAsync.
	FD FDFactory
	// Hold is how long a message that arrives out of order waits for
	// those sent before it (fifo.go). It should be δ, the maximum
	// message delay; default 5 ms, the simulator's default.
	Hold time.Duration
}

// State is what the specifications speak of: status, ldr, and grp, which
// §7 identifies with elid.
type State struct {
	Status Status
	Ldr    edict.ProcessID
	Grp    Elid
}

// handlers are what each algorithm adds to node.
type handlers interface {
	recovery(now edict.Time)
	message(now edict.Time, from edict.ProcessID, m Message)
	downSig(now edict.Time, j edict.ProcessID)
}

// node is what Figures 1 and 3 share: the variables, the plumbing between
// the algorithm, its FD and the runtime, and the periodic Norm?.
type node struct {
	cfg     Config
	members []edict.ProcessID // sorted
	self    int               // index of cfg.ID in members
	fd      FailureDetector
	h       handlers
	fifo    fifo

	started bool
	status  Status
	ldr     edict.ProcessID
	elid    Elid
	acks    []edict.ProcessID
	nextel  uint64
	pendack int // index into members of the node being halted

	nextNorm edict.Time
	// heardInc is the newest incarnation heard from each node;
	// restartIsDown makes Async react to a newer one (Async.restarted).
	heardInc      map[edict.ProcessID]uint64
	restartIsDown bool
	out           []elect.Outgoing
	sent          map[Kind]int
	dropped       int
}

func (n *node) init(cfg Config, defFD FDFactory, h handlers) {
	if cfg.Tau <= 0 {
		cfg.Tau = DefaultTau
	}
	if cfg.FD == nil {
		cfg.FD = defFD
	}
	if cfg.Hold <= 0 {
		cfg.Hold = 5 * time.Millisecond
	}
	cfg.Incarnation = max(cfg.Incarnation, 1)
	n.fifo = newFIFO(cfg.Hold)
	n.cfg, n.h = cfg, h
	n.members = slices.Clone(cfg.Members)
	slices.Sort(n.members)
	n.members = slices.Compact(n.members)
	n.self = slices.Index(n.members, cfg.ID)
	if n.self < 0 {
		panic("stoller: Config.ID is not among Config.Members")
	}
	n.fd = cfg.FD(cfg.ID, n.members, cfg.Incarnation)
	n.sent = map[Kind]int{}
	n.heardInc = map[edict.ProcessID]uint64{}
}

func (n *node) id() edict.ProcessID { return n.cfg.ID }

// lesser(i) and greater(i) of §4: higher and lower priority.
func (n *node) lesser() []edict.ProcessID  { return n.members[:n.self] }
func (n *node) greater() []edict.ProcessID { return n.members[n.self+1:] }
func (n *node) others() []edict.ProcessID {
	return slices.Concat(n.members[:n.self], n.members[n.self+1:])
}

func (n *node) send(to edict.ProcessID, m Message) {
	m.Inc = n.cfg.Incarnation
	n.fifo.stamp(to, &m)
	n.sent[m.Kind]++
	n.out = append(n.out, elect.Outgoing{To: to, Payload: Encode(m)})
}

// start runs "On recovery" at the first input: the constructor has no
// clock reading to start the FD with.
func (n *node) start(now edict.Time) {
	if n.started {
		return
	}
	n.started = true
	n.nextNorm = now.Add(n.cfg.Tau)
	n.fd.Tick(now)
	n.h.recovery(now)
}

// pump hands the FD's signals to the algorithm, which may start or stop
// monitoring and so raise more, until none are left.
func (n *node) pump(now edict.Time) {
	for {
		sigs, out := n.fd.Drain()
		for _, e := range out {
			n.send(e.To, e.Msg)
		}
		if len(sigs) == 0 {
			return
		}
		for _, j := range sigs {
			n.h.downSig(now, j)
		}
	}
}

// Tick implements elect.Protocol: the FD's timers and Periodically(τ).
func (n *node) Tick(now edict.Time) {
	n.start(now)
	if !now.Before(n.nextNorm) {
		n.nextNorm = now.Add(n.cfg.Tau)
		if n.status == Norm && n.ldr == n.id() {
			for _, j := range n.greater() {
				n.send(j, Message{Kind: NormQ, Elid: n.elid})
			}
		}
	}
	from, msgs := n.fifo.expire(now)
	for i, ms := range msgs {
		for _, m := range ms {
			n.deliver(now, from[i], m)
		}
	}
	n.fd.Tick(now)
	n.pump(now)
}

// Receive implements elect.Protocol. Every message goes to the FD too
// (the oracle learns recoveries from incarnations).
func (n *node) Receive(now edict.Time, from edict.ProcessID, payload []byte) {
	n.start(now)
	m, err := Decode(payload)
	if err != nil || from == n.id() || !slices.Contains(n.members, from) {
		n.dropped++
		return
	}
	for _, m := range n.fifo.arrive(now, from, m) {
		n.deliver(now, from, m)
	}
	n.pump(now)
}

func (n *node) deliver(now edict.Time, from edict.ProcessID, m Message) {
	prev := n.heardInc[from]
	n.heardInc[from] = max(prev, m.Inc)
	if n.restartIsDown && prev != 0 && m.Inc > prev {
		// from crashed and recovered since we last heard from it; see
		// Async.restarted.
		n.h.(*Async).restarted(now, from)
	}
	n.fd.Receive(now, from, m)
	if m.Kind.Election() {
		n.h.message(now, from, m)
	}
	n.pump(now)
}

// Observe implements elect.Detector: ProcessDown/ProcessUp feed the FD
// (only the Oracle uses them); other kinds are ignored.
func (n *node) Observe(o elect.Observation) {
	n.start(o.At)
	n.fd.Observe(o)
	n.pump(o.At)
}

// Outbox implements elect.Protocol.
func (n *node) Outbox() []elect.Outgoing {
	out := n.out
	n.out = nil
	return out
}

// NextTick implements elect.Protocol.
func (n *node) NextTick() edict.Time {
	if !n.started {
		return edict.Time{Incarnation: n.cfg.Incarnation}
	}
	return minTime(minTime(n.nextNorm, n.fd.NextTick()), n.fifo.nextTick())
}

// WeakLeader implements elect.Detector: ldr while status is Norm, and
// None during an election, when §3 says ldr is not significant.
func (n *node) WeakLeader(edict.Time) edict.ProcessID {
	if n.status == Norm {
		return n.ldr
	}
	return edict.None
}

// State is the node's status, ldr and grp (elid), for the checkers.
func (n *node) State() State { return State{Status: n.status, Ldr: n.ldr, Grp: n.elid} }

// Sent is how many messages of each kind this instance sent.
func (n *node) Sent() map[Kind]int {
	out := make(map[Kind]int, len(n.sent))
	for k, v := range n.sent {
		out[k] = v
	}
	return out
}

// Dropped is how many received payloads were refused.
func (n *node) Dropped() int { return n.dropped }

// FD is the node's failure detector.
func (n *node) FD() FailureDetector { return n.fd }

// newElid is ⟨i, incarn, nextel⟩ with nextel incremented.
func (n *node) newElid() Elid {
	e := Elid{Node: n.id(), Incarn: n.cfg.Incarnation, Seq: n.nextel}
	n.nextel++
	return e
}

// continStage2 is ContinStage2 of Figures 1 and 3: halt the next greater
// node, or, when none is left, become the leader. Choice: the new leader
// stops monitoring everyone; in status Norm with ldr = i no DownSig
// changes anything (neither figure's handler matches), so only the FD's
// messages are saved.
func (n *node) continStage2(now edict.Time) {
	if n.pendack+1 < len(n.members) {
		n.pendack++
		j := n.members[n.pendack]
		n.fd.Start(now, j)
		n.send(j, Message{Kind: Halt, Elid: n.elid})
		return
	}
	n.ldr, n.status = n.id(), Norm
	for _, j := range n.others() {
		n.fd.Stop(now, j)
	}
	for _, j := range n.acks {
		n.send(j, Message{Kind: Ldr, Elid: n.elid})
	}
}

func (n *node) pending() edict.ProcessID { return n.members[n.pendack] }

// onAck and onLdr are the same in both figures.
func (n *node) onAck(now edict.Time, from edict.ProcessID, t Elid) {
	if n.status == Elec2 && t == n.elid && from == n.pending() {
		n.acks = append(n.acks, from) // the figures' "acks ⊕= i" is a typo for j
		n.continStage2(now)
	}
}

func (n *node) onLdr(now edict.Time, from edict.ProcessID, t Elid) {
	if n.status == Wait && t == n.elid {
		n.ldr, n.status = from, Norm // Fig. 3's "ldr := i" is a typo for j
		for _, j := range n.others() {
			n.fd.Stop(now, j)
		}
		n.fd.Start(now, from)
	}
}
