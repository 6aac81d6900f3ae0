package sim

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect"
	"github.com/edictlog/edictlog/internal/replog"
	"github.com/edictlog/edictlog/storage"
	"github.com/edictlog/edictlog/wire"
)

// lproc is one simulated process of the replicated log. It runs what
// edictlog.Node runs — replog.Recover to start from its stores, a replog.Driver around
// its replog.Core — with storage's in-memory stores, which survive its crashes
// as files would, a KV state machine applied synchronously, and a clock in
// virtual time. What the simulator checks is the runtime's code, not a
// copy of it.
type lproc struct {
	id    edict.ProcessID
	clock *clock
	inc   uint64
	d     *replog.Driver
	core  *replog.Core // d's
	state StateMachine
	// ds is state when the scenario's state machine keeps its own state
	// (DiskState), nil otherwise.
	ds DiskStateMachine
	up bool
	// stopFor: p is stopping cleanly (replog.Core.Retire), and goes down
	// for this long once its clean-stop record is durable; zero otherwise.
	stopFor time.Duration

	// Durable, kept across crashes: the log's stores, and the state
	// machine's own (DiskState; nil until the process first starts).
	store     *storage.MemStore
	snaps     *storage.MemSnapshotStore
	stateDisk StateDisk

	detector elect.Detector
	rng      *rand.Rand

	applied     uint64     // what the state machine holds
	lastApplied wire.Entry // the last entry applied, for snapshot metadata
	// snapPos is the newest snapshot in snaps: what the stores cover
	// without the log; snapMetaOnly, that it holds no copy of the state
	// (DiskState), which then covers only what stateDisk holds, or, with
	// snapStaged (the snapshot was installed into a state machine that
	// staged it), what stateDisk holds or has staged.
	snapPos      wire.Position
	snapMetaOnly bool
	snapStaged   bool
	tick         tickTimer
	started      bool

	// frozenUntil: the host is suspended until this real time; nothing
	// runs on it meanwhile (messages wait, as in its socket buffers).
	frozenUntil int64
	// seenCommit is the commit index this incarnation's core last
	// reported; the checkers look at what lies above it.
	seenCommit uint64
	// crashAt is where, inside the Ready cycle under way, the process
	// crashes (crashNone: it does not); crashFor, if set, how long it
	// then stays down.
	crashAt crashPoint
	// disk holds the batches handed to the store and not yet durable,
	// oldest first; the head one is being written.
	disk []diskWrite
	// writing is how many batches at the head of disk the write under
	// way holds (startWrite).
	writing  int
	crashFor time.Duration
}

// crashPoint is a moment inside a Ready cycle at which the scenario's
// CrashInReady crashes a process: between two of the steps that the
// durability of an acknowledgement rests on.
type crashPoint int

const (
	crashNone        crashPoint = iota
	crashBeforeStore            // the leader's appends left; the batch is lost
	crashAfterStore             // the batch is stored; the replies never leave
	crashBeforeApply            // the replies left; the state machine never sees the entries
)

// errCrashed is what a crashed process's stores answer: the Driver stops
// where the crash stopped it.
var errCrashed = errors.New("sim: the process crashed")

// simClock is a process's clock as its runtime sees it: the virtual clock
// at the world's current time, in the process's incarnation.
type simClock struct {
	r *lrun
	p *lproc
}

func (c simClock) Now() edict.Time { return c.p.clock.read(c.r.w.now, c.p.inc) }

// Suspended is the clock's answer, unless the sim's suspend-check rule is
// switched off (the runtime then never learns of a suspend).
func (c simClock) Suspended(since edict.Time) bool {
	return !c.r.ignoreSuspend() && c.p.clock.Suspended(since)
}

// simEnv is a process's I/O for its Driver.
type simEnv struct {
	r *lrun
	p *lproc
}

func (e simEnv) Send(m wire.Message) {
	if e.p.up {
		ack, ok := replyStamp(e.p, m)
		e.r.checkSend(e.p, m, ack, ok)
		e.r.send(m)
		e.r.boundary(e.p, func() string { return "sent " + m.String() + " with a write pending" }, len(e.p.disk) > 0)
	}
}

// Persist queues b on p's simulated disk, which writes one batch at a time
// and takes the scenario's fsync latency for each, while p goes on running
// (replog.Env.Persist). A crash loses what the disk has not finished; the
// Ready cycle's crash point, if it is one of the store's, strikes when
// this batch's write completes.
func (e simEnv) Persist(seq uint64, b wire.Batch, after []wire.Message) {
	p := e.p
	if !p.up {
		return
	}
	crash := crashNone
	if p.crashAt == crashBeforeStore || p.crashAt == crashAfterStore {
		crash, p.crashAt = p.crashAt, crashNone
	}
	epoch := p.core.Status(p.now(e.r.w.now)).Epoch
	w := diskWrite{seq: seq, batch: b, after: after, crash: crash, crashFor: p.crashFor, epoch: epoch}
	for _, m := range after {
		ack, ok := replyStamp(p, m)
		w.acks = append(w.acks, ack)
		w.hasAck = append(w.hasAck, ok)
	}
	p.disk = append(p.disk, w)
	if len(p.disk) == 1 {
		e.r.startWrite(p)
	}
}

