// Package churn measures what membership changes cost a running cluster:
// edictlog.Nodes in one process on bbolt files and loopback TCP, writers
// calling the leader's Apply the whole time, while a schedule adds
// learners, promotes them, changes a member's address (the member
// restarts on a new port), removes followers and removes the leader.
//
// It reports, for every change, the longest stretch in which no process
// led (a ready reign under a valid lease, polled from every Node's Status
// each millisecond), and the writes the cluster refused or left unknown.
// A change that keeps the leader should leave the cluster leaderless for
// a few round trips at most; removing the leader costs one transfer.
package churn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/fsm/kvfsm"
	"github.com/edictlog/edictlog/storage"
	"github.com/edictlog/edictlog/transport"
)

// Kind is a kind of membership change.
type Kind string

// The changes the schedule makes.
const (
	AddLearner     Kind = "add-learner"
	Promote        Kind = "promote"
	SetAddress     Kind = "set-address"
	RemoveFollower Kind = "remove-follower"
	RemoveLeader   Kind = "remove-leader"
	// Transfer is no membership change: a leadership transfer to a
	// follower, run in each round for scale, since the removal of the
	// leader should cost the cluster no more than one.
	Transfer Kind = "transfer"
)

// KeepsLeader reports whether a change of this kind should leave the
// leader in place.
func (k Kind) KeepsLeader() bool { return k != RemoveLeader && k != Transfer }

// Change is the outcome of one membership change.
type Change struct {
	Kind   Kind
	Target edict.ProcessID
	// Took is how long the call took, Err what it returned.
	Took time.Duration
	Err  error
	// Leaderless is the longest stretch without a leader from the call's
	// start until a leader was seen again after it returned.
	Leaderless time.Duration
}

// Result is one run.
type Result struct {
	Changes []Change
	// Transfers are the leadership transfers run beside the changes.
	Transfers []Change
	// Writes acknowledged; refusals (a *edictlog.NotLeaderError or
	// edictlog.ErrNotLeader from the process the writer took for the leader,
	// outside a leader removal or transfer); refusals during them, when
	// each writer is expected to be sent on; writes whose outcome is
	// unknown; other failures.
	Writes, Refused, RemovalRefused, Unknown, Failed int64
	Elapsed                                          time.Duration
}

// Config shapes a run.
type Config struct {
	Dir     string // for the bbolt files and snapshots
	Writers int    // concurrent writers (default 64)
	Rounds  int    // rounds of the schedule (default 5)
	// Pause between changes, so that each change's gap is measured apart
	// from the next (default 200ms).
	Pause  time.Duration
	Logger *slog.Logger // default: discard
}

// Round is the schedule of one round; with the defaults, five rounds
// make 35 changes, 5 of them removals of the leader, with 3 or 4 members
// at every point, and 5 leadership transfers beside them.
var Round = []Kind{AddLearner, Promote, SetAddress, RemoveFollower, AddLearner, Promote, Transfer, RemoveLeader}

type member struct {
	id    edict.ProcessID
	node  *edictlog.Node
	tr    *transport.TCP
	store *storage.BoltStore
	snaps *storage.FileSnapshotStore
}

type cluster struct {
	cfg    Config
	mu     sync.Mutex
	addrs  map[edict.ProcessID]string
	live   map[edict.ProcessID]*member
	nextID edict.ProcessID
	leader atomic.Pointer[member]
}

