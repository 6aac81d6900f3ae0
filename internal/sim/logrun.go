package sim

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect"
	"github.com/edictlog/edictlog/fsm"
	"github.com/edictlog/edictlog/internal/replog"
	"github.com/edictlog/edictlog/storage"
	"github.com/edictlog/edictlog/wire"
)

// LogResult is what one run of the replicated log found.
type LogResult struct {
	Seed      uint64
	Scenario  string
	Events    int
	Committed int // entries committed (ground truth)
	Ops       int // client operations in the history
	ModelOps  int // a Model's operations whose answers it checked
	Writes    int // writes acknowledged
	Unknown   int // writes of unknown outcome
	Reads     map[replog.ReadLevel]int
	Snapshots int // snapshots installed on followers
	Epochs    uint64
	Violation string
	// Boundaries counts, per process, the durability boundaries it
	// passed before GST, when the run counts them (crashpoints.go), and
	// CrashedAt names the one where the run crashed it, if it did.
	Boundaries map[edict.ProcessID]int
	CrashedAt  string
	// Gaps counts the membership changes whose leaderless stretch was
	// timed (LogScenario.GapBound), and LongestGap is the longest; Kept
	// counts those that kept their leader throughout.
	Gaps       int
	LongestGap time.Duration
	// GapTotal is the timed stretches added up, for their mean.
	GapTotal time.Duration
	Kept     int
}

func (r LogResult) String() string {
	v := "ok"
	if r.ModelOps > 0 {
		v = fmt.Sprintf("model-ops=%d %s", r.ModelOps, v)
	}
	if r.Violation != "" {
		v = "VIOLATION: " + r.Violation
	}
	return fmt.Sprintf("%s seed=%d events=%d committed=%d ops=%d writes=%d unknown=%d reads=%v snapshots=%d epochs=%d %s",
		r.Scenario, r.Seed, r.Events, r.Committed, r.Ops, r.Writes, r.Unknown, r.Reads, r.Snapshots, r.Epochs, v)
}

type lrun struct {
	w *world
	// faults counts the faults that befell the run so far, and gap is
	// the membership change's leaderless stretch being timed (loggap.go).
	faults int
	gap    logGap
	// slowDisk marks the processes whose disks are slow (SlowDisks);
	// firstLeader is the first process that led (StableLeader); reigns
	// are the processes whose reigns began, in order (MaxLeaderChanges).
	slowDisk    map[edict.ProcessID]bool
	firstLeader edict.ProcessID
	reigns      []edict.ProcessID
	quota       *quota // QuotaLeader's, once it began
	sc          LogScenario
	net         *network
	procs       map[edict.ProcessID]*lproc
	ids         []edict.ProcessID
	gst         int64
	end         int64

	epoch0    wire.EpochConfig
	committed map[uint64]edict.Stamp // ground truth: index → the one stamp committed there
	violation string

	// The targeted adversaries, nil unless the scenario asks for them.
	replay     *replayAdversary
	quarantine *quarantineAdversary
	stopIso    *stopIsolation
	epochGap   *epochGap

	// Ground truth for the checkers of logcheck.go, kept here so that it
	// survives a process's restart.
	epochMembers map[uint64][]edict.ProcessID
	maxAccepted  map[edict.ProcessID]edict.Stamp // stored
	memAccepted  map[edict.ProcessID]edict.Stamp // in memory, this life
	storedEpoch  map[edict.ProcessID]uint64      // active epoch its stores give, as far as written
	memEpoch     map[edict.ProcessID]uint64      // active epoch in memory, this life
	// connCut drops the messages of broken connections (ConnectionCuts).
	connCut map[connection]bool
	// fig8 is the Figure 8 adversary (LogScenario.Figure8), or nil.
	fig8 *figure8

	hist        *history
	model       Model // the scenario's, or nil
	modelOps    int
	snapshots   int
	maxEpoch    uint64
	ackAfterGST int
	// leaderAfterGST is when a process first could serve under its lease
	// after GST (0: not yet), for the liveness check.
	leaderAfterGST int64
	// noSendCheck switches the send-time check off (sendcheck.go), to
	// show what the other checkers find without it.
	noSendCheck bool
	// crashes counts and places the crash-point explorer's crashes
	// (crashpoints.go).
	crashes crashPlan
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
	return runLog(sc, seed, runOptions{})
}

