package edictlogtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/fsm"
	"github.com/edictlog/edictlog/storage"
)

// Timings the Cluster gives its Nodes unless ClusterConfig.Tune sets
// others: short enough that a failover takes about a second rather than
// the defaults' several, long enough that a leader on a busy 2-core
// machine running the race detector keeps its lease through the usual
// stalls. A stall longer than that costs an election, never correctness:
// nothing in the kit waits on a timing assumption except through a
// context the caller gives.
const (
	RoundTrip     = 20 * time.Millisecond
	RenewInterval = 150 * time.Millisecond
	MaxLease      = 2 * (RoundTrip + RenewInterval)
)

// ClusterConfig configures a Cluster.
type ClusterConfig struct {
	// Nodes is how many processes bootstrap the cluster, with ids 1 to
	// Nodes (default 3).
	Nodes int
	// FSM returns the state machine of a process's new incarnation:
	// called at every start and restart. dir is the process's own
	// directory, which lives as long as the Cluster (a DiskFSM keeps its
	// store there, and finds it again on a restart). If the FSM is an
	// io.Closer, the Cluster closes it once its Node has stopped.
	// Required.
	FSM func(id edict.ProcessID, dir string) (fsm.FSM, error)
	// WAL keeps each process's log in a storage.WALStore (the store
	// edictkv and the examples use) and its snapshots in a
	// FileSnapshotStore, in its directory, as a deployment does; Bolt
	// does the same with the log in a storage.BoltStore. By default they
	// are a storage.MemStore and a storage.MemSnapshotStore. Setting both
	// is refused.
	WAL, Bolt bool
	// Network carries the messages (default: a new Network with no
	// faults, closed with the Cluster). A Network given here may carry
	// other transports too, but none at the Cluster's addresses
	// (DefaultAddr of its ids); the Cluster does not close it.
	Network *Network
	// Tune, if set, adjusts every Node's Config before it starts, after
	// the Cluster filled it in (ID, Peers, Join, stores, transport, FSM,
	// Logger, and the timings above).
	Tune func(*edictlog.Config)
	// Logger receives the Nodes' logs (default: warnings and errors, to
	// the test's log, until the Cluster closes).
	Logger *slog.Logger
}

// Cluster is a cluster of Nodes in one process over an in-memory Network,
// for tests: each process has its own store, snapshot store, transport
// and state machine, which it keeps across Kill and Restart. Its methods
// are safe for concurrent use; those that report failures with t.Fatal
// (NewCluster, Kill, Stop, Restart, RestartAt, Join) must be called from
// the test's goroutine.
type Cluster struct {
	t      testing.TB
	cfg    ClusterConfig
	net    *Network
	ownNet bool
	dir    string
	logger *slog.Logger
	quiet  func() // stops logging to t

	// removeDir: dir is StartCluster's, removed by Close.
	removeDir bool

	mu     sync.Mutex
	procs  map[edict.ProcessID]*process
	peers  map[edict.ProcessID]string
	closed bool
}

// process is one process of the cluster, across its incarnations.
type process struct {
	id   edict.ProcessID
	dir  string
	join bool

	// Kept across incarnations (a MemStore's state is the process's
	// disk; a bbolt file is reopened).
	mem      *storage.MemStore
	memSnaps *storage.MemSnapshotStore

	// The running incarnation; node is nil while the process is down.
	node  *edictlog.Node
	fsm   fsm.FSM
	tr    *Transport
	store edictlog.Store
	snaps edictlog.SnapshotStore
	// starts counts incarnations.
	starts int
}

// NewCluster starts cfg.Nodes Nodes bootstrapping one cluster in t's
// temporary directory, logging to t, and arranges for t's cleanup to
// close it. It does not wait for a leader (WaitLeader does).
func NewCluster(t testing.TB, cfg ClusterConfig) *Cluster {
	t.Helper()
	c, err := newCluster(t, cfg, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("edictlogtest: %v", err)
		}
	})
	return c
}

