package edictlog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect"
	"github.com/edictlog/edictlog/internal/replog"
	"github.com/edictlog/edictlog/wire"
)

var (
	// ErrOutcomeUnknown: the write may or may not commit — the context
	// ended after the write was appended and before its index was
	// applied here, or a snapshot covered its index. Never reported as a
	// failure (docs/protocol.md, "The replicated log").
	ErrOutcomeUnknown = replog.ErrOutcomeUnknown
	// ErrNotCommitted: the write was appended, and then another edict
	// committed at its index — a new reign replaced it before it
	// committed — so it never takes effect, and retrying it is safe.
	ErrNotCommitted = replog.ErrNotCommitted
	// ErrShutdown: the Node has stopped.
	ErrShutdown = replog.ErrShutdown
	// ErrSnapshotUnread: a snapshot failed its check (size, digest) after
	// the state machine restored it: the state machine did not read its
	// stream to the end, or the stream was damaged.
	ErrSnapshotUnread = replog.ErrSnapshotUnread
)

// The refusals a *NotLeaderError wraps.
var (
	// ErrNotLeader: this process does not lead; NotLeaderError.Leader is
	// the leader it knows of.
	ErrNotLeader = replog.ErrNotLeader
	// ErrNotReady: this process's reign has not started yet.
	ErrNotReady = replog.ErrNotReady
	// ErrTransferring: leadership is being handed over.
	ErrTransferring = replog.ErrTransferring
	// ErrStopped: the epoch is ending (a membership change).
	ErrStopped = replog.ErrStopped
	// ErrNoLeader: no leader is known.
	ErrNoLeader = replog.ErrNoLeader
)

// NotLeaderError is the retryable refusal: the operation — a write, a
// membership change, a lease read, a transfer — was refused before
// anything was written, because this process does not lead a reign that
// takes it now. Retrying it at Leader, or wherever leads next if Leader
// is None, is safe. Err says why, for callers that need to tell:
//
//   - ErrNotLeader: Leader is the leader this process knows of (§10.4);
//   - ErrNotReady: this process's reign has not started yet (Leader is
//     this process: retry here shortly);
//   - ErrTransferring: leadership is being handed over; Leader is the
//     target;
//   - ErrStopped: the epoch is ending (a membership change); the next
//     epoch's leader is not known yet, and Leader is None.
//
// So one check, errors.As(err, new(*NotLeaderError)), finds every error
// worth retrying elsewhere, and errors.Is(err, ErrTransferring) still tells
// the cases apart.
type NotLeaderError struct {
	Leader edict.ProcessID
	Err    error
}

// Error reads as the protocol's refusal it was made from.
func (e *NotLeaderError) Error() string {
	return (&replog.NotLeaderError{Leader: e.Leader, Err: e.Err}).Error()
}

func (e *NotLeaderError) Unwrap() error { return e.Err }

// fromDriver turns the Driver's answers into the Node's: the protocol's
// refusals become the *NotLeaderError and *MembershipError an embedder
// tests for, with the same fields and the same wrapped sentinel; other
// errors are returned as they are.
func fromDriver(err error) error {
	switch e := err.(type) {
	case *replog.NotLeaderError:
		return &NotLeaderError{Leader: e.Leader, Err: e.Err}
	case *replog.MembershipError:
		return &MembershipError{Op: e.Op, Process: e.Process, Epoch: e.Epoch, Live: e.Live, Err: e.Err}
	}
	return err
}

// Status is a snapshot of the Node's view, for operators and for routing
// (Node.Status).
type Status struct {
	ID    edict.ProcessID
	Epoch uint64
	// EpochHeard: this process knows Epoch only from a peer's news, not
	// yet from its log (storage.EpochConfig.Heard); Learners are unknown.
	EpochHeard    bool
	Leader        edict.ProcessID
	IsLeader      bool
	LeaseExpiry   edict.Time
	Reign         edict.Stamp
	AcceptedReign edict.Stamp
	Commit        uint64
	Applied       uint64
	LastIndex     uint64
	FirstIndex    uint64
	Members       []edict.ProcessID
	Learners      []edict.ProcessID
	// Retiring is the member of Epoch on its way out, if any: the leader
	// removed itself (Node.Remove), and whoever leads next removes it.
	Retiring edict.ProcessID
	// Match is, at the leader, each peer's highest replicated index.
	Match map[edict.ProcessID]uint64
}