// runOptions change what a run checks or where it crashes a process,
// for the crash-point explorer (crashpoints.go).
type runOptions struct {
	noSendCheck bool
	crashes     crashPlan
}

func runLog(sc LogScenario, seed uint64, opt runOptions) (res LogResult) {
	sc = sc.withDefaults()
	r := &lrun{w: newWorld(seed), sc: sc, procs: map[edict.ProcessID]*lproc{}, committed: map[uint64]edict.Stamp{},
		noSendCheck: opt.noSendCheck, crashes: opt.crashes,
		hist: newHistory(), epochMembers: map[uint64][]edict.ProcessID{},
		maxAccepted: map[edict.ProcessID]edict.Stamp{}, memAccepted: map[edict.ProcessID]edict.Stamp{},
		storedEpoch: map[edict.ProcessID]uint64{}, memEpoch: map[edict.ProcessID]uint64{}}
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
	if sc.Model != nil {
		r.model = sc.Model()
	}
	r.gst, r.end = int64(sc.GST), int64(sc.Duration)
	r.net = &network{w: r.w, sc: &r.sc.Scenario, gst: r.gst}
	for i := range sc.N {
		r.ids = append(r.ids, edict.ProcessID(i+1))
	}
	r.epoch0 = wire.EpochConfig{Epoch: 0, Members: slices.Clone(r.ids)}
	r.epochMembers[0] = r.epoch0.Members
	for k := range sc.Replacements {
		r.ids = append(r.ids, edict.ProcessID(sc.N+1+k))
	}
	for _, id := range r.ids {
		p := &lproc{id: id, clock: newClock(float64(r.w.rng.Int64N(int64(time.Hour))), 1), rng: rand.New(rand.NewPCG(r.w.rng.Uint64(), 1))}
		p.clock.setRate(0, r.sc.pickRate(r.w))
		r.procs[id] = p
	}
	r.slowDisk = map[edict.ProcessID]bool{}
	for _, id := range r.ids[:min(sc.SlowDisks, len(r.ids))] {
		r.slowDisk[id] = true
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
		Reads: map[replog.ReadLevel]int{}, Snapshots: r.snapshots, Epochs: r.maxEpoch, Violation: r.violation,
		Boundaries: r.crashes.count, CrashedAt: r.crashes.where, ModelOps: r.modelOps,
		Gaps: r.gap.timed, LongestGap: r.gap.longest, GapTotal: r.gap.total, Kept: r.gap.kept}
	r.hist.count(&res)
	return res
}

func (r *lrun) fail(format string, args ...any) {
	if r.violation == "" {
		r.violation = fmt.Sprintf("t=%v: ", time.Duration(r.w.now)) + fmt.Sprintf(format, args...)
	}
}