// Run starts a 3-node cluster in cfg.Dir, runs the schedule under load
// and stops everything.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if cfg.Writers <= 0 {
		cfg.Writers = 64
	}
	if cfg.Rounds <= 0 {
		cfg.Rounds = 5
	}
	if cfg.Pause <= 0 {
		cfg.Pause = 200 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	c := &cluster{cfg: cfg, addrs: map[edict.ProcessID]string{}, live: map[edict.ProcessID]*member{}, nextID: 4}
	defer c.close()
	trs := map[edict.ProcessID]*transport.TCP{}
	for id := edict.ProcessID(1); id <= 3; id++ {
		tr, err := c.listen(id, "127.0.0.1:0")
		if err != nil {
			return Result{}, err
		}
		trs[id], c.addrs[id] = tr, tr.LocalAddr()
	}
	for id := edict.ProcessID(1); id <= 3; id++ {
		if _, err := c.start(ctx, id, trs[id], false); err != nil {
			return Result{}, err
		}
	}

	mon := newMonitor(c)
	monCtx, stopMon := context.WithCancel(ctx)
	var monDone sync.WaitGroup
	monDone.Add(1)
	go func() { defer monDone.Done(); mon.run(monCtx) }()
	defer func() { stopMon(); monDone.Wait() }()
	if _, err := mon.waitLeader(ctx, 10*time.Second); err != nil {
		return Result{}, err
	}

	var res Result
	var removing atomic.Bool
	loadCtx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range cfg.Writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.write(loadCtx, w, &res, &removing)
		}()
	}

	var runErr error
	for r := 0; r < cfg.Rounds && runErr == nil; r++ {
		for _, k := range Round {
			if err := sleep(ctx, cfg.Pause); err != nil {
				runErr = err
				break
			}
			removing.Store(!k.KeepsLeader())
			ch, err := c.change(ctx, mon, k)
			if !k.KeepsLeader() {
				// Writers learn the new leader from the monitor's next
				// poll, a millisecond at most.
				_ = sleep(ctx, 2*time.Millisecond)
			}
			removing.Store(false)
			if k == Transfer {
				res.Transfers = append(res.Transfers, ch)
			} else {
				res.Changes = append(res.Changes, ch)
			}
			if err != nil {
				runErr = fmt.Errorf("%s of %v: %w", k, ch.Target, err)
				break
			}
		}
	}
	stopLoad()
	wg.Wait()
	res.Elapsed = time.Since(start)
	return res, runErr
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *cluster) listen(id edict.ProcessID, bind string) (*transport.TCP, error) {
	return transport.NewTCP(transport.TCPConfig{ID: id, ClusterID: "churn", BindAddr: bind, Logger: c.cfg.Logger})
}

// start runs process id on transport tr, with the store in its directory
// (opened again on a restart).
func (c *cluster) start(ctx context.Context, id edict.ProcessID, tr *transport.TCP, join bool) (*member, error) {
	store, err := storage.OpenBolt(filepath.Join(c.cfg.Dir, fmt.Sprintf("n%d.db", id)), nil)
	if err != nil {
		tr.Close()
		return nil, err
	}
	snaps, err := storage.NewFileSnapshotStore(filepath.Join(c.cfg.Dir, fmt.Sprintf("snap%d", id)), 2)
	if err != nil {
		tr.Close()
		store.Close()
		return nil, err
	}
	c.mu.Lock()
	peers := maps.Clone(c.addrs)
	c.mu.Unlock()
	peers[id] = tr.LocalAddr()
	n, err := edictlog.Start(ctx, edictlog.Config{ID: id, Peers: peers, Join: join, Store: store, Snapshots: snaps,
		Transport: tr, FSM: kvfsm.NewKV(), Logger: c.cfg.Logger})
	if err != nil {
		tr.Close()
		store.Close()
		return nil, fmt.Errorf("start %v: %w", id, err)
	}
	m := &member{id: id, node: n, tr: tr, store: store, snaps: snaps}
	c.mu.Lock()
	c.live[id] = m
	c.mu.Unlock()
	return m, nil
}

func (c *cluster) stop(m *member) {
	_ = m.node.Shutdown(context.Background())
	m.tr.Close()
	m.store.Close()
	c.mu.Lock()
	delete(c.live, m.id)
	c.mu.Unlock()
}

func (c *cluster) close() {
	c.mu.Lock()
	ms := make([]*member, 0, len(c.live))
	for _, m := range c.live {
		ms = append(ms, m)
	}
	c.mu.Unlock()
	for _, m := range ms {
		c.stop(m)
	}
}

func (c *cluster) members() []*member {
	c.mu.Lock()
	defer c.mu.Unlock()
	ms := make([]*member, 0, len(c.live))
	for _, m := range c.live {
		ms = append(ms, m)
	}
	slices.SortFunc(ms, func(a, b *member) int { return int(a.id) - int(b.id) })
	return ms
}

func (c *cluster) member(id edict.ProcessID) *member {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.live[id]
}

