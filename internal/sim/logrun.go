package sim

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect"
	"github.com/edictlog/edictlog/fsm"
	"github.com/edictlog/edictlog/log"
	"github.com/edictlog/edictlog/storage"
	"github.com/edictlog/edictlog/transport"
)

// LogResult is what one run of the replicated log found.
type LogResult struct {
	Seed      uint64
	Scenario  string
	Events    int
	Committed int // entries committed (ground truth)
	Ops       int // client operations in the history
	Writes    int // writes acknowledged
	Unknown   int // writes of unknown outcome
	Reads     map[log.ReadLevel]int
	Snapshots int // snapshots installed on followers
	Epochs    uint64
	Violation string
}

func (r LogResult) String() string {
	v := "ok"
	if r.Violation != "" {
		v = "VIOLATION: " + r.Violation
	}
	return fmt.Sprintf("%s seed=%d events=%d committed=%d ops=%d writes=%d unknown=%d reads=%v snapshots=%d epochs=%d %s",
		r.Scenario, r.Seed, r.Events, r.Committed, r.Ops, r.Writes, r.Unknown, r.Reads, r.Snapshots, r.Epochs, v)
}

type lrun struct {
	w     *world
	sc    LogScenario
	net   *network
	procs map[edict.ProcessID]*lproc
	ids   []edict.ProcessID
	gst   int64
	end   int64

	epoch0    storage.EpochConfig
	committed map[uint64]edict.Stamp // ground truth: index → the one stamp applied there
	violation string

	hist        *history
	nextRead    uint64
	reads       map[uint64]*clientOp // by read id
	writes      map[edict.ProcessID]map[uint64]*clientOp
	snapshots   int
	maxEpoch    uint64
	readWait    map[edict.ProcessID][]*clientOp
	ackAfterGST int
}

func (r *lrun) unknownOp(op *clientOp) {
	if op.done {
		return
	}
	r.hist.unknown(op)
	op.fire(regOutput{unknown: true})
}

// RunLog runs one seed of a log scenario and checks it.
func RunLog(sc LogScenario, seed uint64) LogResult {
	sc = sc.withDefaults()
	r := &lrun{w: newWorld(seed), sc: sc, procs: map[edict.ProcessID]*lproc{}, committed: map[uint64]edict.Stamp{},
		reads: map[uint64]*clientOp{}, writes: map[edict.ProcessID]map[uint64]*clientOp{}, hist: newHistory(),
		readWait: map[edict.ProcessID][]*clientOp{}}
	r.hist.staleLin = sc.StaleAsLinearizable
	r.gst, r.end = int64(sc.GST), int64(sc.Duration)
	r.net = &network{w: r.w, sc: &r.sc.Scenario, gst: r.gst}
	for i := range sc.N {
		r.ids = append(r.ids, edict.ProcessID(i+1))
	}
	r.epoch0 = storage.EpochConfig{Epoch: 0, Members: slices.Clone(r.ids)}
	for k := range sc.Replacements {
		r.ids = append(r.ids, edict.ProcessID(sc.N+1+k))
	}
	for _, id := range r.ids {
		p := &lproc{id: id, clock: newClock(float64(r.w.rng.Int64N(int64(time.Hour))), 1), stable: map[string][]byte{},
			epochs: []storage.EpochConfig{r.epoch0}, rng: rand.New(rand.NewPCG(r.w.rng.Uint64(), 1))}
		p.clock.setRate(0, r.sc.pickRate(r.w))
		r.procs[id] = p
		r.writes[id] = map[uint64]*clientOp{}
	}
	for _, id := range r.ids[:sc.N] {
		r.start(r.procs[id])
	}
	r.schedule()
	for r.violation == "" && r.w.step(r.end) {
	}
	if r.violation == "" {
		r.finalCheck()
	}
	res := LogResult{Seed: seed, Scenario: sc.Name, Events: r.w.events, Committed: len(r.committed),
		Reads: map[log.ReadLevel]int{}, Snapshots: r.snapshots, Epochs: r.maxEpoch, Violation: r.violation}
	r.hist.count(&res)
	return res
}

