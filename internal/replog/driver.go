package replog

import (
	"fmt"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
)

// Env is the I/O a Driver's owner provides. The Driver calls it on its own
// goroutine, in the order a Ready asks for; no method may block for long,
// and Send never.
type Env interface {
	// Send hands a message to the transport. It may drop it: the protocol
	// sends again what matters (probes, heartbeats, retries).
	Send(m wire.Message)
	// Persist makes b durable in one transaction, after every batch
	// handed to it before, then sends after (the messages that promise
	// durability), then calls Driver.Synced(seq) on the Driver's
	// goroutine. It should not wait for the disk: the Driver goes on
	// stepping lease messages meanwhile, which is what keeps a slow fsync
	// from costing the leader its lease. If the store fails, the owner
	// must stop the Driver (Close) and the process without sending after:
	// nothing that depends on the batch has left.
	Persist(seq uint64, b wire.Batch, after []wire.Message)
	// Apply hands committed entries, in index order, to the state
	// machine; the owner calls Driver.Applied once they are applied.
	Apply(es []wire.Entry)
	// SendSnapshot streams the newest snapshot to peer, which lacks
	// compacted entries; the owner calls Driver.SnapshotSent when it ends.
	SendSnapshot(peer edict.ProcessID)
	// Event reports a change of role or membership, once the Driver has
	// settled the writes it concerns.
	Event(ev Event)
}

// Driver is the replicated log's runtime on one goroutine: it carries out
// a Core's Ready with the I/O its Env provides, and keeps every write and
// read until it can say what became of it. It is the one driver: edictlog.Node
// runs it with a real clock, bbolt, TCP and a state machine on a goroutine
// of its own; the simulator runs the same Driver with
// in-memory stores, virtual time and a synchronous state machine, so what
// the simulator checks is what runs.
//
// What it guarantees:
//   - Ready's order: Immediate messages, then the batch handed to the
//     store with the messages that promise durability, which leave only
//     once it is durable (Env.Persist), then applies, reads, snapshots
//     and events; Advance only after all of them. Storage completes off
//     the Driver's goroutine and comes back as an input (Synced).
//   - Every input reaches the Core through a reading taken by Now after
//     it arrived (a batch of proposals taken from a queue shares one),
//     and everything is decided only after a check that gives up a lease
//     a suspend of the host may have outlived, so nothing that rests on
//     the lease is decided on a stale one. What carries a step on
//     (Advance, serving reads) decides at the step's reading, checked
//     again for a suspend against the lease as the step left it.
//   - A write is answered once: with the state machine's answer when its
//     own entry is applied; with ErrNotCommitted when another entry is
//     applied at its index; with ErrOutcomeUnknown when a snapshot covers
//     its index, or when the Driver closes. Its reign ending does not
//     answer it: its index is applied sooner or later under the next
//     leader, and an answer then is definite where one at the step-down
//     could only be "unknown".
//   - A lease read is answered only if the lease still holds when its
//     index is applied; a follower read only once the leader's index is.
//
// Not safe for concurrent use.
type Driver struct {
	core  *Core
	clock edict.Clock
	env   Env

	pending    map[uint64]*Write // appended, by index, until answered
	reads      map[uint64]*Read  // started, by id
	waiting    []*Read           // index known, until applied
	nextReadID uint64
	readStarts []ReadStart // Reads' buffer
	applied    uint64      // what the state machine reported applied
	closed     bool

	// last is the latest reading Now took, and readings counts them.
	last     edict.Time
	readings uint64
}

// Write is a proposal on its way into the log.
type Write struct {
	entry wire.Entry
	done  func(ApplyResult, error)
}

// Entry is the write's entry, once appended.
func (w *Write) Entry() wire.Entry { return w.entry }

func (w *Write) finish(res ApplyResult, err error) {
	if w.done != nil {
		done := w.done
		w.done = nil
		done(res, err)
	}
}

// Read is a read waiting until the state machine may answer it.
type Read struct {
	id    uint64
	level ReadLevel
	index uint64
	lease bool // served under this process's lease: checked when answered
	done  func(ReadResult, error)
}

func (r *Read) finish(res ReadResult, err error) {
	if r.done != nil {
		done := r.done
		r.done = nil
		done(res, err)
	}
}