// write applies 256-byte values in a loop at the process it takes for the
// leader, following the hints of refusals.
func (c *cluster) write(ctx context.Context, w int, res *Result, removing *atomic.Bool) {
	val := string(make([]byte, 256))
	for i := 0; ctx.Err() == nil; i++ {
		m := c.leader.Load()
		if m == nil {
			_ = sleep(ctx, time.Millisecond)
			continue
		}
		cmd, err := kvfsm.EncodeCommand(kvfsm.Command{Put: &kvfsm.Put{Key: fmt.Sprintf("w%02d/%04d", w, i%4096), Value: val}})
		if err != nil {
			panic(err)
		}
		// A write begun while the leader moves is answered by the
		// process it was sent to, perhaps after the move: its refusal
		// is the move's.
		moving := removing.Load()
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err = m.node.Apply(wctx, cmd)
		cancel()
		var nl *edictlog.NotLeaderError
		switch {
		case err == nil:
			atomic.AddInt64(&res.Writes, 1)
		case ctx.Err() != nil:
			return
		case errors.As(err, &nl) || errors.Is(err, edictlog.ErrNotLeader):
			if moving || removing.Load() {
				atomic.AddInt64(&res.RemovalRefused, 1)
			} else {
				atomic.AddInt64(&res.Refused, 1)
			}
			if nl != nil && nl.Leader != edict.None {
				if l := c.member(nl.Leader); l != nil {
					c.leader.CompareAndSwap(m, l)
				}
			}
			_ = sleep(ctx, time.Millisecond)
		case errors.Is(err, edictlog.ErrOutcomeUnknown):
			atomic.AddInt64(&res.Unknown, 1)
		case errors.Is(err, edictlog.ErrShutdown):
			_ = sleep(ctx, time.Millisecond) // the member was removed and stopped
		default:
			atomic.AddInt64(&res.Failed, 1)
			c.cfg.Logger.Warn("write failed", "err", err)
		}
	}
}

// change makes one membership change through the current leader and
// measures the gap it leaves.
func (c *cluster) change(ctx context.Context, mon *monitor, k Kind) (Change, error) {
	l, err := mon.waitLeader(ctx, 10*time.Second)
	if err != nil {
		return Change{Kind: k}, err
	}
	ch := Change{Kind: k}
	var call func(context.Context) error
	var after func()
	switch k {
	case AddLearner:
		id := c.nextID
		c.nextID++
		tr, err := c.listen(id, "127.0.0.1:0")
		if err != nil {
			return ch, err
		}
		c.mu.Lock()
		c.addrs[id] = tr.LocalAddr()
		c.mu.Unlock()
		if _, err := c.start(ctx, id, tr, true); err != nil {
			return ch, err
		}
		ch.Target = id
		call = func(ctx context.Context) error { return l.node.AddLearner(ctx, id, tr.LocalAddr()) }
	case Promote:
		s := l.node.Status()
		if len(s.Learners) == 0 {
			return ch, errors.New("no learner to promote")
		}
		id := s.Learners[0]
		ch.Target = id
		// A learner is promoted once it has caught up, as an operator
		// would (etcd refuses to promote one that has not).
		if err := c.waitCaughtUp(ctx, l, id); err != nil {
			return ch, err
		}
		call = func(ctx context.Context) error { return l.node.Promote(ctx, id) }
	case SetAddress:
		id := c.oldestFollower(l)
		ch.Target = id
		old := c.member(id)
		c.stop(old)
		tr, err := c.listen(id, "127.0.0.1:0")
		if err != nil {
			return ch, err
		}
		c.mu.Lock()
		c.addrs[id] = tr.LocalAddr()
		c.mu.Unlock()
		if _, err := c.start(ctx, id, tr, false); err != nil {
			return ch, err
		}
		call = func(ctx context.Context) error { return l.node.SetAddress(ctx, id, tr.LocalAddr()) }
	case RemoveFollower:
		id := c.follower(l)
		ch.Target = id
		call = func(ctx context.Context) error { return l.node.Remove(ctx, id) }
		after = func() { c.stop(c.member(id)) }
	case RemoveLeader:
		ch.Target = l.id
		call = func(ctx context.Context) error { return l.node.Remove(ctx, l.id) }
		after = func() { c.stop(l) }
	case Transfer:
		id := c.follower(l)
		ch.Target = id
		call = func(ctx context.Context) error { return l.node.TransferLeadership(ctx, id) }
	}
	epoch := l.node.Status().Epoch
	c.cfg.Logger.Info("churn: change", "kind", string(k), "target", uint64(ch.Target), "leader", uint64(l.id), "epoch", epoch)
	mark := mon.mark()
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	t0 := time.Now()
	ch.Err = call(cctx)
	ch.Took = time.Since(t0)
	cancel()
	if ch.Err != nil {
		return ch, ch.Err
	}
	// The gap ends when a leader is seen again: for a change of members,
	// a leader of the new epoch (the call may return before the old epoch
	// ends), other than the removed process for a removal of the leader.
	not, newEpoch := edict.None, epoch
	switch k {
	case Promote, RemoveFollower:
		newEpoch = epoch + 1
	case RemoveLeader:
		not, newEpoch = l.id, epoch+1
	case Transfer:
		not = l.id
	}
	if _, err := mon.waitLeaderIn(ctx, not, newEpoch, 10*time.Second); err != nil {
		return ch, err
	}
	ch.Leaderless = mon.longestGapSince(mark)
	c.cfg.Logger.Info("churn: change done", "kind", string(k), "target", uint64(ch.Target), "took_ms", ch.Took.Milliseconds(), "leaderless_ms", ch.Leaderless.Milliseconds())
	if after != nil {
		after()
	}
	return ch, nil
}