// start boots or reboots p from its stores, as edictlog.Node starts: through
// replog.Recover (incarnation bumped first, state loaded, snapshot restored)
// and a replog.Driver around a new Core.
func (r *lrun) start(p *lproc) {
	p.seenCommit, p.crashAt, p.stopFor = 0, crashNone, 0
	if p.store == nil {
		p.store = storage.NewMemStore()
		snaps, err := storage.NewMemSnapshotStore(2)
		if err != nil {
			r.fail("%v: snapshot store: %v", p.id, err)
			return
		}
		p.snaps = snaps
	}
	peers := map[edict.ProcessID]string{}
	for _, id := range r.epoch0.Members {
		peers[id] = "sim"
	}
	_, member := peers[p.id]
	if p.state != nil {
		// The life before, lost in its crash.
		if p.ds != nil {
			p.stateDisk.Crash()
		} else {
			closeState(p.state)
		}
		p.state, p.ds = nil, nil
	}
	var rec replog.Recovery
	var err error
	if r.sc.DiskState {
		// What the state machine's own store left: a start opens it there.
		if p.stateDisk == nil {
			p.stateDisk = r.newStateDisk()
		}
		var ds DiskStateMachine
		if ds, err = p.stateDisk.Open(); err != nil {
			r.fail("%v cannot restart: %v", p.id, err)
			return
		}
		if plainDisk(p.id) {
			ds = plainState{ds}
		}
		rec, err = replog.RecoverDiskFSM(p.id, p.store, p.snaps, ds, peers, !member)
		p.state, p.ds, p.lastApplied = ds, ds, rec.AppliedEntry
	} else {
		st := r.sc.State()
		rec, err = replog.Recover(p.id, p.store, p.snaps, st.Restore, peers, !member)
		p.state, p.ds, p.lastApplied = st, nil, wire.Entry{}
	}
	if err != nil {
		r.fail("%v cannot restart: %v", p.id, err)
		return
	}
	p.inc, p.applied, p.snapPos, p.snapMetaOnly, p.snapStaged = rec.Incarnation, rec.Applied, rec.State.Snapshot, false, false
	if !r.modelStarted(p) {
		return
	}
	if metas, err := p.snaps.List(); err == nil && len(metas) > 0 {
		p.snapMetaOnly, _ = replog.IsMetaOnlySnapshot(p.snaps, metas[0])
	}
	members := rec.State.Epochs[len(rec.State.Epochs)-1].Members
	p.detector = r.sc.newDetector(p.id, members, p.inc)
	core, err := replog.NewCore(replog.CoreConfig{ID: p.id, MaxAppendEntries: r.sc.MaxAppendEntries, Elect: elect.Config{
		Rho: r.sc.Rho, RoundTrip: r.sc.RoundTrip, RenewInterval: r.sc.RenewInterval, RenewLead: r.sc.RenewLead, MaxLease: r.sc.MaxLease(),
		Detector: p.detector, Rand: p.rng,
	}}, rec.State, p.now(r.w.now))
	if err != nil {
		r.fail("%v: NewCore: %v", p.id, err)
		return
	}
	p.core = core
	p.d = replog.NewDriver(core, simClock{r, p}, simEnv{r, p}, rec.Applied)
	p.up, p.started = true, true
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

// call runs f on p's Driver and carries out the resulting Ready. On a host
// that is suspended it runs once the host resumes.
func (r *lrun) call(p *lproc, f func(d *replog.Driver)) {
	if !p.up || r.violation != "" {
		return
	}
	if p.frozenUntil > r.w.now {
		r.w.at(p.frozenUntil, func() { r.call(p, f) })
		return
	}
	f(p.d)
	r.drain(p)
}

// drain has p's Driver carry out its Ready cycles, then runs the checkers.
// Before GST, with the scenario's CrashInReady, a cycle that stores
// entries may crash its process at a point inside it (crashPoint), where
// the Driver's Env sees it.
func (r *lrun) drain(p *lproc) {
	for p.up && r.violation == "" {
		if r.w.now < r.gst && r.sc.CrashInReady > 0 && r.w.chance(r.sc.CrashInReady) {
			p.crashAt = crashPoint(1 + r.w.rng.IntN(3))
		}
		p.d.HandleReady()
		p.crashAt, p.crashFor = crashNone, 0
		if !p.up {
			return // crashed inside the cycle
		}
		if r.sc.Snapshots && p.applied >= p.snapPos.Index+r.sc.SnapshotEvery {
			if p.lastApplied.Index != p.applied {
				break // restored from a snapshot since the last apply: nothing to take
			}
			r.takeSnapshot(p)
			continue // compaction may have more for the Driver
		}
		break
	}
	if !p.up {
		return
	}
	if p.stopFor > 0 && p.core.Retired() {
		if traceHook != nil {
			traceHook("%12v %v stopped cleanly", time.Duration(r.w.now), p.id)
		}
		r.crash(p, p.stopFor)
		return
	}
	r.armTick(p)
	r.check(p)
}

// crashNow crashes p where it stands, for a time the scenario picks, or
// the adversary that chose the crash point (crashFor).
func (r *lrun) crashNow(p *lproc) {
	down := p.crashFor
	if down == 0 {
		down = r.w.between(time.Millisecond, r.sc.MaxDowntime)
	}
	p.crashFor = 0
	r.crash(p, down)
}

func (r *lrun) send(m wire.Message) {

	if err := m.Validate(); err != nil {
		r.fail("%v sent an invalid message %v: %v", m.From, m, err)
		return
	}
	if m.Lease != nil && m.Lease.Type == wire.LeaseGrant && !m.Lease.Wedge {
		r.maybeCrashGranter(r.procs[m.From], r.procs[m.To])
	}
	if m.Lease != nil && m.Lease.Type == wire.LeaseGrantRequest && !m.Lease.Wedge {
		r.maybeSuspendCandidate(r.procs[m.From])
	}
	if r.replayIntercept(m) || r.quarantineIntercept(m) || r.stopIso.intercept(m) || r.epochGap.intercept(m) {
		return // an adversary dropped or held it (adversary_*.go)
	}
	if r.connCut[connection{m.From, m.To, m.Lease != nil}] {
		r.net.lost++
		return
	}
	if r.fig8.lose(m) {
		r.net.lost++
		return
	}
	r.net.send(m.From, m.To, func() { r.deliver(m) })
}

// deliver hands m to its recipient's Driver, if the recipient is up.
func (r *lrun) deliver(m wire.Message) {
	q := r.procs[m.To]
	if q == nil || !q.up {
		return
	}
	if traceHook != nil && (m.Lease != nil || m.TimeoutNow != nil) && os.Getenv("EDICT_SIM_TRACE_LEASE") != "" {
		traceHook("%12v deliver %v→%v lease=%+v timeout=%+v", time.Duration(r.w.now), m.From, m.To, m.Lease, m.TimeoutNow)
	}
	r.call(q, func(d *replog.Driver) {
		if err := d.Step(m); err != nil {
			r.fail("%v refused a well-formed message %v: %v", q.id, m, err)
		}
	})
	r.fig8.delivered(m)
}

// applyEntry applies e to p's state machine and checks that no other
// entry was ever committed at its index and that applies are gapless.
func (r *lrun) applyEntry(p *lproc, e wire.Entry) (replog.ApplyResult, bool) {
	if st, ok := r.committed[e.Index]; ok && !st.Equal(e.Stamp) {
		r.fail("log safety: index %d committed as %v at one process and applied as %v at %v", e.Index, st, e.Stamp, p.id)
		return replog.ApplyResult{}, false
	}
	r.committed[e.Index] = e.Stamp
	if e.Index != p.applied+1 {
		r.fail("%v applied index %d after %d: a gap", p.id, e.Index, p.applied)
		return replog.ApplyResult{}, false
	}
	fe := fsm.Entry{Index: e.Index, Stamp: e.Stamp}
	if e.Kind == wire.EntryCommand {
		fe.Data = e.Data
	}
	res := p.state.Apply(fe)
	p.applied, p.lastApplied = e.Index, e
	if !r.modelApplied(p, fe, res) {
		return replog.ApplyResult{}, false
	}
	if p.ds != nil && r.w.chance(r.sc.StateSyncs) {
		// The state machine commits its own store.
		if _, err := p.ds.Sync(); err != nil {
			r.fail("%v: the state machine's sync: %v", p.id, err)
			return replog.ApplyResult{}, false
		}
		r.boundary(p, func() string {
			return fmt.Sprintf("its state machine synced itself at %d, a log write pending", e.Index)
		}, len(p.disk) > 0)
		if !p.up {
			return replog.ApplyResult{}, false
		}
	}
	return replog.ApplyResult{Index: e.Index, Stamp: e.Stamp, Response: res}, true
}

// takeSnapshot snapshots p's state machine into its snapshot store and
// compacts the log behind it, keeping 8 trailing entries, as edictlog.Node's
// applier does.
func (r *lrun) takeSnapshot(p *lproc) {
	if p.lastApplied.Index != p.applied {
		return // restored from a snapshot since the last apply
	}
	if p.ds != nil {
		r.syncSnapshot(p)
		return
	}
	s, err := p.state.Snapshot()
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
	st := p.core.Status(p.d.Now())
	e := p.lastApplied
	meta := wire.SnapshotMeta{Index: e.Index, Reign: e.Reign, Stamp: e.Stamp,
		Config: wire.EpochConfig{Epoch: st.Epoch, Members: st.Members, Learners: st.Learners}}
	if err := p.saveSnapshot(meta, buf.Bytes()); err != nil {
		r.fail("%v save snapshot: %v", p.id, err)
		return
	}
	r.boundary(p, func() string { return fmt.Sprintf("took a snapshot at %d, the log not yet compacted", meta.Index) }, true)
	if !p.up {
		return
	}
	upTo, err := p.core.Compact(p.d.Now(), p.applied, uint64(max(r.sc.TrailingEntries, 0)))
	if err != nil {
		r.fail("%v compact: %v", p.id, err)
		return
	}
	if upTo > 0 {
		if err := p.store.CompactPrefix(upTo); err != nil {
			r.fail("%v compact store: %v", p.id, err)
		}
	}
}

// syncSnapshot is takeSnapshot for a state machine that keeps its own
// state, as edictlog.Node's applier takes it: the state machine synced
// (replog.SyncState), a snapshot that holds no copy recorded at the index the
// sync made durable, and the log compacted behind that.
func (r *lrun) syncSnapshot(p *lproc) {
	d, err := replog.SyncState(p.ds, p.applied)
	if err != nil {
		r.fail("%v snapshot: %v", p.id, err)
		return
	}
	r.boundary(p, func() string {
		return fmt.Sprintf("synced its state machine at %d for a snapshot, a log write pending", d)
	}, len(p.disk) > 0)
	if !p.up {
		return
	}
	if d != p.lastApplied.Index {
		r.fail("%v: its state machine's Sync returned %d, applied %d", p.id, d, p.lastApplied.Index)
		return
	}
	st := p.core.Status(p.d.Now())
	e := p.lastApplied
	meta := wire.SnapshotMeta{Index: e.Index, Reign: e.Reign, Stamp: e.Stamp,
		Config: wire.EpochConfig{Epoch: st.Epoch, Members: st.Members, Learners: st.Learners}}
	if _, err := replog.SaveMetaOnlySnapshot(p.snaps, meta); err != nil {
		r.fail("%v save snapshot: %v", p.id, err)
		return
	}
	p.snapPos, p.snapMetaOnly, p.snapStaged = wire.Position{Index: meta.Index, Stamp: meta.Stamp}, true, false
	r.boundary(p, func() string {
		return fmt.Sprintf("took a snapshot at %d holding no copy, the log not yet compacted", meta.Index)
	}, true)
	if !p.up {
		return
	}
	upTo, err := p.core.Compact(p.d.Now(), d, uint64(max(r.sc.TrailingEntries, 0)))
	if err != nil {
		r.fail("%v compact: %v", p.id, err)
		return
	}
	if upTo > 0 {
		if err := p.store.CompactPrefix(upTo); err != nil {
			r.fail("%v compact store: %v", p.id, err)
		}
	}
}

// copyState captures p's state machine's state for a peer that needs a
// snapshot when the newest one holds none, as edictlog.Node's applier does:
// synced first, then captured at the last applied entry. A snapshot that
// knows its size (fsm.SizedSnapshot) is streamed as it is, and nothing is
// stored; another is stored in p's snapshot store first. It returns the
// copy's metadata and bytes.
func (r *lrun) copyState(p *lproc) (wire.SnapshotMeta, []byte, bool) {
	if p.applied == 0 || p.lastApplied.Index != p.applied {
		return wire.SnapshotMeta{}, nil, false
	}
	if d, err := p.ds.Sync(); err != nil || d != p.applied {
		r.fail("%v: its state machine's Sync returned %d (%v), applied %d", p.id, d, err, p.applied)
		return wire.SnapshotMeta{}, nil, false
	}
	r.boundary(p, func() string {
		return fmt.Sprintf("synced its state machine at %d for a copy, a log write pending", p.applied)
	}, len(p.disk) > 0)
	if !p.up {
		return wire.SnapshotMeta{}, nil, false
	}
	s, err := p.ds.Snapshot()
	if err != nil {
		r.fail("%v copy of the state: %v", p.id, err)
		return wire.SnapshotMeta{}, nil, false
	}
	var buf bytes.Buffer
	err = s.Persist(&buf)
	s.Release()
	if err != nil {
		r.fail("%v copy of the state: %v", p.id, err)
		return wire.SnapshotMeta{}, nil, false
	}
	st := p.core.Status(p.d.Now())
	e := p.lastApplied
	meta := wire.SnapshotMeta{Index: e.Index, Reign: e.Reign, Stamp: e.Stamp,
		Config: wire.EpochConfig{Epoch: st.Epoch, Members: st.Members, Learners: st.Learners}}
	if sized, ok := s.(fsm.SizedSnapshot); ok {
		if sized.Size() != int64(buf.Len()) {
			r.fail("%v: a snapshot of its state machine reports %d bytes and wrote %d", p.id, sized.Size(), buf.Len())
			return wire.SnapshotMeta{}, nil, false
		}
		return meta, buf.Bytes(), true
	}
	if err := p.saveSnapshot(meta, buf.Bytes()); err != nil {
		r.fail("%v save a copy of the state: %v", p.id, err)
		return wire.SnapshotMeta{}, nil, false
	}
	return p.newestSnapshot()
}

// streamSnapshot delivers the leader's newest snapshot to peer over the
// lossy network, as the transport's snapshot stream would. The receiver's
// Driver accepts it when the stream begins and installs it when the stream
// is complete, which before GST may take up to the scenario's
// SnapshotStreamTime: other messages reach the receiver in between, appends
// of a newer reign among them, and leaders change.
func (r *lrun) streamSnapshot(p *lproc, peer edict.ProcessID) {
	sm, data, ok := p.newestSnapshot()
	if ok && p.snapMetaOnly {
		if sm, data, ok = r.copyState(p); !p.up {
			return
		}
	}
	pos := wire.Position{Index: sm.Index, Stamp: sm.Stamp}
	var meta wire.SnapshotHeader
	if ok {
		meta, ok = p.core.SnapshotMeta(pos, int64(len(data)))
	}
	if !ok {
		r.w.after(0, func() {
			r.call(p, func(d *replog.Driver) { d.SnapshotSent(peer, 0, fmt.Errorf("no snapshot")) })
		})
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
			r.call(p, func(d *replog.Driver) { d.SnapshotSent(peer, pos.Index, err) })
		}
	}
	streamTime := 5 * time.Millisecond
	if r.w.now < r.gst && r.sc.SnapshotStreamTime > 0 {
		streamTime = r.w.between(0, r.sc.SnapshotStreamTime)
	}
	// A stream lost on the way fails at the sender, as the transport's
	// SendSnapshot does when the connection breaks or its context ends.
	r.w.after(time.Second+streamTime, func() { report(fmt.Errorf("snapshot stream to %v lost", peer)) })
	answer := func(err error) { r.net.send(peer, from, func() { report(err) }) }
	r.net.send(from, peer, func() {
		q := r.procs[peer]
		var err error
		r.call(q, func(d *replog.Driver) { err = d.AcceptSnapshot(from, meta) })
		if err != nil || !q.up {
			answer(err)
			return
		}
		qinc := q.inc
		r.w.after(streamTime, func() {
			if !q.up || q.inc != qinc {
				return // the receiver crashed: the stream broke
			}
			r.call(q, func(d *replog.Driver) {
				if st, ok := q.ds.(fsm.StagingFSM); ok {
					err := r.installStaged(q, d, st, from, meta, data)
					if !q.up || r.violation != "" {
						return
					}
					if err == nil && !r.restored(q, d, meta) {
						return
					}
					answer(err)
					return
				}
				err := d.InstallSnapshot(from, meta, func() error {
					err := q.saveSnapshot(wire.SnapshotMeta{Index: meta.LastIndex, Reign: meta.Reign, Stamp: meta.LastStamp,
						Config: wire.EpochConfig{Epoch: meta.Epoch, Members: meta.Members, Learners: meta.Learners}}, data)
					if err == nil && q.ds != nil {
						r.boundary(q, func() string {
							return fmt.Sprintf("stored a snapshot at %d from %v, its state machine not yet restored", meta.LastIndex, from)
						}, true)
					}
					return err
				})
				if !q.up {
					return // crashed inside the install: the stream broke
				}
				if err == nil {
					if rerr := q.restoreState(data, meta.LastIndex, r.sc.State); rerr != nil {
						r.fail("%v: restore snapshot: %v", q.id, rerr)
						return
					}
					if !r.restored(q, d, meta) {
						return
					}
				}
				answer(err)
			})
			r.boundary(q, func() string {
				return fmt.Sprintf("installed a snapshot at %d from %v, its log reset not yet written", meta.LastIndex, from)
			}, len(q.disk) > 0)
		})
	})
}