// NewDriver returns a Driver for core, whose state machine has applied up
// to applied (the snapshot it was restored from).
func NewDriver(core *Core, clock edict.Clock, env Env, applied uint64) *Driver {
	return &Driver{core: core, clock: clock, env: env, pending: map[uint64]*Write{}, reads: map[uint64]*Read{}, applied: applied}
}

// Core is the driven Core, for calls the Driver does not wrap; pass them
// a reading from Now.
func (d *Driver) Core() *Core { return d.core }

// Now reads the clock for a call into the Core, and first gives up a lease
// the host's suspend may have outlived (docs/protocol.md, "Clocks"): a leader must never see
// time pass slower than it does. It measures from the reign's first lease
// attempt (Core.LeaseSince), not from when the runtime noticed it leads,
// so a suspend in between counts too.
func (d *Driver) Now() edict.Time {
	now := d.clock.Now()
	checkSuspend(d.core, d.clock, now)
	d.last = now
	d.readings++
	return now
}

// recent is the latest reading Now took, checked again for a suspend
// against the lease as it stands now: for what carries a step on once its
// input is in (Advance, lease reads let go once applied, the owner's
// status), which decides as of the step's reading. The check is needed
// again because the step may have changed the lease: a grant that
// completes an attempt started before a suspend makes a lease whose start
// the input's own check could not yet measure from (a reading shared
// without it let two processes lead in the simulator's log-suspends). The
// check reads no clock: Suspended judges as of the clock's latest reading,
// the step's. A reading is three system calls (edict.SystemClock), and
// taking one for each of these took four or five per input.
func (d *Driver) recent() edict.Time {
	if d.last.IsZero() || d.last.Before(d.core.lastNow) {
		return d.Now()
	}
	checkSuspend(d.core, d.clock, d.last)
	return d.last
}

// checkSuspend gives up core's lease if clock was suspended since the
// reading the lease was measured from.
func checkSuspend(core *Core, clock edict.Clock, now edict.Time) {
	if since, ok := core.LeaseSince(now); ok && clock.Suspended(since) {
		core.ClockSuspended(now)
	}
}

// Step delivers a received message. Malformed or misdirected input is
// refused with an error and changes nothing.
func (d *Driver) Step(m wire.Message) error { return d.core.Step(d.Now(), m) }

// Tick lets the Core's timers fire; call it by Core.NextTick.
func (d *Driver) Tick() { d.core.Tick(d.Now()) }

// Propose appends a command of the given kind; done is called once with
// its outcome (see Driver). A process that does not lead a ready reign
// answers at once with a *NotLeaderError, as does one whose reign takes
// no writes now (a transfer, an ending epoch).
func (d *Driver) Propose(kind wire.EntryKind, data []byte, done func(ApplyResult, error)) {
	d.ProposeWith(func(now edict.Time) (wire.Entry, error) { return d.core.Propose(now, kind, data) }, done)
}

// ProposeWith appends the entry that appendEntry makes (a membership
// edict: Core.AddLearner, Promote, Remove) and answers it like Propose.
// Call Flush once the proposals of a batch are in.
func (d *Driver) ProposeWith(appendEntry func(now edict.Time) (wire.Entry, error), done func(ApplyResult, error)) {
	d.proposeAt(d.Now(), appendEntry, done)
}

// proposeAt is ProposeWith at a reading now taken after the proposal
// arrived, checked for a suspend against the lease as it stands: one
// reading serves a batch of proposals taken from a queue before it
// (Node.propose), each decided as if it had arrived at that reading.
func (d *Driver) proposeAt(now edict.Time, appendEntry func(now edict.Time) (wire.Entry, error), done func(ApplyResult, error)) {
	w := &Write{done: done}
	if d.closed {
		w.finish(ApplyResult{}, ErrShutdown)
		return
	}
	checkSuspend(d.core, d.clock, now)
	e, err := appendEntry(now)
	if err != nil {
		w.finish(ApplyResult{}, notLeader(d.core, err))
		return
	}
	w.entry = e
	d.pending[e.Index] = w
}

// Flush sends what the proposals since the last Flush appended, so that
// they share messages (group commit).
func (d *Driver) Flush() { d.core.Flush(d.Now()) }