// follower picks a voting member other than the leader, the newest one
// first, so that the bootstrap members are replaced over the rounds.
func (c *cluster) follower(l *member) edict.ProcessID {
	s := l.node.Status()
	for _, id := range slices.Backward(s.Members) {
		if id != l.id && c.member(id) != nil {
			return id
		}
	}
	return edict.None
}

// oldestFollower picks the voting member with the lowest id other than
// the leader.
func (c *cluster) oldestFollower(l *member) edict.ProcessID {
	for _, id := range l.node.Status().Members {
		if id != l.id && c.member(id) != nil {
			return id
		}
	}
	return edict.None
}

func (c *cluster) waitCaughtUp(ctx context.Context, l *member, id edict.ProcessID) error {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		s := l.node.Status()
		if m := c.member(id); m != nil && s.Match[id] >= s.Commit && m.node.Status().Applied+64 >= s.Commit {
			return nil
		}
		if err := sleep(ctx, 2*time.Millisecond); err != nil {
			return err
		}
	}
	return fmt.Errorf("learner %v did not catch up within 20s", id)
}

// monitor polls every live Node's Status each millisecond and records the
// stretches in which none led.
type monitor struct {
	c  *cluster
	mu sync.Mutex
	// gaps are the leaderless stretches seen, each [start, end); an open
	// one has a zero end.
	gaps    []gap
	sampled int
}

type gap struct{ start, end time.Time }

func newMonitor(c *cluster) *monitor { return &monitor{c: c} }

func (m *monitor) run(ctx context.Context) {
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			var leader *member
			for _, mem := range m.c.members() {
				if mem.node.Status().IsLeader {
					leader = mem
				}
			}
			m.mu.Lock()
			m.sampled++
			open := len(m.gaps) > 0 && m.gaps[len(m.gaps)-1].end.IsZero()
			switch {
			case leader == nil && !open:
				m.gaps = append(m.gaps, gap{start: now})
			case leader != nil && open:
				m.gaps[len(m.gaps)-1].end = now
			}
			m.mu.Unlock()
			if leader != nil {
				m.c.leader.Store(leader)
			}
		}
	}
}

// mark is a point from which longestGapSince counts.
func (m *monitor) mark() time.Time { return time.Now() }

// longestGapSince is the longest leaderless stretch that ended after t
// (counted from t if it began before).
func (m *monitor) longestGapSince(t time.Time) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	var longest time.Duration
	for _, g := range m.gaps {
		end := g.end
		if end.IsZero() {
			end = time.Now()
		}
		if end.Before(t) {
			continue
		}
		start := g.start
		if start.Before(t) {
			start = t
		}
		longest = max(longest, end.Sub(start))
	}
	return longest
}

func (m *monitor) waitLeader(ctx context.Context, within time.Duration) (*member, error) {
	return m.waitLeaderIn(ctx, edict.None, 0, within)
}

// waitLeaderIn waits until a live process other than not leads in epoch
// at least epoch.
func (m *monitor) waitLeaderIn(ctx context.Context, not edict.ProcessID, epoch uint64, within time.Duration) (*member, error) {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		for _, mem := range m.c.members() {
			if s := mem.node.Status(); mem.id != not && s.IsLeader && s.Epoch >= epoch {
				return mem, nil
			}
		}
		if err := sleep(ctx, time.Millisecond); err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("no leader within %v", within)
}