// onEvent keeps the ground truth of the epochs' members; the Driver has
// already settled the writes a step-down leaves unknown.
func (r *lrun) onEvent(p *lproc, ev replog.Event) {
	if traceHook != nil {
		traceHook("%12v %v: %v leader=%v epoch=%d index=%d %s", time.Duration(r.w.now), p.id, ev.Kind, ev.Leader, ev.Epoch, ev.Index, ev.Reason)
	}
	r.gapEvent(p, ev)
	switch ev.Kind {
	case replog.ConfigChanged:
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
	case replog.EpochChanged:
		r.epochGap.epochChanged(p)
	case replog.BecameLeader:
		if q := r.quota; q != nil && r.w.now < q.until {
			q.reigns = append(q.reigns, p.id)
			if len(q.reigns) > 1 {
				r.fail("while %v was held to a 10%% CPU quota (from t=%v), leadership changed %d times (reigns of %v): a starved leader must hand over once, not win back a lease it cannot keep",
					q.id, time.Duration(q.from), len(q.reigns), q.reigns)
			}
		}
		r.reigns = append(r.reigns, p.id)
		if n := r.sc.MaxLeaderChanges; n > 0 && len(r.reigns) > n+1 {
			r.fail("leadership changed %d times (reigns of %v), more than %d, under CPU starvation bursts of %v–%v: a leader must learn how long its host stalls and keep its lease through such stalls",
				len(r.reigns)-1, r.reigns, n, r.sc.StarveMin, r.sc.StarveMax)
		}
		if r.sc.StableLeader && r.firstLeader != 0 {
			r.fail("a second reign began (%v after %v), though nothing that should depose a leader befell the cluster (slow disks up to %v per write, CPU starvation up to %v)", p.id, r.firstLeader, r.sc.SlowFsync, r.sc.StarveMax)
		}
		if r.firstLeader == 0 {
			r.firstLeader = p.id
		}
	}
}

func (r *lrun) armTick(p *lproc) {
	if p.up {
		p.tick.arm(r.w, p.clock, p.inc, p.core.NextTick(), r.sc.RenewInterval, func() bool { return p.up }, func() { r.call(p, (*replog.Driver).Tick) })
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