// flush is Flush at the reading its proposals were appended at.
func (d *Driver) flush() { d.core.Flush(d.recent()) }

// Read starts a read at level; done is called once, when the state
// machine may answer it — at least at the result's Index — or with the
// error that ends it (a *NotLeaderError, or ErrShutdown).
func (d *Driver) Read(level ReadLevel, done func(ReadResult, error)) {
	d.Reads([]ReadRequest{{Level: level, Done: done}})
}

// ReadRequest is a read for Reads: its level, and the function called
// with its answer, as Read's done.
type ReadRequest struct {
	Level ReadLevel
	Done  func(ReadResult, error)
}

// Reads starts reads as Read does, all at one reading of the clock, taken
// now. Every one of them must have reached the caller before the call:
// the reading a read is decided at may be no earlier than its request, or
// a lease read could be answered as of a moment before a write that
// finished before the read began (docs/protocol.md, "Clocks"). Under load
// the Node drains the reads waiting for it into one call, and the
// clock's reading (three system calls) is paid once for all of them.
func (d *Driver) Reads(rs []ReadRequest) {
	if d.closed {
		for _, q := range rs {
			(&Read{done: q.Done}).finish(ReadResult{}, ErrShutdown)
		}
		return
	}
	if len(rs) == 0 {
		return
	}
	now := d.Now()
	starts := d.readStarts[:0]
	for _, q := range rs {
		d.nextReadID++
		d.reads[d.nextReadID] = &Read{id: d.nextReadID, level: q.Level, done: q.Done}
		starts = append(starts, ReadStart{ID: d.nextReadID, Level: q.Level})
	}
	d.core.Reads(now, starts)
	d.readStarts = starts[:0]
}

// Applied tells the Driver the state machine applied entries up to index,
// answering results (one per entry applied, in order; none for a restored
// snapshot).
func (d *Driver) Applied(index uint64, results []ApplyResult) {
	now := d.Now()
	for _, res := range results {
		w, ok := d.pending[res.Index]
		if !ok {
			continue
		}
		delete(d.pending, res.Index)
		if w.entry.Stamp.Equal(res.Stamp) {
			w.finish(res, nil)
		} else {
			// Another edict took the index: this write's entry was
			// replaced before it committed, so it never will (an
			// edict commits only at the index it was appended at).
			w.finish(ApplyResult{}, ErrNotCommitted)
		}
	}
	if index > d.applied {
		// Indexes applied without a result came from a snapshot: what
		// stood there is not known here.
		for idx, w := range d.pending {
			if idx <= index {
				delete(d.pending, idx)
				w.finish(ApplyResult{}, ErrOutcomeUnknown)
			}
		}
		d.applied = index
		d.core.Applied(now, index)
	}
	d.serveReads()
}

// FollowerReadsWaiting is Core.FollowerReadsWaiting.
func (d *Driver) FollowerReadsWaiting() bool { return d.core.FollowerReadsWaiting() }

// AppliedIndex is the highest index the state machine reported applied.
func (d *Driver) AppliedIndex() uint64 { return d.applied }

// AcceptSnapshot decides, as a stream from a peer starts, whether the
// snapshot may be installed (Core.AcceptSnapshot).
func (d *Driver) AcceptSnapshot(from edict.ProcessID, meta wire.SnapshotHeader) error {
	return d.core.AcceptSnapshot(d.Now(), from, meta)
}

// InstallSnapshot installs a snapshot whose stream has arrived whole: it
// checks the acceptance rule again (anything may have happened while it
// streamed), then calls publish, which makes the snapshot durable in the
// snapshot store, and moves the Core to it. On an error nothing changed
// and the snapshot must be discarded. On success the owner restores its
// state machine from the snapshot before it applies anything the Driver
// hands it next, and reports it with Applied(meta.LastIndex, nil).
func (d *Driver) InstallSnapshot(from edict.ProcessID, meta wire.SnapshotHeader, publish func() error) error {
	now := d.Now()
	if err := d.core.mayInstallAtEnd(now, from, meta); err != nil {
		return fmt.Errorf("snapshot refused at install: %w", err)
	}
	if err := publish(); err != nil {
		return fmt.Errorf("store snapshot: %w", err)
	}
	if err := d.core.SnapshotInstalled(now, from, meta); err != nil {
		// Checked a moment ago on this goroutine: nothing can have changed.
		panic(fmt.Sprintf("edictlog: snapshot install refused right after it was accepted: %v", err))
	}
	return nil
}