// Node is one process of the replicated log: it runs the protocol
// (internal/replog's Driver and Core) with a real clock, storage,
// transport and state machine. One goroutine, the loop, owns the
// protocol; another applies committed entries to the FSM. All methods
// are safe for concurrent use.
type Node struct {
	cfg   Config
	clock edict.Clock
	inc   uint64
	log   *slog.Logger

	d    *replog.Driver // owned by the loop goroutine
	core *replog.Core   // d's Core

	proposals chan *proposal
	reads     readGate
	readBatch []replog.ReadRequest // startReads' buffers; the loop's
	readTaken []*readGroup
	ops       chan func()
	applyDone chan applied
	// fatal stops the loop with an error from another goroutine (stopWith).
	fatal chan error

	applier   *applier
	persister *persister
	// wakeApplier and wakePersister: the step handed them work (wake).
	// Loop only.
	wakeApplier, wakePersister bool

	fsync fsyncStats

	// pending are the events of the loop's current step, sent to the
	// observers once its status is published (announce). Loop only.
	pending []Event
	// peers are the transport addresses this Node knows, its own
	// included if it knows it: Recovery.Peers, then what ConfigChanged
	// events taught. A leader puts them on the snapshots it streams.
	// Loop only.
	peers map[edict.ProcessID]string
	// durable are waitDurable's callers, each waiting for a Ready's batch
	// (and every earlier one) to be written. Loop only.
	durable []durableWaiter
	// copyFor are the peers waiting for the copy of an fsm.DiskFSM's
	// state being made for them (sendSnapshot). Loop only.
	copyFor []edict.ProcessID
	// staging is set from the start of a snapshot stream staged in an
	// fsm.StagingFSM until it is installed or refused: one at a time.
	staging atomic.Bool
	// observers are Observe's subscribers; obsStopped, once set, is the
	// Stopped event, and nothing is sent after it.
	obsMu      sync.RWMutex
	observers  map[*Observer]struct{}
	obsStopped *Event

	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
	failErr  error
	// bg counts the goroutines that use the stores, the state machine or
	// the transport on the Node's behalf off the loop (snapshots written,
	// sent and received, compaction behind them, the address watch);
	// stopRuntime waits for them, so that nothing of this life touches
	// what the owner closes, or opens again for the next life, after Stop
	// or Shutdown returned. bgCtx ends when the loop stops, and cuts
	// their I/O short.
	bg       sync.WaitGroup
	bgCtx    context.Context
	bgCancel context.CancelFunc

	statusMu sync.Mutex
	status   Status
	lease    elect.Stats
}

