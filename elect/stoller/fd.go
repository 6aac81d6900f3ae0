package stoller

import (
	"maps"
	"slices"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect"
)

// FailureDetector is the FD module of §2, with §7's PlayDead/PlayAlive.
// It is a deterministic state machine driven by the election algorithm
// that owns it: the algorithm forwards every message it receives (the FD
// takes its own kinds and may use the rest as evidence), its observations
// and its ticks, and drains the ⟨DownSig, j⟩ signals and messages.
type FailureDetector interface {
	// Start begins, or resets, monitoring of j (Start_FD): afterwards
	// ⟨DownSig, j⟩ is raised if j is down, and only if j was down after
	// this call (eqs. 1, 2).
	Start(now edict.Time, j edict.ProcessID)
	// Stop ends monitoring of j (Stop_FD).
	Stop(now edict.Time, j edict.ProcessID)
	// PlayDead makes this process look crashed to the FDs of set
	// (Fig. 3, Halting); PlayAlive undoes it (Fig. 3, StartStage2).
	PlayDead(now edict.Time, set []edict.ProcessID)
	PlayAlive(now edict.Time, set []edict.ProcessID)
	Receive(now edict.Time, from edict.ProcessID, m Message)
	Observe(o elect.Observation)
	Tick(now edict.Time)
	NextTick() edict.Time
	// Drain returns the DownSig signals raised and the messages to send
	// since the last call.
	Drain() (down []edict.ProcessID, out []Envelope)
}

// Envelope is a message and its destination.
type Envelope struct {
	To  edict.ProcessID
	Msg Message
}

// FDConfig holds the timing of the message-based FDs. Zero fields take
// the defaults below, chosen for the simulator's default 1–5 ms delays.
type FDConfig struct {
	// Period between probes (ping), I'm-alive messages, or token hops
	// (ring: how long a node holds the token). Default 10 ms.
	Period time.Duration
	// Timeout after the last evidence before ⟨DownSig, j⟩ (ping,
	// I'm-alive); for the ring, how long to wait for a TokenAck before
	// skipping a successor. Default 30 ms for ping and I'm-alive, 20 ms
	// for the ring. For accuracy when stable (§6) it must exceed
	// Period+2δ (ping), Period+δ (I'm-alive) or 2δ (ring), plus the FIFO
	// layer's Hold (fifo.go) and drift.
	Timeout time.Duration
}

func (c FDConfig) withDefaults(timeout time.Duration) FDConfig {
	if c.Period <= 0 {
		c.Period = 10 * time.Millisecond
	}
	if c.Timeout <= 0 {
		c.Timeout = timeout
	}
	return c
}

// FDFactory builds a process's FD; Config.FD takes one.
type FDFactory func(self edict.ProcessID, members []edict.ProcessID, incarnation uint64) FailureDetector

// base holds what every FD keeps: the monitored set, the set it plays
// dead to, and the queues Drain empties.
type base struct {
	self    edict.ProcessID
	inc     uint64
	deadTo  map[edict.ProcessID]bool
	signals []edict.ProcessID
	out     []Envelope
}

func newBase(self edict.ProcessID, inc uint64) base {
	return base{self: self, inc: inc, deadTo: map[edict.ProcessID]bool{}}
}

func (b *base) send(to edict.ProcessID, m Message) {
	m.Inc = b.inc
	b.out = append(b.out, Envelope{To: to, Msg: m})
}

func (b *base) PlayDead(_ edict.Time, set []edict.ProcessID) {
	for _, j := range set {
		b.deadTo[j] = true
	}
}

func (b *base) PlayAlive(_ edict.Time, set []edict.ProcessID) {
	for _, j := range set {
		delete(b.deadTo, j)
	}
}

func (b *base) Drain() ([]edict.ProcessID, []Envelope) {
	s, o := b.signals, b.out
	b.signals, b.out = nil, nil
	return s, o
}

// Oracle is the FD of a synchronous system (§2, "complete and accurate
// failure detection is possible") built on the elect.ProcessDown and
// elect.ProcessUp observations that the simulator's perfect failure
// detector (or the runtime's memberlist) delivers; its latency τ_FD is
// theirs. A
// ProcessUp may come late, so a message from an incarnation newer than
// the one reported down also counts as the recovery (§2).
//
// Choice: the observations only report changes, so a node that starts
// after another crashed is never told of it, and would wait in stage 1
// for ever (found by TestBullySLE). For a node it has no news of, Start
// therefore sends "Are you alive?" and raises ⟨DownSig, j⟩ if no message
// from j came within Probe — accurate in a synchronous system when Probe
// exceeds 2δ. These probes are the only messages it sends.
type Oracle struct {
	base
	probe     time.Duration
	monitored map[edict.ProcessID]bool
	down      map[edict.ProcessID]bool
	news      map[edict.ProcessID]bool       // heard from, or told of
	probing   map[edict.ProcessID]edict.Time // deadline of a probe
	heardInc  map[edict.ProcessID]uint64     // newest incarnation heard from
	downInc   map[edict.ProcessID]uint64     // heardInc when reported down
}