// diskWrite is a batch on a simulated disk.
type diskWrite struct {
	seq      uint64
	batch    wire.Batch
	after    []wire.Message
	crash    crashPoint
	crashFor time.Duration
	// epoch is the process's active epoch when it handed the batch over:
	// once the batch is stored, a restart must come back in it at least.
	epoch uint64
	// acks are what the append replies among after acknowledge, taken
	// when the batch was handed over (replyStamp), for the send check.
	acks   []edict.Stamp
	hasAck []bool
}

// startWrite begins the write at the head of p's disk queue. As the
// runtime's persister does (group commit), it takes the head batch and
// every batch queued behind it that only appends, and writes them in one
// transaction at the price of one: a Ready with nothing to store but
// messages to send after it (a heartbeat's answer) costs no fsync of its
// own. A batch marked for a crash point is written alone.
func (r *lrun) startWrite(p *lproc) {
	life := p.inc
	p.writing = 1
	for p.writing < len(p.disk) && p.disk[0].crash == crashNone && p.disk[p.writing].crash == crashNone &&
		p.disk[p.writing].batch.AppendsOnly() {
		p.writing++
	}
	done := r.w.now + int64(r.fsyncLatency(p))
	if r.sc.BlockingDisk {
		// The runtime sits in the write: nothing it receives is stepped,
		// no timer fires, until the write is done.
		p.frozenUntil = max(p.frozenUntil, done)
	}
	r.w.at(done, func() { r.finishWrite(p, life) })
}

// fsyncLatency is how long p's next write takes: the scenario's disk,
// slower on the processes it made slow.
func (r *lrun) fsyncLatency(p *lproc) time.Duration {
	lo, hi := r.sc.Fsync/10, r.sc.Fsync
	if r.slowDisk[p.id] {
		lo, hi = r.sc.SlowFsync/2, r.sc.SlowFsync
	}
	return r.w.between(lo, hi)
}

// finishWrite completes the write at the head of p's disk (the batches
// startWrite took), unless p crashed since it began (a crash empties the
// queue: unfinished writes are lost).
func (r *lrun) finishWrite(p *lproc, life uint64) {
	if !p.up || p.inc != life || len(p.disk) < p.writing {
		return
	}
	js := p.disk[:p.writing:p.writing]
	if j := js[0]; j.crash == crashBeforeStore {
		p.crashFor = j.crashFor
		r.crashNow(p)
		return
	}
	for _, j := range js {
		if !j.batch.Empty() {
			r.checkStored(p, j.batch)
			if err := p.store.StoreBatch(j.batch); err != nil {
				r.fail("%v: store batch: %v", p.id, err)
				return
			}
			if rs := j.batch.Reset; rs != nil && rs.Index > p.snapPos.Index {
				// An install's reset written after a newer snapshot was
				// published does not make the older one the newest.
				p.snapPos, p.snapMetaOnly = *rs, false
			}
		}
		r.checkEpoch(p, j.epoch, "stored")
	}
	if j := js[0]; j.crash == crashAfterStore {
		p.crashFor = j.crashFor
		r.crashNow(p)
		return
	}
	p.disk = p.disk[len(js):]
	if len(p.disk) > 0 {
		r.startWrite(p)
	}
	r.boundary(p, func() string { return "stored a batch, another pending" }, len(p.disk) > 0)
	if !p.up {
		return
	}
	// The runtime sends what waited for the write and reports it: on a
	// suspended host, once it resumes (and not at all in a later life).
	r.call(p, func(d *replog.Driver) {
		if p.inc != life {
			return
		}
		for _, j := range js {
			for k, m := range j.after {
				if !p.up {
					return
				}
				r.checkSend(p, m, j.acks[k], j.hasAck[k])
				r.send(m)
				r.boundary(p, func() string { return "sent " + m.String() + " after a write, another pending" }, len(p.disk) > 0)
			}
		}
		if p.up {
			d.Synced(js[len(js)-1].seq)
		}
	})
}

func (e simEnv) Apply(es []wire.Entry) {
	r, p := e.r, e.p
	if p.up && p.crashAt == crashBeforeApply {
		r.crashNow(p)
	}
	if !p.up {
		return
	}
	results := make([]replog.ApplyResult, 0, len(es))
	for _, en := range es {
		res, ok := r.applyEntry(p, en)
		if !ok {
			return
		}
		results = append(results, res)
	}
	p.d.Applied(p.applied, results)
}