// Start opens a Node: it bumps the incarnation durably, restores the
// newest snapshot into the FSM (for an fsm.DiskFSM, only if its own store
// is behind the snapshot), loads the log, and starts the
// runtime. It returns once the runtime runs, before any leader is known:
// calls that need one wait for it (Apply, Read).
//
// ctx bounds the start, not the Node's life: it is checked before and
// after recovery, and a snapshot's restore reads its stream through it, so
// an FSM's Restore fails with ctx's error once ctx ends (the FSM keeps its
// previous state, as fsm.FSM promises on a failed Restore). A start that
// fails leaves nothing running; the stores may hold the bumped
// incarnation, which the next start bumps again. Shutdown ends the Node.
//
// A snapshot is checked whatever the FSM reads of it: the stream is read
// to its end after Restore returns, so that the snapshot store verifies
// its digest.
func Start(ctx context.Context, cfg Config) (*Node, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("edictlog: start: %w", err)
	}
	rec, err := replog.RecoverFSM(ctx, cfg.ID, cfg.Store, cfg.Snapshots, cfg.FSM, cfg.Peers, cfg.Join)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("edictlog: start: after recovery: %w", err)
	}
	st, peers, snapIdx, inc := rec.State, rec.Peers, rec.Applied, rec.Incarnation
	clock := cfg.Clock
	if clock == nil {
		sc, err := edict.NewSystemClock(inc, max(cfg.Rho, 1e-3))
		if err != nil {
			return nil, err
		}
		clock = sc
		if _, why := edict.SystemClockPath(); why != nil {
			cfg.Logger.Info("edictlog: clock readings take system calls", "node", uint64(cfg.ID), "why", why)
		}
	}
	if cfg.WrapClock != nil {
		clock = cfg.WrapClock(clock)
	}
	det := cfg.Detector
	if cfg.NewDetector != nil {
		if det, err = cfg.NewDetector(inc, clock); err != nil {
			return nil, fmt.Errorf("edictlog: Config.NewDetector: %w", err)
		}
	}
	if det == nil {
		// Without gossip, the detector learns of deaths from lapsed leases
		// and from silence (elect.LowestLive).
		members := st.Epochs[len(st.Epochs)-1].Members
		ll := elect.NewLowestLive(cfg.ID, members, cfg.MaxLease)
		ll.SuspectAfter = 2 * cfg.MaxLease
		det = ll
	}
	seed := cfg.Seed
	if seed == 0 {
		seed = uint64(cfg.ID)<<32 ^ inc
	}
	core, err := replog.NewCore(replog.CoreConfig{ID: cfg.ID, Elect: elect.Config{
		Rho: cfg.Rho, RoundTrip: cfg.RoundTrip, RenewInterval: cfg.RenewInterval, MaxLease: cfg.MaxLease,
		Detector: det, Rand: rand.New(rand.NewPCG(seed, inc)),
	}}, st, clock.Now())
	if err != nil {
		return nil, err
	}
	for id, addr := range peers {
		if id != cfg.ID {
			cfg.Transport.AddPeer(id, addr)
		}
	}
	n := &Node{
		cfg: cfg, clock: clock, inc: inc, log: cfg.Logger.With("node", uint64(cfg.ID)), core: core,
		proposals: make(chan *proposal, cfg.MaxBatch), reads: readGate{bell: make(chan struct{}, 1)},
		ops: make(chan func(), 64), applyDone: make(chan applied, 64), fatal: make(chan error, 1),
		observers: map[*Observer]struct{}{}, stop: make(chan struct{}), done: make(chan struct{}),
		peers: maps.Clone(peers),
	}
	if n.peers == nil {
		n.peers = map[edict.ProcessID]string{}
	}
	n.bgCtx, n.bgCancel = context.WithCancel(context.Background())
	n.d = replog.NewDriver(core, clock, nodeEnv{n}, snapIdx)
	n.applier = newApplier(n, rec.AppliedEntry, st.Snapshot.Index)
	n.persister = newPersister(n)
	// Status is right from the start, not only after the loop's first
	// event. The core is read here before the loop owns it.
	n.publishStatus(n.d.Now())
	n.log.Info("node started", "incarnation", inc, "snapshot", st.Snapshot.Index, "applied", snapIdx, "last", core.LastIndex(), "epoch", core.ActiveEpoch())
	n.watchAddresses()
	go n.applier.run()
	go n.persister.run()
	go n.run()
	return n, nil
}

// Clock is the clock the Node reads: Config.Clock, or the SystemClock it
// built for this incarnation, as Config.WrapClock wrapped it. Its readings
// compare with the Node's own, such as Status().LeaseExpiry.
func (n *Node) Clock() edict.Clock { return n.clock }

// Incarnation is this life's incarnation, bumped durably by Start: above
// every earlier life's of this process.
func (n *Node) Incarnation() uint64 { return n.inc }