func (r *lrun) fail(format string, args ...any) {
	if r.violation == "" {
		r.violation = fmt.Sprintf("t=%v: ", time.Duration(r.w.now)) + fmt.Sprintf(format, args...)
	}
}

// start boots or reboots p from its durable state.
func (r *lrun) start(p *lproc) {
	p.inc++
	st, err := p.restartState()
	if err != nil {
		r.fail("%v cannot restart: %v", p.id, err)
		return
	}
	members := st.Epochs[len(st.Epochs)-1].Members
	p.detector = r.sc.newDetector(p.id, members, p.inc)
	core, err := log.NewCore(log.CoreConfig{ID: p.id, Elect: elect.Config{
		Rho: r.sc.Rho, RoundTrip: r.sc.RoundTrip, RenewInterval: r.sc.RenewInterval, MaxLease: r.sc.MaxLease(),
		Detector: p.detector, Rand: p.rng,
	}}, st, p.now(r.w.now))
	if err != nil {
		r.fail("%v: NewCore: %v", p.id, err)
		return
	}
	p.core, p.up, p.started = core, true, true
	p.tick.reset()
	if r.sc.Competing && r.w.now < r.gst {
		for _, id := range r.ids {
			if id != p.id {
				p.detector.Observe(elect.Observation{Kind: elect.ProcessDown, Process: id, At: p.now(r.w.now)})
			}
		}
	}
	r.drain(p)
}

// call runs f on p's core and carries out the resulting Ready.
func (r *lrun) call(p *lproc, f func(now edict.Time)) {
	if !p.up || r.violation != "" {
		return
	}
	f(p.now(r.w.now))
	r.drain(p)
}

// drain carries out p's Ready cycles the way log.Node does.
func (r *lrun) drain(p *lproc) {
	for p.up {
		rd := p.core.Ready()
		if rd.IsEmpty() {
			break
		}
		for _, m := range rd.Immediate {
			r.send(m)
		}
		p.persist(rd.Batch)
		for _, m := range rd.Messages {
			r.send(m)
		}
		for _, e := range rd.Apply {
			r.apply(p, e)
		}
		for _, rs := range rd.Reads {
			r.onReadState(p, rs)
		}
		for _, peer := range rd.Snapshots {
			r.streamSnapshot(p, peer)
		}
		for _, ev := range rd.Events {
			r.onEvent(p, ev)
		}
		p.core.Advance(p.now(r.w.now), rd)
		p.core.Applied(p.now(r.w.now), p.applied)
		if r.sc.Snapshots && p.applied >= p.snapPos.Index+32 {
			r.takeSnapshot(p)
		}
		r.serveReads(p)
	}
	r.armTick(p)
}

func (r *lrun) send(m transport.Message) {
	if err := m.Validate(); err != nil {
		r.fail("%v sent an invalid message %v: %v", m.From, m, err)
		return
	}
	r.net.send(m.From, m.To, func() {
		q := r.procs[m.To]
		if q == nil || !q.up {
			return
		}
		r.call(q, func(now edict.Time) {
			if err := q.core.Step(now, m); err != nil {
				r.fail("%v refused a well-formed message %v: %v", q.id, m, err)
			}
		})
	})
}

// apply hands a committed entry to p's state machine and checks that no
// other entry was ever committed at that index.
func (r *lrun) apply(p *lproc, e storage.Entry) {
	if e.Index != p.applied+1 {
		r.fail("%v applied index %d after %d: a gap", p.id, e.Index, p.applied)
		return
	}
	if st, ok := r.committed[e.Index]; ok && !st.Equal(e.Stamp) {
		r.fail("log safety: index %d committed as %v at one process and %v at %v", e.Index, st, e.Stamp, p.id)
		return
	}
	r.committed[e.Index] = e.Stamp
	fe := fsm.Entry{Index: e.Index, Stamp: e.Stamp}
	if e.Kind == storage.EntryCommand {
		fe.Data = e.Data
	}
	res := p.kv.Apply(fe)
	p.applied = e.Index
	if op := r.writes[p.id][e.Index]; op != nil {
		delete(r.writes[p.id], e.Index)
		if op.stamp.Equal(e.Stamp) {
			r.completeWrite(op, res)
		} else {
			r.unknownOp(op) // replaced before it committed
		}
	}
}

