package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect"
	"github.com/edictlog/edictlog/wire"
)

// Result is what one run found.
type Result struct {
	Seed      uint64
	Scenario  string
	Events    int
	Checks    int
	Messages  int
	Edicts    int
	Pairs     int // edict pairs whose stamp order was checked
	Elections int // ground-truth leadership changes
	Promises  int // leader verification promises checked
	Restarts  int
	// Terminations counts processes that learned an epoch TERMINATED.
	Terminations int
	// ByType counts messages sent, by lease message type.
	ByType    map[wire.LeaseType]int
	Violation string
}

func (r Result) String() string {
	v := "ok"
	if r.Violation != "" {
		v = "VIOLATION: " + r.Violation
	}
	return fmt.Sprintf("%s seed=%d events=%d checks=%d msgs=%d edicts=%d pairs=%d elections=%d %s",
		r.Scenario, r.Seed, r.Events, r.Checks, r.Messages, r.Edicts, r.Pairs, r.Elections, v)
}

type run struct {
	w      *world
	sc     Scenario
	net    *network
	procs  map[edict.ProcessID]*process
	ids    []edict.ProcessID
	epochs []wire.EpochConfig // every epoch of the run, by number
	chk    *checker
	gst    int64
	end    int64
	// delivering is the message being delivered, for the eq. 16 check.
	delivering *wire.Lease

	restarts, terminations int
	byType                 map[wire.LeaseType]int
	// attempts are the lease attempts begun: (sender, Start) of every grant
	// request that is not a wedge.
	attempts map[attempt]bool
}

type attempt struct {
	from  edict.ProcessID
	start edict.Time
}

// Run runs one seed of a scenario to its end or its first violation.
func Run(sc Scenario, seed uint64) Result {
	sc = sc.withDefaults()
	r := &run{w: newWorld(seed), sc: sc, procs: map[edict.ProcessID]*process{}, byType: map[wire.LeaseType]int{}}
	r.gst, r.end = int64(sc.GST), int64(sc.Duration)
	r.net = &network{w: r.w, sc: &r.sc, gst: r.gst}
	r.chk = newChecker(r)
	members := make([]edict.ProcessID, sc.N)
	for i := range members {
		members[i] = edict.ProcessID(i + 1)
	}
	r.epochs = []wire.EpochConfig{{Epoch: 0, Members: slices.Clone(members)}}
	r.ids = slices.Clone(members)
	if sc.Reconfigure {
		// Epoch 1 drops the highest id and adds a new process; with
		// Carry it only adds one.
		next := append(slices.Clone(members[:sc.N-1]), edict.ProcessID(sc.N+1))
		if sc.Carry {
			next = append(slices.Clone(members), edict.ProcessID(sc.N+1))
		}
		r.epochs = append(r.epochs, wire.EpochConfig{Epoch: 1, Members: next})
		r.ids = append(r.ids, edict.ProcessID(sc.N+1))
	}
	for _, id := range r.ids {
		r.procs[id] = r.newProcess(id)
	}
	for _, id := range members {
		r.start(r.procs[id], r.epochs[:1])
	}
	r.schedule()
	for r.chk.violation == "" && r.w.step(r.end) {
		r.chk.check()
	}
	if r.chk.violation == "" {
		r.chk.finish()
	}
	return Result{
		Seed: seed, Scenario: sc.Name, Events: r.w.events, Checks: r.chk.checks,
		Messages: r.net.sent, Edicts: len(r.chk.edicts), Pairs: r.chk.pairs,
		Elections: r.chk.elections, Violation: r.chk.violation,
		Promises: r.chk.promised, Restarts: r.restarts, Terminations: r.terminations, ByType: r.byType,
	}
}

func (r *run) newProcess(id edict.ProcessID) *process {
	rate := 1.0
	p := &process{
		id:      id,
		clock:   newClock(float64(r.w.rng.Int64N(int64(time.Hour))), rate),
		records: map[uint64]wire.EpochRecord{},
		rng:     rand.New(rand.NewPCG(r.w.rng.Uint64(), r.w.rng.Uint64())),
		prevF:   map[uint64]fState{},

		verifySent: map[edict.ProcessID]int64{},
	}
	if r.sc.Mode == elect.BoundedSkew {
		// OQwBS needs clocks that agree within Δ: start them together.
		p.clock = newClock(float64(time.Hour), rate)
	}
	p.clock.setRate(0, r.sc.pickRate(r.w))
	return p
}