// run is the loop goroutine: the only one that touches the Core.
func (n *Node) run() {
	defer close(n.done)
	defer n.bgCancel()
	defer func() {
		reason := "shut down"
		if n.failErr != nil && !errors.Is(n.failErr, ErrShutdown) {
			reason = n.failErr.Error()
		}
		n.stopObservers(reason)
	}()
	timer := time.NewTimer(0)
	defer timer.Stop()
	recv := n.cfg.Transport.Receive()
	snaps := n.cfg.Transport.Snapshots()
	wasFull := false
	for {
		readings := n.d.Readings()
		// Flow control: while the store's backlog is at a bound, take no
		// proposals (Config.MaxUnsyncedEntries, Bytes). A Synced from the
		// persister wakes the loop when it drains.
		proposals := n.proposals
		if full := n.persister.full(); full {
			proposals = nil
			if !wasFull {
				n.fsync.throttled.Add(1)
			}
			wasFull = true
		} else {
			wasFull = false
		}
		select {
		case <-n.stop:
			return
		case err := <-n.fatal:
			n.fail(err)
			return
		case m, ok := <-recv:
			if !ok {
				n.fail(ErrShutdown)
				return
			}
			if m.Append != nil && len(m.Append.Entries) > 0 && n.persister.full() {
				// The leader sends them again once this follower's
				// replies show it caught up; heartbeats and lease
				// messages still go through.
				n.fsync.shed.Add(1)
				break
			}
			if err := n.d.Step(m); err != nil {
				n.log.Warn("refused message", "from", uint64(m.From), "kind", m.Kind().String(), "err", err)
			}
		case p := <-proposals:
			n.propose(p)
		case <-n.reads.bell:
			// startReads, below, takes them.
		case f := <-n.ops:
			f()
		case a := <-n.applyDone:
			n.onApplied(a)
		case in, ok := <-snaps:
			if ok {
				n.receiveSnapshot(in)
			}
		case <-timer.C:
			n.d.Tick()
		}
		// Reads are taken whatever woke the loop: those held while follower
		// reads waited for a request go once the step answered them.
		n.startReads()
		// Timers are due whatever woke the loop: under a steady stream of
		// events the tick timer, reset every iteration, might never fire.
		// The step's own reading tells, if it took one: Tick reads again.
		now := n.d.Last()
		if n.d.Readings() == readings {
			now = n.d.Now()
		}
		if !now.Before(n.core.NextTick()) {
			n.d.Tick()
		}
		n.resetTimer(timer, n.handleReady())
		n.wake()
	}
}

// wake wakes the persister and the applier for what the step handed them,
// once the step is done, the persister last: the goroutine woken last runs
// first when the loop waits again, on this processor, and the disk's write
// is what the step's replies wait for. Woken as it is handed its work, the
// persister comes before the applier the same step hands the commit's
// entries, and waits for the apply and for the loop to step its report
// (a follower's fdatasync then starts 10 us later at the median, 40-80 at
// p90, on 2 cores).
func (n *Node) wake() {
	if n.wakeApplier {
		n.wakeApplier = false
		n.applier.wake()
	}
	if n.wakePersister {
		n.wakePersister = false
		n.persister.signal()
	}
}

// resetTimer sets t for the Core's next tick, as seen from now.
func (n *Node) resetTimer(t *time.Timer, now edict.Time) {
	d, ok := n.core.NextTick().Sub(now)
	if !ok || d < 0 {
		d = 0
	}
	t.Reset(max(d, 100*time.Microsecond))
}

// handleReady has the Driver carry out what the Core asks, then publishes
// the status it led to. It returns the reading the status was taken at,
// the step's own, for the loop's timer: each reading of the system clock
// is three system calls, and the loop's bookkeeping took three readings
// per event before (most of the clock's share, a quarter of a busy
// leader's CPU).
func (n *Node) handleReady() edict.Time {
	n.d.HandleReady()
	now := n.d.Recent()
	n.publishStatus(now)
	return now
}

// nodeEnv is the Node's I/O for its Driver.
type nodeEnv struct{ n *Node }

func (e nodeEnv) Send(m wire.Message) { e.n.sendAll([]wire.Message{m}) }
func (e nodeEnv) Persist(seq uint64, b wire.Batch, after []wire.Message) {
	e.n.persister.enqueue(persistJob{seq: seq, batch: b, after: after})
	e.n.wakePersister = true
}
func (e nodeEnv) Apply(es []wire.Entry) {
	e.n.applier.hold(applyJob{entries: es})
	e.n.wakeApplier = true
}
func (e nodeEnv) SendSnapshot(peer edict.ProcessID) { e.n.sendSnapshot(peer) }
func (e nodeEnv) Event(ev replog.Event)             { e.n.onEvent(eventFromCore(ev)) }