// StartCluster is NewCluster outside a test (an Example, a program): the
// processes keep their files in a temporary directory that Close
// removes, logs go to cfg.Logger (default: nowhere), and the methods that
// report failures with t.Fatal under NewCluster panic instead. The caller
// must Close it.
func StartCluster(cfg ClusterConfig) (*Cluster, error) {
	dir, err := os.MkdirTemp("", "edictlogtest")
	if err != nil {
		return nil, fmt.Errorf("edictlogtest: %w", err)
	}
	c, err := newCluster(nil, cfg, dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	c.removeDir = true
	return c, nil
}

func newCluster(t testing.TB, cfg ClusterConfig, dir string) (c *Cluster, err error) {
	if cfg.FSM == nil {
		return nil, errors.New("edictlogtest: ClusterConfig.FSM is required")
	}
	if cfg.WAL && cfg.Bolt {
		return nil, errors.New("edictlogtest: ClusterConfig.WAL and Bolt both set: pick one log store")
	}
	if cfg.Nodes == 0 {
		cfg.Nodes = 3
	}
	if cfg.Nodes < 1 {
		return nil, fmt.Errorf("edictlogtest: ClusterConfig.Nodes %d", cfg.Nodes)
	}
	c = &Cluster{t: t, cfg: cfg, net: cfg.Network, dir: dir,
		procs: map[edict.ProcessID]*process{}, peers: map[edict.ProcessID]string{}}
	if c.net == nil {
		c.net, c.ownNet = NewNetwork(NetworkConfig{}), true
	}
	c.logger = cfg.Logger
	c.quiet = func() {}
	switch {
	case c.logger == nil && t != nil:
		w := &tbWriter{t: t}
		c.logger = slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
		c.quiet = w.close
	case c.logger == nil:
		c.logger = slog.New(slog.DiscardHandler)
	}
	for i := 1; i <= cfg.Nodes; i++ {
		id := edict.ProcessID(i)
		c.peers[id] = DefaultAddr(id)
	}
	for i := 1; i <= cfg.Nodes; i++ {
		id := edict.ProcessID(i)
		p, err := c.newProcess(id, false)
		if err == nil {
			err = c.tryStart(p)
		}
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("edictlogtest: start %v: %w", id, err)
		}
	}
	return c, nil
}

func (c *Cluster) helper() {
	if c.t != nil {
		c.t.Helper()
	}
}

// fatalf fails the test, or panics outside one (StartCluster).
func (c *Cluster) fatalf(format string, args ...any) {
	c.helper()
	if c.t != nil {
		c.t.Fatalf(format, args...)
	}
	panic(fmt.Sprintf(format, args...))
}

// tbWriter writes the Nodes' log lines to the test's log until closed:
// after the test ends, t.Log panics.
type tbWriter struct {
	mu     sync.Mutex
	t      testing.TB
	closed bool
}

func (w *tbWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (w *tbWriter) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
}

// Network is the network the Cluster's processes talk over: partition,
// delay and drop through it.
func (c *Cluster) Network() *Network { return c.net }

func (c *Cluster) newProcess(id edict.ProcessID, join bool) (*process, error) {
	dir := filepath.Join(c.dir, fmt.Sprintf("node%d", id))
	if err := os.MkdirAll(filepath.Join(dir, "fsm"), 0o755); err != nil {
		return nil, err
	}
	p := &process{id: id, dir: dir, join: join}
	if !c.onDisk() {
		p.mem = storage.NewMemStore()
		var err error
		if p.memSnaps, err = storage.NewMemSnapshotStore(2); err != nil {
			return nil, err
		}
	}
	c.mu.Lock()
	c.procs[id] = p
	c.mu.Unlock()
	return p, nil
}

// start starts p's next incarnation.
func (c *Cluster) start(p *process) {
	c.helper()
	if err := c.tryStart(p); err != nil {
		c.fatalf("edictlogtest: start %v: %v", p.id, err)
	}
}

