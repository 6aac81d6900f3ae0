package log

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect"
	"github.com/edictlog/edictlog/storage"
	"github.com/edictlog/edictlog/transport"
)

var (
	// ErrOutcomeUnknown: the write may or may not commit — the leader lost
	// its lease, or the context ended, after the write was appended. Never
	// reported as a failure (DESIGN §6).
	ErrOutcomeUnknown = errors.New("log: outcome unknown")
	// ErrShutdown: the Node has stopped.
	ErrShutdown = errors.New("log: node shut down")
)

// NotLeaderError is returned by writes and lease reads on a process that
// does not lead; Leader is the leader it knows of, if any (§10.4).
type NotLeaderError struct {
	Leader edict.ProcessID
	Err    error
}

func (e *NotLeaderError) Error() string {
	if e.Leader == edict.None {
		return e.Err.Error() + " (no leader known)"
	}
	return fmt.Sprintf("%v (leader is %v)", e.Err, e.Leader)
}

func (e *NotLeaderError) Unwrap() error { return e.Err }

// Node is the replicated log's runtime: it drives a Core with a real
// clock, storage, transport and state machine. One goroutine owns the
// Core; another applies committed entries to the FSM. All methods are safe
// for concurrent use.
type Node struct {
	cfg   Config
	clock edict.Clock
	log   *slog.Logger

	core *Core // owned by the loop goroutine

	proposals chan *proposal
	reads     chan *readRequest
	ops       chan func()
	applyDone chan applied
	// fatal stops the loop with an error from another goroutine (stopWith).
	fatal chan error

	pending     map[uint64]*proposal // by index, awaiting apply
	readWaits   []*readRequest       // awaiting apply of their index
	readsByID   map[uint64]*readRequest
	nextReadID  uint64
	appliedIdx  uint64
	leaderSince edict.Time
	leading     bool

	applier *applier

	leaderCh chan LeaderChange

	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
	failErr  error

	statusMu sync.Mutex
	status   Status
}

// LeaderChange is sent on LeaderChanges when the known leader changes.
type LeaderChange struct {
	Leader   edict.ProcessID
	IsLeader bool
	Epoch    uint64
}