// start boots (or reboots) p knowing the given epochs.
func (r *run) start(p *process, epochs []wire.EpochConfig) {
	if p.core != nil {
		p.past = append(p.past, pastLife{inc: p.inc, core: p.core})
	}
	if r.sc.ForgetOnRestart {
		// Stable storage wiped: the incarnation starts over, so the core
		// believes it never ran and skips quarantine.
		p.records = map[uint64]wire.EpochRecord{}
		p.inc, p.cleanStopOf = 1, 0
	} else {
		p.inc++
	}
	// The clean-stop record speaks for the life right after the one that
	// wrote it (replog.Recover).
	afterClean := p.cleanStopOf != 0 && p.cleanStopOf+1 == p.inc
	p.downAfterRetire = 0
	p.epochs = slices.Clone(epochs)
	members := r.activeMembers(p)
	p.detector = r.sc.newDetector(p.id, members, p.inc)
	core, err := elect.New(elect.Config{
		ID: p.id, Epochs: p.epochs, Mode: r.sc.Mode, Rho: r.sc.Rho, Skew: r.sc.Skew,
		RoundTrip: r.sc.RoundTrip, RenewInterval: r.sc.RenewInterval, RenewLead: r.sc.RenewLead, MaxLease: r.sc.MaxLease(),
		Detector: p.detector, Rand: p.rng, AfterCleanStop: afterClean,
	}, p.persistedRecords(), p.now(r.w.now))
	if err != nil {
		r.chk.fail("core refused to start: %v", err)
		return
	}
	p.core, p.up, p.started = core, true, true
	p.prevF = map[uint64]fState{}
	p.tick.reset()
	if r.sc.Competing && r.w.now < r.gst {
		r.confuse(p)
	}
	r.armTick(p)
}

func (r *run) activeMembers(p *process) []edict.ProcessID {
	active := uint64(0)
	if p.core != nil {
		active = p.core.ActiveEpoch()
	}
	for _, e := range p.epochs {
		if e.Epoch == active {
			return slices.Clone(e.Members)
		}
	}
	return slices.Clone(p.epochs[0].Members)
}

// call runs f on p's core at the current time and carries out its Ready.
func (r *run) call(p *process, f func(now edict.Time)) {
	if !p.up {
		return
	}
	before := p.core.ActiveEpoch()
	f(p.now(r.w.now))
	rd := p.core.Ready()
	for _, rec := range rd.Persist {
		p.records[rec.Epoch] = rec
	}
	for _, m := range rd.Messages {
		r.send(m)
	}
	for _, ev := range rd.Events {
		r.onEvent(p, ev)
	}
	if p.core.ActiveEpoch() != before {
		setMembers(p.detector, r.activeMembers(p))
	}
	r.chk.checkF(p)
	r.armTick(p)
}

func (r *run) send(m wire.Lease) {
	// The simulated network checks what a transport's decoder checks:
	// the cores trust a delivered message's structure (elect.Core.Step).
	if err := m.Validate(); err != nil {
		r.chk.fail("%v sent an invalid message %v: %v", m.From, m, err)
		return
	}
	r.byType[m.Type]++
	if m.Type == wire.LeaseGrantRequest && !m.Wedge {
		if r.attempts == nil {
			r.attempts = map[attempt]bool{}
		}
		r.attempts[attempt{m.From, m.Start}] = true
	}
	r.net.send(m.From, m.To, func() {
		q := r.procs[m.To]
		if q == nil || !q.up {
			return
		}
		r.delivering = &m
		r.call(q, func(now edict.Time) {
			if err := q.core.Step(now, m); err != nil {
				r.chk.fail("%v refused a well-formed message %v: %v", q.id, m, err)
			}
		})
		r.delivering = nil
	})
}

func (r *run) onEvent(p *process, ev elect.Event) {
	r.trace("%v: %v epoch=%d newReign=%t expiry=%v leader=%v until=%v", p.id, ev.Kind, ev.Epoch, ev.NewReign, ev.Expiry, ev.Leader, ev.Until)
	switch ev.Kind {
	case elect.LeaseAcquired:
		p.lastQT, p.lastEpoch = ev.QT, ev.Epoch
	case elect.EpochTerminated:
		r.terminations++
	case elect.Retired:
		// The stable store records the clean stop, and p goes down; the
		// restart is scheduled outside this call.
		p.cleanStopOf = p.inc
		down := p.downAfterRetire
		r.w.after(0, func() {
			if p.up && p.cleanStopOf == p.inc {
				r.down(p, down)
			}
		})
	case elect.LeaderVerified:
		if !ev.Until.IsZero() {
			r.chk.promise(p, ev)
		}
	}
}

// armTick schedules p's next timer from the core's NextTick.
func (r *run) armTick(p *process) {
	if p.up {
		p.tick.arm(r.w, p.clock, p.inc, p.core.NextTick(), r.sc.RenewInterval, func() bool { return p.up }, func() { r.call(p, p.core.Tick) })
	}
}

// every runs f at jittered intervals until until.
func (r *run) every(interval time.Duration, until int64, f func()) {
	r.w.every(interval, until, func() bool { return false }, f)
}

func (r *run) upProcesses() []*process {
	var ps []*process
	for _, id := range r.ids {
		if p := r.procs[id]; p.up {
			ps = append(ps, p)
		}
	}
	return ps
}

// traceHook, when set by a test, receives a line per notable event.
var traceHook func(format string, args ...any)

func (r *run) trace(format string, args ...any) {
	if traceHook != nil {
		traceHook("%12v "+format, append([]any{time.Duration(r.w.now)}, args...)...)
	}
}