func (c *Cluster) tryStart(p *process) (err error) {
	var closers []func() error
	defer func() {
		if err != nil {
			for _, f := range slices.Backward(closers) {
				_ = f()
			}
		}
	}()
	if c.onDisk() {
		var bs interface {
			edictlog.Store
			Close() error
		}
		var err error
		if c.cfg.WAL {
			bs, err = storage.OpenWAL(filepath.Join(p.dir, "log"), nil)
		} else {
			bs, err = storage.OpenBolt(filepath.Join(p.dir, "log.db"), nil)
		}
		if err != nil {
			return err
		}
		closers = append(closers, bs.Close)
		fs, err := storage.NewFileSnapshotStore(filepath.Join(p.dir, "snapshots"), 2)
		if err != nil {
			return err
		}
		p.store, p.snaps = bs, fs
	} else {
		p.store, p.snaps = p.mem, p.memSnaps
	}
	f, err := c.cfg.FSM(p.id, filepath.Join(p.dir, "fsm"))
	if err != nil {
		return fmt.Errorf("ClusterConfig.FSM: %w", err)
	}
	if cl, ok := f.(io.Closer); ok {
		closers = append(closers, cl.Close)
	}
	c.mu.Lock()
	addr := c.peers[p.id]
	peers := maps.Clone(c.peers)
	c.mu.Unlock()
	tr, err := c.net.NewTransport(p.id, addr)
	if err != nil {
		return err
	}
	closers = append(closers, tr.Close)
	cfg := edictlog.Config{
		ID: p.id, Peers: peers, Join: p.join,
		Store: p.store, Snapshots: p.snaps, Transport: tr, FSM: f,
		RoundTrip: RoundTrip, RenewInterval: RenewInterval, MaxLease: MaxLease,
		Logger: c.logger,
	}
	if c.cfg.Tune != nil {
		c.cfg.Tune(&cfg)
	}
	n, err := edictlog.Start(context.Background(), cfg)
	if err != nil {
		return err
	}
	c.mu.Lock()
	p.node, p.fsm, p.tr = n, f, tr
	p.starts++
	c.mu.Unlock()
	return nil
}

func (c *Cluster) proc(id edict.ProcessID) *process {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.procs[id]
}

// IDs returns the processes of the cluster, running or not, in order.
func (c *Cluster) IDs() []edict.ProcessID {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Sorted(maps.Keys(c.procs))
}

// Running returns the processes whose Node runs, in order.
func (c *Cluster) Running() []edict.ProcessID {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []edict.ProcessID
	for id, p := range c.procs {
		if p.node != nil {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// Node returns the running Node of process id, or nil if it is down.
func (c *Cluster) Node(id edict.ProcessID) *edictlog.Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.procs[id]; p != nil {
		return p.node
	}
	return nil
}

// FSM returns the state machine of process id's current (or last)
// incarnation, or nil if it never started.
func (c *Cluster) FSM(id edict.ProcessID) fsm.FSM {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.procs[id]; p != nil {
		return p.fsm
	}
	return nil
}

// Transport returns the transport of process id's running incarnation,
// or nil if it is down.
func (c *Cluster) Transport(id edict.ProcessID) *Transport {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.procs[id]; p != nil && p.node != nil {
		return p.tr
	}
	return nil
}

// Kill stops process id as a crash of the process would, as far as one
// process can: its transport closes first, so that it sends nothing
// more — no lease release, no hand-over, and what it had queued or in
// flight is lost — and its Node stops without the graceful Shutdown's
// Resign; the writes its Node had queued for the store and not yet
// handed to it are lost. What the store had taken is kept, as a killed
// process's writes are in the operating system's hands: a MemStore keeps
// all of it, a bbolt file what was committed. (A power failure, which
// also loses what was written and not synced, is not modelled.) The
// FSM's memory is lost with the incarnation; Restart builds a new one.
func (c *Cluster) Kill(id edict.ProcessID) {
	c.helper()
	if err := c.stop(id, false); err != nil {
		c.fatalf("edictlogtest: kill %v: %v", id, err)
	}
}

// Stop stops process id gracefully: Shutdown, which releases its lease,
// hands leadership over and waits for the leases it granted to lapse (a
// clean stop: Restart then skips the restart quarantine), then its
// transport. Kill's restart is quarantined.
func (c *Cluster) Stop(id edict.ProcessID) {
	c.helper()
	if err := c.stop(id, true); err != nil {
		c.fatalf("edictlogtest: stop %v: %v", id, err)
	}
}

func (c *Cluster) stop(id edict.ProcessID, graceful bool) error {
	c.mu.Lock()
	p := c.procs[id]
	if p == nil || p.node == nil {
		c.mu.Unlock()
		return fmt.Errorf("process %v is not running", id)
	}
	n, f, tr, store := p.node, p.fsm, p.tr, p.store
	p.node = nil
	c.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var errs []error
	if graceful {
		if err := n.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("shutdown: %w", err))
		}
		tr.Close()
	} else {
		stopped := make(chan edictlog.Event, 1)
		o := n.Observe(stopped, func(e edictlog.Event) bool { return e.Kind == edictlog.Stopped })
		// The closed transport closes Receive, on which the Node's loop
		// stops; only then is Shutdown called, to wait for the applier
		// and persister, with no loop left to run its Resign.
		tr.Close()
		select {
		case <-stopped:
		case <-ctx.Done():
			errs = append(errs, errors.New("the node did not stop when its transport closed"))
		}
		o.Cancel()
		if err := n.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("shutdown: %w", err))
		}
	}
	if cl, ok := f.(io.Closer); ok {
		if err := cl.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close FSM: %w", err))
		}
	}
	if c.onDisk() {
		if err := store.(io.Closer).Close(); err != nil {
			errs = append(errs, fmt.Errorf("close store: %w", err))
		}
	}
	return errors.Join(errs...)
}