func (e simEnv) SendSnapshot(peer edict.ProcessID) {
	if e.p.up {
		e.r.streamSnapshot(e.p, peer)
	}
}

func (e simEnv) Event(ev replog.Event) {
	if e.p.up {
		e.r.onEvent(e.p, ev)
	}
}

// queuedAt reports whether a write queued on p's disk changes index i:
// writes an entry there, truncates at or below it, or resets the log.
func (p *lproc) queuedAt(i uint64) bool {
	for _, w := range p.disk {
		b := w.batch
		if b.Reset != nil || b.TruncateFrom != 0 && b.TruncateFrom <= i {
			return true
		}
		for _, e := range b.Entries {
			if e.Index == i {
				return true
			}
		}
	}
	return false
}

// storedStamp is the stamp of the entry at index i in p's stored log, and
// whether the stored log (not its snapshot) holds one.
func (p *lproc) storedStamp(i uint64) (edict.Stamp, bool) {
	es, err := p.store.Entries(i, i+1, 0)
	if err != nil || len(es) != 1 {
		return edict.Stamp{}, false
	}
	return es[0].Stamp, true
}

// storedRange describes p's stored log, for failure messages.
func (p *lproc) storedRange() string {
	first, err1 := p.store.FirstIndex()
	last, err2 := p.store.LastIndex()
	if err1 != nil || err2 != nil || last < first || last == 0 {
		return "empty"
	}
	return fmt.Sprintf("%d..%d", first, last)
}

// holdsDurably reports whether p's stores hold index i with stamp st: in
// its stored log, or covered by its stored snapshot (at the snapshot's own
// index, with the same stamp).
func (p *lproc) holdsDurably(i uint64, st edict.Stamp) bool {
	if snap := p.snapPos; snap.Index > 0 && i >= snap.Index {
		if s, ok := p.storedStamp(snap.Index); ok && !s.Equal(snap.Stamp) {
			// An installed snapshot whose log reset is still on its way:
			// a restart starts the log over at the snapshot (replog.Recover),
			// so nothing the store holds above it survives.
			return i == snap.Index && snap.Stamp.Equal(st)
		}
	}
	if s, ok := p.storedStamp(i); ok {
		return s.Equal(st)
	}
	if p.snapMetaOnly && !p.snapStaged && p.stateDisk != nil && i > p.stateDisk.DurableIndex() {
		// The snapshot holds no copy of the state, and the state
		// machine's own store ends before i.
		return false
	}
	if i < p.snapPos.Index {
		return true
	}
	return i == p.snapPos.Index && p.snapPos.Stamp.Equal(st)
}

func (p *lproc) now(t int64) edict.Time { return p.clock.read(t, p.inc) }

// newestSnapshot returns the newest snapshot p's store holds, with its
// bytes.
func (p *lproc) newestSnapshot() (wire.SnapshotMeta, []byte, bool) {
	metas, err := p.snaps.List()
	if err != nil || len(metas) == 0 {
		return wire.SnapshotMeta{}, nil, false
	}
	_, rc, err := p.snaps.Open(metas[0].ID)
	if err != nil {
		return wire.SnapshotMeta{}, nil, false
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return wire.SnapshotMeta{}, nil, false
	}
	return metas[0], data, true
}

// saveSnapshot stores data as a snapshot with meta in p's snapshot store.
func (p *lproc) saveSnapshot(meta wire.SnapshotMeta, data []byte) error {
	sink, err := p.snaps.Create(meta)
	if err != nil {
		return err
	}
	if _, err := sink.Write(data); err != nil {
		_ = sink.Cancel()
		return err
	}
	if err := sink.Close(); err != nil {
		return err
	}
	p.snapPos, p.snapMetaOnly, p.snapStaged = wire.Position{Index: meta.Index, Stamp: meta.Stamp}, false, false
	return nil
}

// restoreState replaces p's state machine with a snapshot's, whose last
// entry is at index: a new one restored from it or, one that keeps its
// own state, restored in place (atomically and durably).
func (p *lproc) restoreState(data []byte, index uint64, newState func() StateMachine) error {
	if p.ds != nil {
		if err := p.ds.Restore(bytes.NewReader(data)); err != nil {
			return err
		}
		if d, _ := p.ds.DurableIndex(); d != index {
			return fmt.Errorf("the state machine restored a snapshot of index %d reports index %d durable", index, d)
		}
		return nil
	}
	st := newState()
	if err := st.Restore(bytes.NewReader(data)); err != nil {
		closeState(st)
		return err
	}
	closeState(p.state)
	p.state = st
	return nil
}

// believesLeader reports whether p believes C_p < E_p now: it holds a
// lease, whether or not its reign has started.
func (r *lrun) believesLeader(p *lproc) bool {
	_, held := p.core.LeaseSince(p.now(r.w.now))
	return held
}