// Start opens a Node: it bumps the incarnation, restores the newest
// snapshot into the FSM, loads the log, and starts the runtime.
func Start(cfg Config) (*Node, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	inc, err := cfg.Store.BumpIncarnation()
	if err != nil {
		return nil, fmt.Errorf("log: bump incarnation: %w", err)
	}
	clock := cfg.Clock
	if clock == nil {
		sc, err := edict.NewSystemClock(inc, max(cfg.Rho, 1e-3))
		if err != nil {
			return nil, err
		}
		clock = sc
	}
	st, peers, err := loadState(cfg)
	if err != nil {
		return nil, err
	}
	snapIdx, err := restoreSnapshot(cfg, &st)
	if err != nil {
		return nil, err
	}
	det := cfg.Detector
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
	core, err := NewCore(CoreConfig{ID: cfg.ID, Elect: elect.Config{
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
		cfg: cfg, clock: clock, log: cfg.Logger.With("node", uint64(cfg.ID)), core: core,
		proposals: make(chan *proposal, cfg.MaxBatch), reads: make(chan *readRequest, 1024),
		ops: make(chan func(), 64), applyDone: make(chan applied, 64), fatal: make(chan error, 1),
		pending: map[uint64]*proposal{}, readsByID: map[uint64]*readRequest{}, appliedIdx: snapIdx,
		leaderCh: make(chan LeaderChange, 1), stop: make(chan struct{}), done: make(chan struct{}),
	}
	n.applier = newApplier(n, snapIdx)
	// Status is right from the start, not only after the loop's first
	// event. The core is read here before the loop owns it.
	n.publishStatus()
	n.log.Info("node started", "incarnation", inc, "snapshot", snapIdx, "last", core.log.lastIndex(), "epoch", core.el.ActiveEpoch())
	go n.applier.run()
	go n.run()
	return n, nil
}

// LeaderChanges returns a channel that receives the newest leadership
// change. It never blocks the Node: an unread change is replaced.
func (n *Node) LeaderChanges() <-chan LeaderChange { return n.leaderCh }

func (n *Node) notifyLeader(lc LeaderChange) {
	for {
		select {
		case n.leaderCh <- lc:
			return
		default:
		}
		select {
		case <-n.leaderCh:
		default:
		}
	}
}

// run is the loop goroutine: the only one that touches the Core.
func (n *Node) run() {
	defer close(n.done)
	timer := time.NewTimer(0)
	defer timer.Stop()
	recv := n.cfg.Transport.Receive()
	snaps := n.cfg.Transport.Snapshots()
	for {
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
			if err := n.core.Step(n.now(), m); err != nil {
				n.log.Warn("refused message", "from", uint64(m.From), "kind", m.Kind().String(), "err", err)
			}
		case p := <-n.proposals:
			n.propose(p)
		case r := <-n.reads:
			n.startRead(r)
		case f := <-n.ops:
			f()
		case a := <-n.applyDone:
			n.onApplied(a)
		case in, ok := <-snaps:
			if ok {
				n.receiveSnapshot(in)
			}
		case <-timer.C:
			n.core.Tick(n.now())
		}
		// Timers are due whatever woke the loop: under a steady stream of
		// events the tick timer, reset every iteration, might never fire.
		if now := n.now(); !now.Before(n.core.NextTick()) {
			n.core.Tick(now)
		}
		if err := n.handleReady(); err != nil {
			n.fail(err)
			return
		}
		n.resetTimer(timer)
	}
}

func (n *Node) resetTimer(t *time.Timer) {
	now := n.now()
	d, ok := n.core.NextTick().Sub(now)
	if !ok || d < 0 {
		d = 0
	}
	t.Reset(max(d, 100*time.Microsecond))
}

// now reads the clock for a call into the Core, and first gives up a lease
// the host's suspend may have outlived (DESIGN §3): a leader must never see
// time pass slower than it does. Every input reaches the Core through a
// reading taken here, so no lease-backed answer — a lease read, a follower
// read's index, a commit — is made on a lease a suspend ended. The check
// measures from the reign's first lease attempt (Core.LeaseSince), not from
// when the runtime noticed it leads: a suspend in between counts too
// (issue 13, hole 5). Only the loop goroutine may call it.
func (n *Node) now() edict.Time {
	now := n.clock.Now()
	checkSuspend(n.core, n.clock, now)
	return now
}

// checkSuspend gives up core's lease if clock was suspended since the
// reading the lease was measured from.
func checkSuspend(core *Core, clock edict.Clock, now edict.Time) {
	if since, ok := core.LeaseSince(now); ok && clock.Suspended(since) {
		core.ClockSuspended(now)
	}
}

// handleReady does what the Core asks, in Ready's order.
func (n *Node) handleReady() error {
	for {
		rd := n.core.Ready()
		if rd.IsEmpty() {
			return nil
		}
		n.sendAll(rd.Immediate)
		if !batchEmpty(&rd.Batch) {
			if err := n.cfg.Store.StoreBatch(rd.Batch); err != nil {
				return fmt.Errorf("log: store batch: %w", err)
			}
		}
		n.sendAll(rd.Messages)
		if len(rd.Apply) > 0 {
			n.applier.enqueue(applyJob{entries: rd.Apply})
		}
		for _, rs := range rd.Reads {
			n.onReadState(rs)
		}
		for _, p := range rd.Snapshots {
			n.sendSnapshot(p)
		}
		for _, ev := range rd.Events {
			n.onEvent(ev)
		}
		n.core.Advance(n.now(), rd)
		n.publishStatus()
	}
}

// sendAll hands messages to the transport without ever waiting: a
// message that finds its peer's queue or append window full is dropped,
// and the protocol sends it again (probes, heartbeats, retries). Waiting
// here would stall the loop — one dead follower's full window once cost a
// leader its lease renewals, 50ms per append (found by the edictkv
// end-to-end test's handover).
func (n *Node) sendAll(ms []transport.Message) {
	for _, m := range ms {
		if err := n.cfg.Transport.Send(nonBlocking, m.To, m); err != nil {
			n.log.Debug("send dropped", "to", uint64(m.To), "kind", m.Kind().String(), "err", err)
		}
	}
}

// nonBlocking is a context that is already done: Transport.Send takes the
// room there is and never waits for more.
var nonBlocking = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

func (n *Node) onEvent(ev Event) {
	switch ev.Kind {
	case BecameLeader:
	case SteppedDown:
		n.log.Warn("stepped down", "reason", ev.Reason, "epoch", ev.Epoch)
		n.leading = false
		// Writes appended but not committed may still commit under the
		// next leader, or not: their outcome is unknown. Those already
		// committed are handed to the applier and resolve when it has
		// applied them: a step-down right after a commit — as every
		// membership change ends with, when the leader wedges its epoch
		// — must not report a committed write as unknown.
		for idx, p := range n.pending {
			if idx > n.core.commit {
				p.finish(nil, ErrOutcomeUnknown)
				delete(n.pending, idx)
			}
		}
		n.notifyLeader(LeaderChange{Leader: edict.None, Epoch: ev.Epoch})
	case LeaderChanged:
		n.notifyLeader(LeaderChange{Leader: ev.Leader, Epoch: ev.Epoch})
	case ConfigChanged:
		if ev.Membership != nil {
			for id, addr := range ev.Membership.Addrs {
				if id != n.cfg.ID && addr != "" {
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
	if !n.leading && n.core.CanServeLease(n.now()) {
		n.leading = true
		n.leaderSince = n.now()
		n.notifyLeader(LeaderChange{Leader: n.cfg.ID, IsLeader: true, Epoch: n.core.el.ActiveEpoch()})
	}
}

func (n *Node) publishStatus() {
	s := n.core.Status(n.now())
	n.statusMu.Lock()
	n.status = s
	n.statusMu.Unlock()
	if !n.leading && s.IsLeader {
		n.leading = true
		n.leaderSince = n.now()
		n.notifyLeader(LeaderChange{Leader: n.cfg.ID, IsLeader: true, Epoch: s.Epoch})
	}
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
	for _, p := range n.pending {
		p.finish(nil, ErrOutcomeUnknown)
	}
	for _, r := range n.readsByID {
		r.finish(ReadResult{}, err)
	}
	n.applier.close()
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
// snapshot's index until the next reign-start edict is applied.
func (n *Node) ReignIndex() uint64 { return n.applier.reignIndex.Load() }

// Shutdown releases the lease and hands leadership to the most up-to-date
// member (Core.Resign), so that no one need wait the lease out nor for a
// failure detector to notice; then it stops the runtime and waits for it,
// or until ctx is done. It closes neither the store nor the transport:
// close the transport after Shutdown returns, or the hand-over is lost.
func (n *Node) Shutdown(ctx context.Context) error {
	_ = n.do(ctx, func() {
		n.core.Resign(n.now())
		if err := n.handleReady(); err != nil {
			n.log.Error("release on shutdown", "err", err)
		}
	})
	n.stopOnce.Do(func() { close(n.stop) })
	select {
	case <-n.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	n.applier.close()
	n.applier.wait()
	return nil
}

func peerKey(id edict.ProcessID) string { return fmt.Sprintf("peers/%016x", uint64(id)) }

var _ = storage.Position{}

// Debug describes the core's internal state in one line — lease, grant,
// attempts, the weak leader, and per-follower progress when leading — for
// diagnostics and failure reports.
func (n *Node) Debug(ctx context.Context) string {
	var s string
	if err := n.do(ctx, func() { s = n.core.Debug(n.now()) }); err != nil {
		return err.Error()
	}
	return s
}