// sendAll hands messages to the transport without ever waiting: a
// message that finds its peer's queue or append window full is dropped,
// and the protocol sends it again (probes, heartbeats, retries). Waiting
// here would stall the loop — one dead follower's full window once cost a
// leader its lease renewals, 50ms per append (found by the edictkv
// end-to-end test's handover).
func (n *Node) sendAll(ms []wire.Message) {
	for _, m := range ms {
		if err := n.cfg.Transport.Send(nonBlocking, m.To, m); err != nil {
			if errors.Is(err, context.Canceled) {
				// No room: sent again later, by design.
				n.log.Debug("send dropped", "to", uint64(m.To), "kind", m.Kind().String(), "err", err)
				continue
			}
			// Refused for itself (too large to frame, an unknown peer):
			// sending it again fails again.
			n.log.Warn("send refused", "to", uint64(m.To), "kind", m.Kind().String(), "err", err)
		}
	}
}

// background runs f on a goroutine that stopRuntime waits for (bg). Only
// the loop, the applier, Start and goroutines already counted call it.
func (n *Node) background(f func()) {
	n.bg.Add(1)
	go func() {
		defer n.bg.Done()
		f()
	}()
}

// nonBlocking is a context that is already done: Transport.Send takes the
// room there is and never waits for more.
var nonBlocking = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// onEvent acts on an event of the Core's and keeps it for the observers,
// who are sent it once the step's status is published (announce).
func (n *Node) onEvent(ev Event) {
	switch ev.Kind {
	case BecameLeader:
		n.log.Info("became leader", "epoch", ev.Epoch, "reign", ev.Reign.String())
	case SteppedDown:
		// What the lease core saw, so that a step-down under a gray
		// failure says whether renewals came late (this process was
		// starved) or on time (its granters or the network were slow),
		// and how long the stalls it had seen lately were.
		st := n.core.LeaseStats()
		n.log.Warn("stepped down", "reason", ev.Reason, "epoch", ev.Epoch, "renewals", st.Renewals, "renewals_late", st.RenewalsLate,
			"lost_expired", st.LostExpired, "lost_late", st.LostLate, "lost_released", st.LostReleased, "lost_suspended", st.LostSuspended,
			"stall", st.Stall, "renew_lead", st.RenewLead)
	case ConfigChanged:
		if ev.Membership != nil {
			n.log.Info("configuration", "epoch", ev.Epoch, "members", ev.Membership.Config.Members, "learners", ev.Membership.Config.Learners)
			for id, addr := range ev.Membership.Addrs {
				// A snapshot installed repeats addresses this Node
				// knows already: writing them again would cost a sync
				// each.
				if id != n.cfg.ID && addr != "" && n.peers[id] != addr {
					n.peers[id] = addr
					n.cfg.Transport.AddPeer(id, addr)
					if err := n.cfg.Store.Set(peerKey(id), []byte(addr)); err != nil {
						n.log.Error("persist peer address", "peer", uint64(id), "err", err)
					}
				}
			}
		}
	case EpochChanged:
		n.log.Info("epoch changed", "epoch", ev.Epoch)
	}
	n.pending = append(n.pending, ev)
}

// publishStatus publishes the Core's status, then announces to the
// observers what changed in the step that led to it.
func (n *Node) publishStatus(now edict.Time) {
	// Only the loop writes n.status, so it reads it here without the lock.
	old := n.status
	s := n.core.StatusSince(now, replog.Status(old))
	ls := n.core.LeaseStats()
	n.statusMu.Lock()
	n.status = Status(s)
	n.lease = ls
	n.statusMu.Unlock()
	n.announce(old, Status(s))
}