// Restart starts a new incarnation of process id, which must be down,
// on the store and snapshot store it had, with a new FSM, at the same
// address.
func (c *Cluster) Restart(id edict.ProcessID) {
	c.helper()
	p := c.proc(id)
	switch {
	case p == nil:
		c.fatalf("edictlogtest: restart %v: no such process", id)
	case c.Node(id) != nil:
		c.fatalf("edictlogtest: restart %v: it is running", id)
	}
	c.start(p)
}

// RestartAt starts a new incarnation of process id, which must be down,
// as Restart does but at a new address, as a process restarted on a new
// port: the others reach it there once they learn the address, from the
// log (Node.SetAddress) or from the process itself, whose transport
// announces where it listens to the peers it sends to (as TCP's does) to a
// Node that watches announcements.
func (c *Cluster) RestartAt(id edict.ProcessID, addr string) {
	c.helper()
	if c.proc(id) == nil {
		c.fatalf("edictlogtest: restart %v: no such process", id)
	}
	c.mu.Lock()
	c.peers[id] = addr
	c.mu.Unlock()
	c.Restart(id)
}

// Addr returns the address process id listens at (or last listened at).
func (c *Cluster) Addr(id edict.ProcessID) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.peers[id]
}

// Join starts a new process id with edictlog.Config.Join, which a leader then
// makes a learner (Node.AddLearner with DefaultAddr(id)) and a member
// (Node.Promote). The running processes learn its address from the log,
// as in a deployment.
func (c *Cluster) Join(id edict.ProcessID) {
	c.helper()
	if c.proc(id) != nil {
		c.fatalf("edictlogtest: join %v: process exists", id)
	}
	c.mu.Lock()
	c.peers[id] = DefaultAddr(id)
	c.mu.Unlock()
	p, err := c.newProcess(id, true)
	if err != nil {
		c.fatalf("edictlogtest: join %v: %v", id, err)
	}
	c.start(p)
}

// Partition cuts every link between a process of a and one of b.
func (c *Cluster) Partition(a, b []edict.ProcessID) { c.net.Partition(a, b) }

// Isolate cuts process id off from every other.
func (c *Cluster) Isolate(id edict.ProcessID) { c.net.Isolate(id) }

// Heal removes every fault of the network.
func (c *Cluster) Heal() { c.net.Heal() }

// Leader returns the running process that leads now (holds its lease and
// has started its reign), or edict.None.
func (c *Cluster) Leader() edict.ProcessID {
	for _, id := range c.Running() {
		n := c.Node(id)
		if n == nil {
			continue
		}
		s := n.Status()
		// Status is as of the Node's last step: a leader cut off and
		// idle may still say it leads after its lease ran out.
		if s.IsLeader && n.Clock().Now().Before(s.LeaseExpiry) {
			return id
		}
	}
	return edict.None
}