// DefaultProbe is the Oracle's probe timeout: 2δ, plus Hold (the first
// message of a link waits Hold in the FIFO layer, fifo.go), plus a margin,
// for the simulator's default δ = 5 ms.
const DefaultProbe = 20 * time.Millisecond

// NewOracle returns the observation-driven FD with DefaultProbe; it is
// an FDFactory.
func NewOracle(self edict.ProcessID, members []edict.ProcessID, inc uint64) FailureDetector {
	return NewOracleProbe(DefaultProbe)(self, members, inc)
}

// NewOracleProbe returns a factory for Oracles with the given probe
// timeout (more than 2δ).
func NewOracleProbe(probe time.Duration) FDFactory {
	return func(self edict.ProcessID, _ []edict.ProcessID, inc uint64) FailureDetector {
		return &Oracle{base: newBase(self, inc), probe: probe, monitored: map[edict.ProcessID]bool{},
			down: map[edict.ProcessID]bool{}, news: map[edict.ProcessID]bool{},
			probing: map[edict.ProcessID]edict.Time{}, heardInc: map[edict.ProcessID]uint64{},
			downInc: map[edict.ProcessID]uint64{}}
	}
}

func (f *Oracle) Start(now edict.Time, j edict.ProcessID) {
	f.monitored[j] = true
	switch {
	case f.down[j]:
		// Reset semantics (§2): a node known down is reported again.
		f.signals = append(f.signals, j)
	case !f.news[j]:
		if _, ok := f.probing[j]; !ok {
			f.probing[j] = now.Add(f.probe)
			f.send(j, Message{Kind: AreYouAlive})
		}
	}
}

func (f *Oracle) Stop(_ edict.Time, j edict.ProcessID) { delete(f.monitored, j) }

// PlayDead cannot be honoured by an oracle; the synchronous algorithm
// never calls it.
func (f *Oracle) PlayDead(edict.Time, []edict.ProcessID)  {}
func (f *Oracle) PlayAlive(edict.Time, []edict.ProcessID) {}

func (f *Oracle) Receive(_ edict.Time, from edict.ProcessID, m Message) {
	f.news[from] = true
	delete(f.probing, from)
	f.heardInc[from] = max(f.heardInc[from], m.Inc)
	if f.down[from] && m.Inc > f.downInc[from] {
		delete(f.down, from)
	}
	if m.Kind == AreYouAlive {
		f.send(from, Message{Kind: Yes})
	}
}

func (f *Oracle) Observe(o elect.Observation) {
	switch o.Kind {
	case elect.ProcessDown:
		f.news[o.Process] = true
		delete(f.probing, o.Process)
		f.down[o.Process] = true
		f.downInc[o.Process] = f.heardInc[o.Process]
		if f.monitored[o.Process] {
			f.signals = append(f.signals, o.Process)
		}
	case elect.ProcessUp:
		f.news[o.Process] = true
		delete(f.down, o.Process)
	}
}

func (f *Oracle) Tick(now edict.Time) {
	for _, j := range slices.Sorted(maps.Keys(f.probing)) {
		if !now.Before(f.probing[j]) {
			delete(f.probing, j)
			if f.monitored[j] {
				f.signals = append(f.signals, j)
			}
		}
	}
}

func (f *Oracle) NextTick() edict.Time {
	var next edict.Time
	for _, t := range f.probing {
		next = minTime(next, t)
	}
	return next
}

// watch is a monitored process of the ping and I'm-alive FDs.
type watch struct {
	last   edict.Time // latest evidence (or the Start)
	raised bool       // DownSig raised since the last Start
}

// timeoutFD is what the ping and I'm-alive FDs share: raise ⟨DownSig, j⟩
// when nothing was heard from j for Timeout after the last evidence.
type timeoutFD struct {
	base
	cfg     FDConfig
	watched map[edict.ProcessID]*watch
	next    edict.Time // next periodic send
}

func (f *timeoutFD) heard(now edict.Time, j edict.ProcessID) {
	if w := f.watched[j]; w != nil && !w.raised {
		w.last = now
	}
}

// expire raises the signals that are due, in id order (determinism).
func (f *timeoutFD) expire(now edict.Time) {
	for _, j := range slices.Sorted(maps.Keys(f.watched)) {
		w := f.watched[j]
		if !w.raised && !now.Before(w.last.Add(f.cfg.Timeout)) {
			w.raised = true
			f.signals = append(f.signals, j)
		}
	}
}

func (f *timeoutFD) nextTick() edict.Time {
	next := f.next
	for _, w := range f.watched {
		if !w.raised {
			next = minTime(next, w.last.Add(f.cfg.Timeout))
		}
	}
	return next
}

// Ping is §2's simplest FD: every Period it sends "Are you alive?" to each
// monitored node that has not been reported down, and raises ⟨DownSig, j⟩
// when no reply came for Timeout. Its latency τ_FD is Timeout+δ.
type Ping struct{ timeoutFD }