// stopWith stops the Node with err, from any goroutine: for failures after
// which the runtime must not go on, such as a state machine that could not
// follow the log.
func (n *Node) stopWith(err error) {
	select {
	case n.fatal <- err:
	default: // already stopping with an earlier error
	}
}

func (n *Node) fail(err error) {
	if !errors.Is(err, ErrShutdown) {
		n.log.Error("node stopped", "err", err)
	}
	n.failErr = err
	n.d.Close(err)
	n.applier.close()
	n.persister.close(true)
}

// alive fails a call on a stopped Node, or with a context already ended,
// before it is handed to the loop.
func (n *Node) alive(ctx context.Context) error {
	select {
	case <-n.done:
		return ErrShutdown
	default:
	}
	return ctx.Err()
}

// post runs f on the loop goroutine, without waiting for it to run; false
// if the Node has stopped.
// durableWaiter waits for the batches up to Ready seq to be durable.
type durableWaiter struct {
	seq  uint64
	done chan struct{}
}

// waitDurable returns once every batch the Node handed to its store
// before the call is durable: a call that answers its caller with a
// change of stable state (ForceRecovery) must not answer before a crash
// can no longer take the change back. An op runs between two Ready
// cycles, so by the time this one runs, the cycle after the caller's own
// op has handed its batch out.
func (n *Node) waitDurable(ctx context.Context) error {
	done := make(chan struct{})
	if err := n.do(ctx, func() {
		handed, synced := n.core.Syncs()
		n.durable = append(n.durable, durableWaiter{seq: handed, done: done})
		n.synced(synced)
	}); err != nil {
		return err
	}
	return n.await(ctx, done)
}

// synced releases, on the loop, the waiters whose batches are durable:
// every Ready up to seq is.
func (n *Node) synced(seq uint64) {
	keep := n.durable[:0]
	for _, w := range n.durable {
		if w.seq <= seq {
			close(w.done)
			continue
		}
		keep = append(keep, w)
	}
	clear(n.durable[len(keep):])
	n.durable = keep
}

func (n *Node) post(f func()) bool {
	select {
	case n.ops <- f:
		return true
	case <-n.done:
		return false
	}
}

// do runs f on the loop goroutine and waits for it.
func (n *Node) do(ctx context.Context, f func()) error {
	if err := n.alive(ctx); err != nil {
		return err
	}
	done := make(chan struct{})
	select {
	case n.ops <- func() { f(); close(done) }:
	case <-n.done:
		return ErrShutdown
	case <-ctx.Done():
		return ctx.Err()
	}
	return n.await(ctx, done)
}