func (r *lrun) takeSnapshot(p *lproc) {
	s, err := p.kv.Snapshot()
	if err != nil {
		r.fail("%v snapshot: %v", p.id, err)
		return
	}
	var buf bytes.Buffer
	err = s.Persist(&buf)
	s.Release()
	if err != nil {
		r.fail("%v persist snapshot: %v", p.id, err)
		return
	}
	pos, ok := p.core.SnapshotPosition(p.applied)
	if !ok {
		return
	}
	p.snapshot, p.snapPos = buf.Bytes(), pos
	upTo, err := p.core.Compact(p.now(r.w.now), p.applied, 8)
	if err != nil {
		r.fail("%v compact: %v", p.id, err)
		return
	}
	keep := p.stored[:0]
	for _, e := range p.stored {
		if e.Index > upTo {
			keep = append(keep, e)
		}
	}
	p.stored = keep
}

// streamSnapshot delivers the leader's newest snapshot to peer over the
// lossy network, as the transport's snapshot stream would.
func (r *lrun) streamSnapshot(p *lproc, peer edict.ProcessID) {
	data, pos := p.snapshot, p.snapPos
	meta, ok := p.core.SnapshotMeta(pos, int64(len(data)))
	if !ok || data == nil {
		r.call(p, func(now edict.Time) { p.core.SnapshotSent(now, peer, 0, fmt.Errorf("no snapshot")) })
		return
	}
	from := p.id
	reported := false
	report := func(err error) {
		if reported {
			return
		}
		reported = true
		if p.up {
			r.call(p, func(now edict.Time) { p.core.SnapshotSent(now, peer, pos.Index, err) })
		}
	}
	// A stream lost on the way fails at the sender, as the transport's
	// SendSnapshot does when the connection breaks or its context ends.
	r.w.after(time.Second, func() { report(fmt.Errorf("snapshot stream to %v lost", peer)) })
	r.net.send(from, peer, func() {
		q := r.procs[peer]
		if !q.up {
			return
		}
		var err error
		r.call(q, func(now edict.Time) {
			if err = q.core.AcceptSnapshot(now, from, meta); err != nil {
				return
			}
			kv := fsm.NewKV()
			if err = kv.Restore(bytes.NewReader(data)); err != nil {
				r.fail("%v: restore snapshot: %v", q.id, err)
				return
			}
			q.kv, q.snapshot, q.snapPos, q.applied = kv, data, pos, pos.Index
			r.snapshots++
			q.core.SnapshotInstalled(now, from, meta)
		})
		r.net.send(peer, from, func() { report(err) })
	})
}

func (r *lrun) onEvent(p *lproc, ev log.Event) {
	switch ev.Kind {
	case log.SteppedDown:
		for idx, op := range r.writes[p.id] {
			delete(r.writes[p.id], idx)
			r.unknownOp(op)
		}
	case log.ConfigChanged:
		if ev.Membership != nil && ev.Membership.Config.Epoch > r.maxEpoch {
			r.maxEpoch = ev.Membership.Config.Epoch
		}
	}
}

func (r *lrun) armTick(p *lproc) {
	if p.up {
		p.tick.arm(r.w, p.clock, p.inc, p.core.NextTick(), r.sc.RenewInterval, func() bool { return p.up }, func() { r.call(p, p.core.Tick) })
	}
}

func (r *lrun) upProcs() []*lproc {
	var ps []*lproc
	for _, id := range r.ids {
		if p := r.procs[id]; p.up {
			ps = append(ps, p)
		}
	}
	return ps
}

func (r *lrun) leader() *lproc {
	for _, p := range r.upProcs() {
		if p.core.CanServeLease(p.now(r.w.now)) {
			return p
		}
	}
	return nil
}