// NewPing returns a factory for ping FDs with cfg's timing.
func NewPing(cfg FDConfig) FDFactory {
	cfg = cfg.withDefaults(30 * time.Millisecond)
	return func(self edict.ProcessID, _ []edict.ProcessID, inc uint64) FailureDetector {
		return &Ping{timeoutFD{base: newBase(self, inc), cfg: cfg, watched: map[edict.ProcessID]*watch{}}}
	}
}

func (f *Ping) Start(now edict.Time, j edict.ProcessID) {
	f.watched[j] = &watch{last: now}
	f.send(j, Message{Kind: AreYouAlive})
	if f.next.IsZero() {
		f.next = now.Add(f.cfg.Period)
	}
}

func (f *Ping) Stop(_ edict.Time, j edict.ProcessID) { delete(f.watched, j) }

func (f *Ping) Receive(now edict.Time, from edict.ProcessID, m Message) {
	switch m.Kind {
	case AreYouAlive:
		if !f.deadTo[from] {
			f.send(from, Message{Kind: Yes})
		}
	case Yes:
		f.heard(now, from)
	}
}

func (f *Ping) Observe(elect.Observation) {}

func (f *Ping) Tick(now edict.Time) {
	f.expire(now)
	if !f.next.IsZero() && !now.Before(f.next) {
		f.next = edict.Time{}
		for _, j := range slices.Sorted(maps.Keys(f.watched)) {
			if !f.watched[j].raised {
				f.send(j, Message{Kind: AreYouAlive})
				f.next = now.Add(f.cfg.Period)
			}
		}
	}
}

func (f *Ping) NextTick() edict.Time { return f.nextTick() }

// Latency is τ_FD for a maximum message delay delta.
func (f *Ping) Latency(delta time.Duration) time.Duration { return f.cfg.Timeout + delta }

// Alive is §2's "I'm alive" FD: Start(j) asks j to send ImAlive every
// Period; a silence of Timeout raises ⟨DownSig, j⟩. Half the messages of
// Ping, and a shorter latency (Timeout+δ with a smaller safe Timeout).
// The request is repeated after a Period of silence (it may be lost, or j
// may have recovered and forgotten it), and an ImAlive nobody asked for is
// answered with StopAlive, so that a lost StopAlive is repaired.
type Alive struct {
	timeoutFD
	subscribers map[edict.ProcessID]bool
}

// NewAlive returns a factory for I'm-alive FDs with cfg's timing.
func NewAlive(cfg FDConfig) FDFactory {
	cfg = cfg.withDefaults(30 * time.Millisecond)
	return func(self edict.ProcessID, _ []edict.ProcessID, inc uint64) FailureDetector {
		return &Alive{timeoutFD: timeoutFD{base: newBase(self, inc), cfg: cfg, watched: map[edict.ProcessID]*watch{}},
			subscribers: map[edict.ProcessID]bool{}}
	}
}

func (f *Alive) Start(now edict.Time, j edict.ProcessID) {
	f.watched[j] = &watch{last: now}
	f.send(j, Message{Kind: SendAlive})
	f.arm(now)
}

func (f *Alive) arm(now edict.Time) {
	if f.next.IsZero() {
		f.next = now.Add(f.cfg.Period)
	}
}

func (f *Alive) Stop(_ edict.Time, j edict.ProcessID) {
	if f.watched[j] != nil {
		delete(f.watched, j)
		f.send(j, Message{Kind: StopAlive})
	}
}

func (f *Alive) Receive(now edict.Time, from edict.ProcessID, m Message) {
	switch m.Kind {
	case SendAlive:
		if !f.subscribers[from] {
			f.subscribers[from] = true
			if !f.deadTo[from] {
				f.send(from, Message{Kind: ImAlive})
			}
		}
		f.arm(now)
	case StopAlive:
		delete(f.subscribers, from)
	case ImAlive:
		if f.watched[from] == nil {
			f.send(from, Message{Kind: StopAlive})
		}
		f.heard(now, from)
	}
}

func (f *Alive) Observe(elect.Observation) {}

func (f *Alive) Tick(now edict.Time) {
	f.expire(now)
	if f.next.IsZero() || now.Before(f.next) {
		return
	}
	f.next = edict.Time{}
	for _, j := range slices.Sorted(maps.Keys(f.subscribers)) {
		if !f.deadTo[j] {
			f.send(j, Message{Kind: ImAlive})
		}
	}
	for _, j := range slices.Sorted(maps.Keys(f.watched)) {
		if w := f.watched[j]; !w.raised && !now.Before(w.last.Add(f.cfg.Period)) {
			f.send(j, Message{Kind: SendAlive})
		}
	}
	if len(f.subscribers) > 0 || len(f.watched) > 0 {
		f.next = now.Add(f.cfg.Period)
	}
}

func (f *Alive) NextTick() edict.Time { return f.nextTick() }

// Latency is τ_FD for a maximum message delay delta.
func (f *Alive) Latency(delta time.Duration) time.Duration { return f.cfg.Timeout + delta }

// minTime is the earlier of a and b, zero meaning "none".
func minTime(a, b edict.Time) edict.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}