// await waits for done, unless the Node stops or ctx ends first.
func (n *Node) await(ctx context.Context, done <-chan struct{}) error {
	select {
	case <-done:
		return nil
	case <-n.done:
		return ErrShutdown
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Status reports the Node's view of the cluster.
func (n *Node) Status() Status {
	n.statusMu.Lock()
	defer n.statusMu.Unlock()
	return n.status
}

// ReignIndex is the log index of the reign-start edict of the newest reign
// this process has applied an entry of: a number that grows with every
// reign, for APIs that report a term (etcd's raft_term). Only committed
// entries are applied, and a reign's start edict is appended after every
// entry committed before it, so two reigns never share one; it never
// decreases at one process. After a restart
// from a snapshot whose reign started before the snapshot, it reports the
// snapshot's index until the next reign-start edict is applied (for an
// fsm.DiskFSM, the index its store was durable at, if that is higher).
func (n *Node) ReignIndex() uint64 { return n.applier.reignIndex.Load() }

// Shutdown stops the Node cleanly, the way a container is stopped:
// SIGTERM, then a grace period. A leader first releases its lease and
// hands leadership to the most up-to-date member, so that no one need
// wait the lease out nor for a failure detector to notice. Then the
// process grants nothing more — it refuses its leader's renewals too —
// and waits until every lease it granted has lapsed by its own clock: at
// most (1+ρ)·MaxLease, usually about one lease (RenewInterval plus a
// round trip, 320 ms with the defaults), longer if it was restarted less
// than that ago, since its own restart quarantine must end too. It
// records durably that it ended holding no live grant, stops the runtime
// and waits for it. The next Start of this process then serves at once,
// without the restart quarantine of (1+ρ)·MaxLease during which a
// restarted process grants nothing and accepts no append
// (docs/protocol.md, "A clean stop ends the quarantine").
//
// If ctx ends before the grants have lapsed, Shutdown stops the Node all
// the same, writes no record, and returns an error wrapping ctx's: the
// next start sits out the quarantine, as after a crash. So does a Node
// that is killed, or whose loop already stopped (its transport closed).
// A ctx that ends while the runtime stops returns ctx's error at once.
// Shutdown closes neither the store nor the transport: close the
// transport after Shutdown returns, or the hand-over is lost. Once it has
// returned nil, nothing of this Node uses the store, the snapshot store or
// the state machine any more: a snapshot being written or received was
// finished or abandoned (its unfinished files removed), so the process
// may start again on the same files at once. That wait does not end with
// ctx, and need not: a stream being received is given up at once
// (wire.IncomingSnapshot.Abort), whatever its sender does.
func (n *Node) Shutdown(ctx context.Context) error {
	cut := n.retire(ctx)
	if cut != nil && !errors.Is(cut, ErrShutdown) {
		n.log.Warn("clean stop cut short: the next start sits out the restart quarantine", "err", cut)
	}
	return n.stopRuntime(ctx, cut)
}

// stopRuntime stops the loop and waits for it, the applier, the
// persister and the background goroutines (bg), whose snapshot I/O the
// loop's end has cut short. After a clean stop cut short by ctx it waits
// for the loop regardless (it stops at its next turn) and reports the cut.
func (n *Node) stopRuntime(ctx context.Context, cut error) error {
	n.stopOnce.Do(func() { close(n.stop) })
	if cut != nil && !errors.Is(cut, ErrShutdown) && ctx.Err() != nil {
		<-n.done
	} else {
		select {
		case <-n.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	n.applier.close()
	n.applier.wait()
	// What the loop handed the store is written, and the messages that
	// waited for it sent, before the owner closes the store and transport.
	n.persister.close(false)
	n.persister.wait()
	// Nothing starts a background goroutine any more but one already
	// running: the loop and the applier, which start them, have stopped.
	n.bg.Wait()
	if cut != nil && !errors.Is(cut, ErrShutdown) {
		return fmt.Errorf("edictlog: shutdown: stopped before the grants this process made had lapsed, so its next start sits out the restart quarantine: %w", cut)
	}
	return nil
}

func peerKey(id edict.ProcessID) string { return fmt.Sprintf("peers/%016x", uint64(id)) }

// Debug describes the core's internal state in one line — lease, grant,
// attempts, the weak leader, and per-follower progress when leading — for
// diagnostics and failure reports.
func (n *Node) Debug(ctx context.Context) string {
	var s string
	if err := n.do(ctx, func() { s = n.core.Debug(n.d.Now()) }); err != nil {
		return err.Error()
	}
	return s
}

// LeaseStats describes what became of this process's leases since it
// started: renewals (and those started late, a sign of a busy or starved
// process), leases lost by cause, the longest stall it saw lately and the
// renewal lead that follows from it (elect.Stats), and, per peer, how
// long ago it last granted to this process.
type LeaseStats struct {
	elect.Stats
	SinceLastGrant map[edict.ProcessID]time.Duration
}

// LeaseStats reports the lease statistics as of the loop's last step.
func (n *Node) LeaseStats() LeaseStats {
	n.statusMu.Lock()
	s := n.lease
	n.statusMu.Unlock()
	// The loop publishes the lease core's own copy of LastGrant, shared
	// until a grant changes it; the caller gets one of its own.
	s.LastGrant = maps.Clone(s.LastGrant)
	out := LeaseStats{Stats: s}
	if len(s.LastGrant) > 0 {
		now := n.clock.Now()
		out.SinceLastGrant = map[edict.ProcessID]time.Duration{}
		for p, at := range s.LastGrant {
			if d, ok := now.Sub(at); ok {
				out.SinceLastGrant[p] = d
			}
		}
	}
	return out
}