// poll calls f every few milliseconds until it reports true or ctx ends.
func poll(ctx context.Context, f func() bool) error {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !f() {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// WaitLeader waits until a running process leads, and returns it.
func (c *Cluster) WaitLeader(ctx context.Context) (edict.ProcessID, error) {
	var id edict.ProcessID
	err := poll(ctx, func() bool { id = c.Leader(); return id != edict.None })
	if err != nil {
		return edict.None, fmt.Errorf("edictlogtest: no leader among %v: %w", c.Running(), err)
	}
	return id, nil
}

// retryable reports whether a refused call is safe to try again: it was
// refused before anything was written, or its edict was replaced.
func retryable(err error) bool {
	var nl *edictlog.NotLeaderError
	switch {
	case errors.Is(err, edictlog.ErrOutcomeUnknown):
		return false
	case errors.As(err, &nl), errors.Is(err, edictlog.ErrNotCommitted), errors.Is(err, edictlog.ErrShutdown):
		return true
	}
	return false
}

// Apply writes cmd through whichever process leads, waiting for one and
// trying again wherever leads next for as long as the write was refused
// before it was written (a *edictlog.NotLeaderError, a Node that stopped
// before taking it) or replaced by a new reign (edictlog.ErrNotCommitted).
// A write whose outcome is unknown (edictlog.ErrOutcomeUnknown) is not tried
// again: it may have committed.
func (c *Cluster) Apply(ctx context.Context, cmd []byte) (edictlog.ApplyResult, error) {
	for {
		id, err := c.WaitLeader(ctx)
		if err != nil {
			return edictlog.ApplyResult{}, err
		}
		n := c.Node(id)
		if n == nil {
			continue
		}
		res, err := n.Apply(ctx, cmd)
		if err == nil || !retryable(err) || ctx.Err() != nil {
			return res, err
		}
		// A refusal that Leader cannot see yet (a hand-over, an epoch
		// ending) would otherwise be asked again at once, in a loop.
		if err := pause(ctx); err != nil {
			return edictlog.ApplyResult{}, err
		}
	}
}

// pause waits a few milliseconds before a call is tried again.
func pause(ctx context.Context) error {
	t := time.NewTimer(5 * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Read reads query at level from process id, or from whichever process
// leads if id is edict.None, trying again while it is refused with a
// *edictlog.NotLeaderError (a read writes nothing, so trying again is always
// safe) until ctx ends.
func (c *Cluster) Read(ctx context.Context, id edict.ProcessID, level edictlog.ReadLevel, query []byte) (edictlog.ReadResult, error) {
	for {
		target := id
		if target == edict.None {
			var err error
			if target, err = c.WaitLeader(ctx); err != nil {
				return edictlog.ReadResult{}, err
			}
		}
		n := c.Node(target)
		if n == nil {
			if id != edict.None {
				return edictlog.ReadResult{}, fmt.Errorf("edictlogtest: read from %v: %w", id, edictlog.ErrShutdown)
			}
			continue
		}
		res, err := n.Read(ctx, level, query)
		var nl *edictlog.NotLeaderError
		if err == nil || !errors.As(err, &nl) || ctx.Err() != nil {
			return res, err
		}
		if err := pause(ctx); err != nil {
			return edictlog.ReadResult{}, err
		}
	}
}

// WaitApplied waits until process id has applied every entry up to index.
func (c *Cluster) WaitApplied(ctx context.Context, id edict.ProcessID, index uint64) error {
	var last uint64
	err := poll(ctx, func() bool {
		n := c.Node(id)
		if n == nil {
			return false
		}
		last = n.Status().Applied
		return last >= index
	})
	if err != nil {
		return fmt.Errorf("edictlogtest: process %v applied up to %d, not %d: %w", id, last, index, err)
	}
	return nil
}

// Close kills every running process, closes the network if the Cluster
// made it, and removes StartCluster's directory. NewCluster registers it
// with t.Cleanup; calling it again does nothing.
func (c *Cluster) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	var errs []error
	for _, id := range c.Running() {
		if err := c.stop(id, false); err != nil {
			errs = append(errs, fmt.Errorf("stop %v: %w", id, err))
		}
	}
	if c.ownNet {
		c.net.Close()
	}
	if c.removeDir {
		if err := os.RemoveAll(c.dir); err != nil {
			errs = append(errs, err)
		}
	}
	c.quiet()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	return nil
}

// onDisk says whether the processes keep their stores in files.
func (c *Cluster) onDisk() bool { return c.cfg.WAL || c.cfg.Bolt }