// SnapshotSent reports the end of a snapshot stream to peer.
func (d *Driver) SnapshotSent(peer edict.ProcessID, lastIndex uint64, err error) {
	d.core.SnapshotSent(d.Now(), peer, lastIndex, err)
}

// Synced reports that the batches of the Readys up to seq are durable and
// the messages that waited for them sent (Env.Persist).
func (d *Driver) Synced(seq uint64) {
	d.core.Synced(d.Now(), seq)
}

// HandleReady does what the Core asks, in Ready's order, until it asks
// nothing more. A failure of the store reaches the owner from Env.Persist.
func (d *Driver) HandleReady() {
	for {
		rd := d.core.Ready()
		if rd.IsEmpty() {
			return
		}
		for _, m := range rd.Immediate {
			d.env.Send(m)
		}
		if rd.Sync != 0 {
			d.env.Persist(rd.Sync, rd.Batch, rd.Messages)
		}
		if len(rd.Apply) > 0 {
			d.env.Apply(rd.Apply)
		}
		for _, rs := range rd.Reads {
			d.onReadState(rs)
		}
		for _, p := range rd.Snapshots {
			d.env.SendSnapshot(p)
		}
		for _, ev := range rd.Events {
			d.onEvent(ev)
		}
		d.core.Advance(d.recent(), rd)
	}
}

func (d *Driver) onEvent(ev Event) {
	// A step-down answers no write (see Driver): those appended but not
	// known committed may still commit under the next leader, or not,
	// and this process learns which when it applies their indexes.
	d.env.Event(ev)
}

func (d *Driver) onReadState(rs ReadState) {
	r := d.reads[rs.ID]
	if r == nil {
		return
	}
	if rs.Err != nil {
		delete(d.reads, rs.ID)
		r.finish(ReadResult{}, &NotLeaderError{Leader: rs.Leader, Err: rs.Err})
		return
	}
	r.index = rs.Index
	r.lease = rs.Leader == d.core.id && r.level != ReadStale
	d.waiting = append(d.waiting, r)
	d.serveReads()
}

// serveReads lets go the reads whose index is applied. A lease read — a
// follower read the leader answered itself is one — is let go only if
// C_p < E_p at the step's reading, no suspend included (docs/protocol.md, "Clocks" and "The replicated log"):
// every read waiting here was started by an earlier input, so that
// reading was taken after the read arrived.
func (d *Driver) serveReads() {
	if len(d.waiting) == 0 {
		return
	}
	now := d.recent()
	keep := d.waiting[:0]
	for _, r := range d.waiting {
		if r.index > d.applied {
			keep = append(keep, r)
			continue
		}
		delete(d.reads, r.id)
		if r.lease && !d.core.CanServeLease(now) {
			r.finish(ReadResult{}, &NotLeaderError{Leader: d.core.leaderHint, Err: ErrNotLeader})
			continue
		}
		res := ReadResult{Level: r.level, Index: d.applied}
		if r.lease {
			res.Level = ReadLease
		}
		if r.level == ReadStale {
			res.Staleness = d.staleness(now)
		}
		r.finish(res, nil)
	}
	clear(d.waiting[len(keep):])
	d.waiting = keep
}

func (d *Driver) staleness(now edict.Time) time.Duration {
	if d.core.CanServeLease(now) {
		return 0
	}
	if d.core.lastContact.IsZero() {
		return -1
	}
	dd, ok := now.Sub(d.core.lastContact)
	if !ok {
		return -1
	}
	return dd
}

// Close ends the Driver: every write not yet answered has an unknown
// outcome, every read fails with err. Later proposals and reads fail with
// ErrShutdown.
func (d *Driver) Close(err error) {
	d.closed = true
	for idx, w := range d.pending {
		delete(d.pending, idx)
		w.finish(ApplyResult{}, ErrOutcomeUnknown)
	}
	for id, r := range d.reads {
		delete(d.reads, id)
		r.finish(ReadResult{}, err)
	}
	d.waiting = nil
}
