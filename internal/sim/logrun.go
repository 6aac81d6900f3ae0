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
	committed map[uint64]edict.Stamp // ground truth: index → the one stamp committed there
	violation string

	// Ground truth for the checkers of logcheck.go, kept here so that it
	// survives a process's restart.
	epochMembers map[uint64][]edict.ProcessID
	maxAccepted  map[edict.ProcessID]edict.Stamp
	maxEpochOf   map[edict.ProcessID]uint64
	// connCut drops the messages of broken connections (ConnectionCuts).
	connCut map[connection]bool

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
func RunLog(sc LogScenario, seed uint64) (res LogResult) {
	sc = sc.withDefaults()
	r := &lrun{w: newWorld(seed), sc: sc, procs: map[edict.ProcessID]*lproc{}, committed: map[uint64]edict.Stamp{},
		reads: map[uint64]*clientOp{}, writes: map[edict.ProcessID]map[uint64]*clientOp{}, hist: newHistory(),
		readWait: map[edict.ProcessID][]*clientOp{}, epochMembers: map[uint64][]edict.ProcessID{},
		maxAccepted: map[edict.ProcessID]edict.Stamp{}, maxEpochOf: map[edict.ProcessID]uint64{}}
	// A panic in a core is one of its safety assertions firing (a
	// committed index truncated, a conflicting epoch): a violation of this
	// seed, reported like the others rather than ending the whole test.
	defer func() {
		if e := recover(); e != nil {
			res = LogResult{Seed: seed, Scenario: sc.Name, Events: r.w.events, Committed: len(r.committed),
				Violation: fmt.Sprintf("t=%v: panic: %v", time.Duration(r.w.now), e)}
		}
	}()
	r.hist.staleLin = sc.StaleAsLinearizable
	r.gst, r.end = int64(sc.GST), int64(sc.Duration)
	r.net = &network{w: r.w, sc: &r.sc.Scenario, gst: r.gst}
	for i := range sc.N {
		r.ids = append(r.ids, edict.ProcessID(i+1))
	}
	r.epoch0 = storage.EpochConfig{Epoch: 0, Members: slices.Clone(r.ids)}
	r.epochMembers[0] = r.epoch0.Members
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
	res = LogResult{Seed: seed, Scenario: sc.Name, Events: r.w.events, Committed: len(r.committed),
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
	if p.inc == 0 || !simMutated(SimRuleIncarnation) {
		// Bumped before the process sends anything, so that its readings
		// increase across restarts (edict.BumpIncarnation).
		p.inc++
	}
	p.applyQ, p.leading, p.leaderSince, p.seenCommit = nil, false, edict.Time{}, 0
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

// call runs f on p's core and carries out the resulting Ready. On a host
// that is suspended it runs once the host resumes.
func (r *lrun) call(p *lproc, f func(now edict.Time)) {
	if !p.up || r.violation != "" {
		return
	}
	if p.frozenUntil > r.w.now {
		r.w.at(p.frozenUntil, func() { r.call(p, f) })
		return
	}
	now := p.now(r.w.now)
	r.checkSuspend(p, now)
	f(now)
	r.drain(p)
}

// drain carries out p's Ready cycles the way log.Node does, then runs the
// checkers. Before GST, with the scenario's CrashInReady, a cycle that
// stores entries crashes its process at a random point: after the leader's appends
// left but before the batch is stored (the batch is lost), after the
// store but before the replies, before the state machine, or before
// Advance.
func (r *lrun) drain(p *lproc) {
	if p.up {
		r.checkSuspend(p, p.now(r.w.now))
	}
	for p.up {
		rd := p.core.Ready()
		if rd.IsEmpty() {
			break
		}
		crashAt := -1
		if r.w.now < r.gst && len(rd.Batch.Entries) > 0 && r.w.chance(r.sc.CrashInReady) {
			crashAt = r.w.rng.IntN(4)
		}
		for _, m := range rd.Immediate {
			r.send(m)
		}
		if r.crashInReady(p, crashAt, 0) {
			return
		}
		r.checkStored(p, rd.Batch)
		p.persist(rd.Batch)
		if r.crashInReady(p, crashAt, 1) {
			return
		}
		for _, m := range rd.Messages {
			r.send(m)
		}
		if r.crashInReady(p, crashAt, 2) {
			return
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
		if r.crashInReady(p, crashAt, 3) {
			return
		}
		p.core.Advance(p.now(r.w.now), rd)
		p.core.Applied(p.now(r.w.now), p.applied)
		if !p.leading && p.core.CanServeLease(p.now(r.w.now)) {
			// As log.Node.onEvent: the reading from which a suspend
			// makes this reign's lease untrustworthy.
			p.leading, p.leaderSince = true, p.now(r.w.now)
		}
		if r.sc.Snapshots && p.applied >= p.snapPos.Index+32 {
			r.takeSnapshot(p)
		}
		r.serveReads(p)
	}
	if !p.up {
		return // a nested call crashed it
	}
	r.armTick(p)
	r.check(p)
}

// crashInReady crashes p if the cycle's crash point is at. A nested call
// (a snapshot report) may also have crashed it: either way the cycle ends.
func (r *lrun) crashInReady(p *lproc, crashAt, at int) bool {
	if crashAt == at && p.up {
		r.crash(p, r.w.between(time.Millisecond, r.sc.MaxDowntime))
	}
	return !p.up
}

func (r *lrun) send(m transport.Message) {
	if err := m.Validate(); err != nil {
		r.fail("%v sent an invalid message %v: %v", m.From, m, err)
		return
	}
	if m.Lease != nil && m.Lease.Type == elect.MsgGrant && !m.Lease.Wedge {
		r.maybeCrashGranter(r.procs[m.From], r.procs[m.To])
	}
	if m.Lease != nil && m.Lease.Type == elect.MsgGrantRequest && !m.Lease.Wedge {
		r.maybeSuspendCandidate(r.procs[m.From])
	}
	if r.connCut[connection{m.From, m.To, m.Lease != nil}] {
		r.net.lost++
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

// apply hands a committed entry to p's state machine, or queues it behind
// a snapshot restore waiting for its stream (see lproc.applyQ).
func (r *lrun) apply(p *lproc, e storage.Entry) {
	if len(p.applyQ) > 0 {
		p.applyQ = append(p.applyQ, applyJob{entry: e})
		return
	}
	r.applyEntry(p, e)
}

// applyEntry applies e and checks that no other entry was ever committed
// at its index. An entry a restored snapshot already covers is skipped, as
// log.Node's applier does.
func (r *lrun) applyEntry(p *lproc, e storage.Entry) {
	if st, ok := r.committed[e.Index]; ok && !st.Equal(e.Stamp) {
		r.fail("log safety: index %d committed as %v at one process and applied as %v at %v", e.Index, st, e.Stamp, p.id)
		return
	}
	r.committed[e.Index] = e.Stamp
	if e.Index <= p.applied && e.Index <= p.snapPos.Index {
		return
	}
	if e.Index != p.applied+1 {
		r.fail("%v applied index %d after %d: a gap", p.id, e.Index, p.applied)
		return
	}
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

// runApplyQ works through p's apply queue until a restore whose stream is
// not complete, installing each snapshot whose stream is.
func (r *lrun) runApplyQ(p *lproc, now edict.Time) {
	for len(p.applyQ) > 0 && p.up && r.violation == "" {
		j := p.applyQ[0]
		if j.restore != nil && !j.restore.ready {
			return
		}
		p.applyQ = p.applyQ[1:]
		if j.restore == nil {
			r.applyEntry(p, j.entry)
			continue
		}
		in := j.restore
		// The stream is complete: the core decides again whether to
		// install it (main's log does, since issue 13), then the
		// snapshot is published and the state machine restored; the
		// core's Ready (the log's reset) is stored after, by drain.
		if err := r.snapshotInstalled(p, now, in); err != nil {
			in.done(err)
			continue
		}
		kv := fsm.NewKV()
		if err := kv.Restore(bytes.NewReader(in.data)); err != nil {
			r.fail("%v: restore snapshot: %v", p.id, err)
			return
		}
		p.kv, p.snapshot, p.snapPos, p.applied = kv, in.data, in.pos, in.pos.Index
		r.snapshots++
		in.done(nil)
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
// lossy network, as the transport's snapshot stream would. The receiver's
// core accepts it when the stream begins; the install follows when the
// stream is complete, which before GST may take up to the scenario's
// SnapshotStreamTime: other messages reach the receiver in between, appends
// of a newer reign among them, and leaders change.
func (r *lrun) streamSnapshot(p *lproc, peer edict.ProcessID) {
	data, pos := p.snapshot, p.snapPos
	meta, ok := p.core.SnapshotMeta(pos, int64(len(data)))
	if !ok || data == nil {
		r.call(p, func(now edict.Time) { p.core.SnapshotSent(now, peer, 0, fmt.Errorf("no snapshot")) })
		return
	}
	from, inc := p.id, p.inc
	reported := false
	report := func(err error) {
		if reported {
			return
		}
		reported = true
		if p.up && p.inc == inc {
			r.call(p, func(now edict.Time) { p.core.SnapshotSent(now, peer, pos.Index, err) })
		}
	}
	streamTime := 5 * time.Millisecond
	if r.w.now < r.gst && r.sc.SnapshotStreamTime > 0 {
		streamTime = r.w.between(0, r.sc.SnapshotStreamTime)
	}
	// A stream lost on the way fails at the sender, as the transport's
	// SendSnapshot does when the connection breaks or its context ends.
	r.w.after(time.Second+streamTime, func() { report(fmt.Errorf("snapshot stream to %v lost", peer)) })
	r.net.send(from, peer, func() {
		q := r.procs[peer]
		r.call(q, func(now edict.Time) {
			if err := q.core.AcceptSnapshot(now, from, meta); err != nil {
				r.net.send(peer, from, func() { report(err) })
				return
			}
			in := &pendingInstall{from: from, meta: meta, data: data, pos: pos,
				done: func(err error) { r.net.send(peer, from, func() { report(err) }) }}
			q.applyQ = append(q.applyQ, applyJob{restore: in})
			qinc := q.inc
			r.w.after(streamTime, func() {
				if !q.up || q.inc != qinc {
					return // the receiver crashed: the stream broke
				}
				in.ready = true
				r.call(q, func(now edict.Time) { r.runApplyQ(q, now) })
			})
		})
	})
}

func (r *lrun) onEvent(p *lproc, ev log.Event) {
	switch ev.Kind {
	case log.SteppedDown:
		p.leading = false
		for idx, op := range r.writes[p.id] {
			delete(r.writes[p.id], idx)
			r.unknownOp(op)
		}
	case log.ConfigChanged:
		if ev.Membership == nil {
			break
		}
		cfg := ev.Membership.Config
		if cfg.Epoch > r.maxEpoch {
			r.maxEpoch = cfg.Epoch
		}
		if known, ok := r.epochMembers[cfg.Epoch]; ok && !slices.Equal(known, cfg.Members) {
			r.fail("%v learned epoch %d with members %v, but it has members %v", p.id, cfg.Epoch, cfg.Members, known)
			break
		}
		r.epochMembers[cfg.Epoch] = slices.Clone(cfg.Members)
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
