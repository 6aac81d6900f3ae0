package process

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"

	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/compactor"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/directory"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/etcdapi"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/httpapi"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/kvservice"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/kvstate"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/mvcc"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/route"
	"github.com/edictlog/edictlog/cmd/edictkv/kvjson"
	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect"
	"github.com/edictlog/edictlog/elect/gossip"
	"github.com/edictlog/edictlog/storage"
	"github.com/edictlog/edictlog/transport"
	"github.com/edictlog/edictlog/wire"
)

// Peer is one process's addresses: RaftAddr for the log's transport,
// HTTPAddr for the API (where requests are forwarded to it), and GRPCAddr
// for the etcd API if it serves it and the address is known at start
// (every process also records its own in the member directory).
type Peer struct {
	RaftAddr string
	HTTPAddr string
	GRPCAddr string
}

// Config configures one edictkv process.
type Config struct {
	ID      edict.ProcessID
	DataDir string
	// RaftAddr and HTTPAddr are listen addresses (port 0 picks a free
	// port); the Advertise addresses, if set, are what others use.
	RaftAddr, RaftAdvertise string
	HTTPAddr, HTTPAdvertise string
	// GRPCAddr, if set, serves the etcd v3 gRPC API (internal/etcdapi)
	// there; GRPCAdvertise is the address others use, if not GRPCAddr.
	GRPCAddr, GRPCAdvertise string
	// ClusterID names the cluster in every transport handshake.
	ClusterID string
	// Join starts a process that a running cluster will add as a learner
	// (edictlog.Config.Join): on its first start it counts itself in no epoch,
	// and learns the cluster's configuration from the log.
	Join bool
	// TLS, if set, requires mutual TLS between processes.
	TLS *transport.TLSFiles
	// Rho is the clock drift bound; Lease the longest lease (edictlog.Config
	// MaxLease); RoundTrip and RenewInterval the lease's round-trip
	// estimate and renewal spacing (edictlog.Config's). Zero: the library's
	// defaults.
	Rho                      float64
	Lease                    time.Duration
	RoundTrip, RenewInterval time.Duration
	// SnapshotEvery and TrailingEntries: see edictlog.Config (zero: the
	// defaults).
	SnapshotEvery, TrailingEntries uint64
	// Limits bound what clients may write, through either API (zero
	// fields: kvservice's defaults); MaxBodyBytes bounds the JSON bodies
	// of the HTTP API's cluster endpoints (zero: 64 KiB).
	Limits       kvservice.Limits
	MaxBodyBytes int
	// AutoCompaction keeps the state's history to a retention, as etcd's
	// --auto-compaction-mode and --auto-compaction-retention: the leader
	// proposes the compactions (internal/compactor). Zero: the history is
	// kept until a client compacts it.
	AutoCompaction compactor.Retention
	// QuotaBackendBytes is the space quota, etcd's --quota-backend-bytes
	// (kvservice.Quota): 0 means etcd's default, 2 GiB; negative, none.
	QuotaBackendBytes int64
	// WatchProgressInterval is the period of watch progress notifications
	// (etcd's --watch-progress-notify-interval; etcdapi.Config). Zero:
	// etcd's default, 10 minutes.
	WatchProgressInterval time.Duration
	// LeaderWait is how long a call that needs the leader waits for one
	// to be known before it is refused (zero: 3s): the router's bound,
	// and the Node's (edictlog.Config.MaxLeaderWait) for a read's wait.
	LeaderWait time.Duration
	// Pprof serves Go's profiler under /debug/pprof/ on the HTTP API.
	Pprof bool
	// LogStore names the log's store: "wal" (storage.WALStore, in the
	// folder log/), "bolt" (storage.BoltStore, the file edictkv.db), or
	// empty for the one the data directory already holds, and "wal" in a
	// new one. Naming one when the directory holds the other is refused:
	// it would start an empty log beside the real one.
	LogStore string
	// HeapFloor is the least heap goal of the Go runtime's garbage
	// collector while the process runs (see heapfloor.go): GOGC is raised
	// while the live heap is under half of it, so that a small heap under
	// load is not collected tens of times a second. Zero:
	// DefaultHeapFloor; negative: GOGC is left as it is, as it is when the
	// environment sets GOGC. It is one setting for the whole OS process.
	HeapFloor int64
	// GossipAddr, if set, runs the memberlist weak-leader detector
	// (elect/gossip) bound there (UDP and TCP; port 0 picks a free port)
	// instead of the Node's default, which learns of deaths only from
	// lapsed leases and silence. GossipAdvertise is the address others
	// use, if not GossipAddr; GossipJoin lists other processes' gossip
	// addresses, joined at start and re-joined while any is not a live
	// member; ClusterKey, if set, encrypts gossip (16, 24 or 32 bytes).
	GossipAddr, GossipAdvertise string
	GossipJoin                  []string
	// Detector names the weak leader election (elect/detectors): empty or
	// "memberlist" for gossip's when GossipAddr is set and the Node's
	// default (lowest-live) otherwise, or one of the papers' algorithms.
	// A paper's algorithm runs among the members known at start.
	Detector   string
	ClusterKey []byte
	Logger     *slog.Logger
}

// Process is one running edictkv process: store, transport, log node,
// state machine, and the services and APIs over them. Listen, then Start,
// then Shutdown.
type Process struct {
	cfg   Config
	log   *slog.Logger
	store logStore
	snaps *storage.FileSnapshotStore
	// State is the replicated state (the log's FSM), kept in its own
	// bbolt file beside the log's store.
	State  *kvstate.State
	trans  *transport.TCP
	ln     net.Listener
	grpcLn net.Listener
	// faults are the Jepsen harness's hooks (faults_jepsen.go; no-ops
	// without the build tag jepsen).
	faults faultHooks
	// timed times the store's durable batches (metrics).
	timed *TimedStore
	// releaseHeap gives up the heap floor Start holds (HeapFloor).
	releaseHeap func()

	// Set by Start: the log, and over it and the state the leader router,
	// the member directory, the KV service and the HTTP API.
	Node   *edictlog.Node
	router *route.Router
	dir    *directory.Directory
	kv     *kvservice.Service
	// compactor, with auto-compaction on, and the end of its watch of
	// the Node's leadership.
	compactor     *compactor.Compactor
	stopCompactor func()
	Server        *httpapi.Server
	http          *http.Server
	served        chan error
	// registry holds every metric the process exports: its own
	// (metrics), the KV service's commit latency and the APIs' requests.
	registry *prometheus.Registry
	metrics  *metrics
	// Set by Start when the etcd API is on.
	etcd      *etcdapi.Server
	grpc      *grpc.Server
	port      *clientPort   // the etcd API listener's split and HTTP side
	published chan struct{} // closed once the addresses are in the member directory
	stopPub   chan struct{}

	// Set by Start when gossip is on: the detector, and the goroutine
	// that keeps its epoch and members current.
	gossip    *gossip.Detector
	stopWatch chan struct{}
	watching  sync.WaitGroup
}

// Listen opens the data directory and binds the transport and HTTP
// listeners, so that every address is known before any process starts.
func Listen(cfg Config) (_ *Process, err error) {
	if cfg.ID == edict.None {
		return nil, errors.New("process: a process needs a positive id")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ClusterID == "" {
		cfg.ClusterID = "edictkv"
	}
	if cfg.LeaderWait <= 0 {
		cfg.LeaderWait = 3 * time.Second
	}
	p := &Process{cfg: cfg, log: cfg.Logger.With("node", uint64(cfg.ID))}
	p.faults = newFaultHooks(p)
	defer func() {
		if err != nil {
			p.closeResources()
		}
	}()
	if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil {
		return nil, fmt.Errorf("process: data dir: %w", err)
	}
	statePath := filepath.Join(cfg.DataDir, stateFile)
	kind, logPath, err := logStoreOf(cfg.DataDir, cfg.LogStore)
	if err != nil {
		return nil, err
	}
	if err := checkFormat(cfg.DataDir, logPath, statePath); err != nil {
		return nil, err
	}
	// The state first: a directory that has the log's store has the
	// state's too (checkFormat relies on it).
	if p.State, err = kvstate.OpenFile(statePath, kvstate.Options{Store: mvcc.Options{Background: true}}); err != nil {
		return nil, fmt.Errorf("process: open the state: %w", err)
	}
	switch kind {
	case "bolt":
		p.store, err = storage.OpenBolt(logPath, nil)
	default:
		p.store, err = storage.OpenWAL(logPath, nil)
	}
	if err != nil {
		return nil, fmt.Errorf("process: open store: %w", err)
	}
	if p.snaps, err = storage.NewFileSnapshotStore(filepath.Join(cfg.DataDir, "snapshots"), 2); err != nil {
		return nil, fmt.Errorf("process: open snapshots: %w", err)
	}
	p.trans, err = transport.NewTCP(transport.TCPConfig{ID: cfg.ID, ClusterID: cfg.ClusterID, BindAddr: cfg.RaftAddr,
		AdvertiseAddr: cfg.RaftAdvertise, TLS: cfg.TLS, Logger: cfg.Logger})
	if err != nil {
		return nil, fmt.Errorf("process: transport: %w", err)
	}
	if p.ln, err = net.Listen("tcp", cfg.HTTPAddr); err != nil {
		return nil, fmt.Errorf("process: HTTP listener: %w", err)
	}
	if cfg.GRPCAddr != "" {
		if p.grpcLn, err = net.Listen("tcp", cfg.GRPCAddr); err != nil {
			return nil, fmt.Errorf("process: gRPC listener: %w", err)
		}
	}
	return p, nil
}

// GRPCAddr is the address etcd clients reach this process at ("" when
// the etcd API is off).
func (p *Process) GRPCAddr() string {
	switch {
	case p.grpcLn == nil:
		return ""
	case p.cfg.GRPCAdvertise != "":
		return p.cfg.GRPCAdvertise
	}
	return p.grpcLn.Addr().String()
}

// JoinGossip sets the gossip addresses Start joins (Config.GossipJoin),
// for a caller that learns them from processes started after Listen: a
// gossip address bound to port 0 is known only once its process started
// (GossipAddr). It has no effect once Start ran.
func (p *Process) JoinGossip(addrs []string) { p.cfg.GossipJoin = slices.Clone(addrs) }

// RaftAddr is the address peers reach this process's transport at.
func (p *Process) RaftAddr() string { return p.trans.LocalAddr() }

// HTTPAddr is the address clients reach the API at.
func (p *Process) HTTPAddr() string {
	if p.cfg.HTTPAdvertise != "" {
		return p.cfg.HTTPAdvertise
	}
	return p.ln.Addr().String()
}

// Start starts the log node and serves HTTP. peers are the members of the
// bootstrap epoch: this process included for a founding member, left out
// for a process that will join as a learner. They are read on the first
// start only (later the membership comes from the store), but their HTTP
// addresses are used on every start.
func (p *Process) Start(peers map[edict.ProcessID]Peer) error {
	raft := map[edict.ProcessID]string{}
	for id, pe := range peers {
		raft[id] = pe.RaftAddr
	}
	// The Jepsen hook's slow disk sits under the timing, so that the
	// append histogram sees what the log waits for.
	timed := NewTimedStore(p.faults.wrapStore(p.store))
	p.timed = timed
	floor := p.cfg.HeapFloor
	if floor == 0 {
		floor = DefaultHeapFloor
	}
	p.releaseHeap = holdHeapFloor(floor)
	// The detector is built once the Node has bumped the incarnation and
	// built its clock (edictlog.Config.NewDetector): gossip reads the clock, and
	// the papers' algorithms name their messages by incarnation. None: the
	// Node's default (elect.LowestLive).
	var det elect.Detector
	var newDetector func(uint64, edict.Clock) (elect.Detector, error)
	switch {
	case p.cfg.GossipAddr != "":
		newDetector = func(_ uint64, clock edict.Clock) (elect.Detector, error) {
			if err := p.startGossip(raft, clock); err != nil {
				return nil, err
			}
			det = p.gossip
			return det, nil
		}
	case p.cfg.Detector != "" && p.cfg.Detector != "memberlist" && p.cfg.Detector != "lowest-live":
		newDetector = func(inc uint64, _ edict.Clock) (elect.Detector, error) {
			d, err := p.paperDetector(raft, inc)
			det = d
			return d, err
		}
	}
	node, err := edictlog.Start(context.Background(), edictlog.Config{ID: p.cfg.ID, Peers: raft, Join: p.cfg.Join, Store: timed,
		Snapshots: p.snaps, Transport: p.faults.wrapTransport(p.trans), FSM: p.State, WrapClock: p.faults.wrapClock,
		NewDetector: newDetector, Rho: p.cfg.Rho, MaxLease: p.cfg.Lease, RoundTrip: p.cfg.RoundTrip,
		RenewInterval: p.cfg.RenewInterval, SnapshotEvery: p.cfg.SnapshotEvery,
		TrailingEntries: p.cfg.TrailingEntries, MaxLeaderWait: p.cfg.LeaderWait, Logger: p.cfg.Logger})
	if err != nil {
		p.closeGossip(false)
		p.closeResources()
		return fmt.Errorf("process: start node %d: %w", p.cfg.ID, err)
	}
	p.Node = node
	if err := p.startServices(peers); err != nil {
		_ = node.Shutdown(context.Background())
		p.closeGossip(false)
		p.closeResources()
		return err
	}
	var localLeader func() (*kvjson.LocalLeaderJSON, bool)
	if lp, ok := det.(*lockedProtocol); ok {
		localLeader = func() (*kvjson.LocalLeaderJSON, bool) { return lp.localLeader(node.Clock().Now()) }
	}
	p.Server, err = httpapi.New(httpapi.Config{ID: p.cfg.ID, Node: node, KV: p.kv, Router: p.router, Directory: p.dir,
		MaxBodyBytes: p.cfg.MaxBodyBytes, LocalLeader: localLeader, Logger: p.cfg.Logger, Pprof: p.cfg.Pprof, Watch: p.State,
		Registerer: p.registry, Metrics: promhttp.HandlerFor(p.registry, promhttp.HandlerOpts{Registry: p.registry})})
	if err != nil {
		p.closeServices()
		_ = node.Shutdown(context.Background())
		p.closeGossip(false)
		p.closeResources()
		return err
	}
	p.faults.routes(p.Server)
	if p.gossip != nil {
		p.watchEpoch()
	}
	p.http = &http.Server{Handler: p.Server, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(p.cfg.Logger.Handler(), slog.LevelWarn)}
	p.served = make(chan error, 1)
	go func() { p.served <- p.http.Serve(p.ln) }()
	if p.grpcLn != nil {
		if err := p.startGRPC(); err != nil {
			_ = p.Close()
			return err
		}
	}
	p.log.Info("edictkv serving", "http", p.HTTPAddr(), "grpc", p.GRPCAddr(), "raft", p.RaftAddr(), "gossip", p.GossipAddr(), "data", p.cfg.DataDir)
	return nil
}

// GossipAddr is the address other processes join this one's gossip at
// ("" without gossip, or before Start).
func (p *Process) GossipAddr() string {
	if p.gossip == nil {
		return ""
	}
	return p.gossip.LocalAddr()
}

// startGossip builds the memberlist detector, reading clock. It must exist
// before the Node runs (edictlog.Config.NewDetector), so its first epoch and
// members come from the store — the newest epoch configuration recorded
// there, or the bootstrap members of raft — and watchEpoch corrects them
// from the Node's Status as soon as the Node runs.
func (p *Process) startGossip(raft map[edict.ProcessID]string, clock edict.Clock) error {
	epoch, members, err := storedEpoch(p.store)
	if err != nil {
		return fmt.Errorf("process: gossip: %w", err)
	}
	if members == nil {
		for id := range raft {
			if !(p.cfg.Join && id == p.cfg.ID) {
				members = append(members, id)
			}
		}
		slices.Sort(members)
	}
	// The leader hint lasts one lease, as the Node's default detector's
	// does: longer would keep a dead leader's id preferred after its lease
	// is gone. The lease is the Node's: its default if none is set.
	lease := p.leaseTimings()
	p.gossip, err = gossip.New(gossip.Config{ID: p.cfg.ID, Clock: clock, ClusterID: p.cfg.ClusterID,
		Epoch: epoch, Members: members, BindAddr: p.cfg.GossipAddr, AdvertiseAddr: p.cfg.GossipAdvertise,
		Join: p.cfg.GossipJoin, TransportAddr: p.RaftAddr(), APIAddr: p.HTTPAddr(), ClusterKey: p.cfg.ClusterKey,
		LeaderHintTTL: lease.MaxLease, Logger: p.cfg.Logger})
	if err != nil {
		return fmt.Errorf("process: %w", err)
	}
	return nil
}

// storedEpoch reads the newest epoch configuration in the store; nil
// members if there is none yet (a first start).
func storedEpoch(s edictlog.StableStore) (uint64, []edict.ProcessID, error) {
	keys, err := s.Keys(wire.EpochKeyPrefix)
	if err != nil {
		return 0, nil, err
	}
	var newest *wire.EpochConfig
	for _, k := range keys {
		if !strings.HasSuffix(k, "/config") {
			continue
		}
		b, err := s.Get(k)
		if err != nil {
			return 0, nil, err
		}
		ec, err := wire.DecodeEpochConfig(k, b)
		if err != nil {
			return 0, nil, err
		}
		if newest == nil || ec.Epoch > newest.Epoch {
			newest = &ec
		}
	}
	if newest == nil {
		return 0, nil, nil
	}
	return newest.Epoch, slices.Clone(newest.Members), nil
}

// watchEpoch keeps the gossip detector's epoch and members those of the
// Node's active epoch. The log tells its detector of a new epoch itself
// (log's onEpochTerminated calls SetEpoch); this corrects, at once, the
// guess startGossip made from the store, and follows every later change
// of epoch or configuration the Node announces (edictlog.Node.Observe), reading
// Status at each: with a channel of one, none is missed.
func (p *Process) watchEpoch() {
	p.stopWatch = make(chan struct{})
	events := make(chan edictlog.Event, 1)
	obs := p.Node.Observe(events, func(ev edictlog.Event) bool {
		return ev.Kind == edictlog.EpochChanged || ev.Kind == edictlog.ConfigChanged
	})
	st := p.Node.Status()
	epoch, members := st.Epoch, st.Members
	p.gossip.SetEpoch(epoch, members)
	p.watching.Add(1)
	go func() {
		defer p.watching.Done()
		defer obs.Cancel()
		for {
			select {
			case <-events:
			case <-p.stopWatch:
				return
			}
			st := p.Node.Status()
			if st.Epoch == epoch && slices.Equal(st.Members, members) {
				continue
			}
			epoch, members = st.Epoch, st.Members
			p.gossip.SetEpoch(epoch, members)
			p.log.Info("gossip detector moved to epoch", "epoch", epoch, "members", members)
		}
	}()
}

// gossipLeaveTimeout bounds how long a graceful shutdown waits for its
// leave message to spread: the others then drop this process at once
// rather than after their failure detection (about 1.5s).
const gossipLeaveTimeout = 2 * time.Second

// closeGossip stops the epoch watcher and the detector: leaving the
// gossip cluster first when graceful, else at once, as a crash would.
func (p *Process) closeGossip(graceful bool) error {
	if p.gossip == nil {
		return nil
	}
	if p.stopWatch != nil {
		close(p.stopWatch)
		p.watching.Wait()
		p.stopWatch = nil
	}
	g := p.gossip
	p.gossip = nil
	if graceful {
		return g.Leave(gossipLeaveTimeout)
	}
	return g.Close()
}

// Shutdown stops the process gracefully: it marks itself not ready, hands
// leadership to the most up-to-date other member if it leads (so that
// clients see a new leader at once rather than after a lease timeout), stops
// accepting and finishes in-flight requests (until nodeStopGrace before
// ctx's deadline), stops the node cleanly (edictlog.Node.Shutdown: it
// releases any lease it still holds and waits for its grants to lapse,
// so that its next start skips the restart quarantine), leaves gossip,
// and closes transport and storage.
// Handing over comes first: while it runs, requests that arrive here are
// still forwarded to whoever leads.
func (p *Process) Shutdown(ctx context.Context) error {
	if p.Node == nil {
		p.closeResources()
		return nil
	}
	p.drain()
	tctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	target, err := p.router.HandOver(tctx, edict.None)
	cancel()
	var nle *edictlog.NotLeaderError
	switch {
	case errors.As(err, &nle):
		// Not the leader: nothing to hand over.
	case err != nil:
		p.log.Warn("leadership handover on shutdown failed; releasing the lease instead", "err", err)
	case target != edict.None:
		p.log.Info("handed leadership over", "to", uint64(target))
		// Keep serving a moment: processes that still think we lead
		// forward to us, we answer 421, and they look again. Closing at
		// once would break their kept-alive connections under requests
		// in flight, whose outcome they could then not know.
		select {
		case <-time.After(handoverGrace):
		case <-ctx.Done():
		}
	}
	var errs []error
	// The requests in flight get the grace less the node's share, so
	// that long-lived streams cannot take the clean stop's time.
	dctx, cancel := ctx, context.CancelFunc(func() {})
	if dl, ok := ctx.Deadline(); ok {
		dctx, cancel = context.WithDeadline(ctx, dl.Add(-nodeStopGrace))
	}
	if err := p.http.Shutdown(dctx); err != nil {
		errs = append(errs, fmt.Errorf("process: HTTP shutdown: %w", err))
	}
	if err := p.stopGRPC(dctx, true); err != nil {
		errs = append(errs, fmt.Errorf("process: gRPC shutdown: %w", err))
	}
	cancel()
	p.closeServer()
	// A clean stop (edictlog.Node.Shutdown): the node grants nothing
	// more, waits until its grants have lapsed (about one lease) and
	// records so, and its next start serves at once instead of sitting
	// out the restart quarantine. Cut short by ctx, it stops all the same.
	if err := p.Node.Shutdown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("process: node shutdown: %w", err))
	}
	// Leave gossip only once the node is stopped and its lease released:
	// leaving earlier would make the others count this process dead while
	// it might still lead.
	if err := p.closeGossip(true); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, p.closeResources())
	return errors.Join(errs...)
}

// Close stops the process at once, without handing leadership over or
// waiting for requests in flight (the Node still releases its lease, but
// does not wait for its grants to lapse: edictlog.Node.Stop, and the next
// start sits out the restart quarantine).
// Tests and dev mode's teardown use it where every process stops together.
func (p *Process) Close() error {
	if p.Node == nil {
		return p.closeResources()
	}
	p.drain()
	errs := []error{p.http.Close(), p.stopGRPC(context.Background(), false)}
	p.closeServer()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	errs = append(errs, p.Node.Stop(ctx), p.closeGossip(false), p.closeResources())
	return errors.Join(errs...)
}

// drain marks both APIs as shutting down: /readyz and the gRPC health
// service say so from now on.
func (p *Process) drain() {
	p.Server.Drain()
	if p.etcd != nil {
		p.etcd.Drain()
	}
}

// closeServer closes, once both APIs have stopped serving, what lives as
// long as they do: the router's and the metrics' subscriptions to the
// Node, and the fault hooks' deliveries to the Node (faults_jepsen.go).
func (p *Process) closeServer() {
	p.closeServices()
	p.faults.serverClosed()
}

// startServices builds what both APIs use over the Node: the metrics
// registry with the process's own metrics, the leader router, the member
// directory and the KV service.
func (p *Process) startServices(peers map[edict.ProcessID]Peer) error {
	p.registry = prometheus.NewRegistry()
	var err error
	if p.metrics, err = newMetrics(p.registry, p.Node, p.timed, p.State.Store()); err != nil {
		return err
	}
	known := map[edict.ProcessID]directory.Addresses{}
	for id, pe := range peers {
		known[id] = directory.Addresses{HTTP: pe.HTTPAddr, GRPC: pe.GRPCAddr}
	}
	p.dir, err = directory.New(directory.Config{Self: p.cfg.ID, SelfAddrs: directory.Addresses{HTTP: p.HTTPAddr(), GRPC: p.GRPCAddr()},
		SelfPeer: p.RaftAddr(), Known: known, Store: directory.StateStore{Log: p.Node, State: p.State},
		PeerAddr: func(id edict.ProcessID) string { a, _ := p.trans.PeerAddr(id); return a }})
	if err == nil {
		p.kv, err = kvservice.New(kvservice.Config{Log: p.Node, State: p.State, Limits: p.cfg.Limits, ObserveCommit: p.metrics.observeCommit,
			Quota: kvservice.Quota{Bytes: p.cfg.QuotaBackendBytes, Size: p.State.Store().Size, MemberID: uint64(p.cfg.ID)}})
	}
	if err != nil {
		p.metrics.close()
		return fmt.Errorf("process: %w", err)
	}
	p.router = route.New(p.Node, p.cfg.LeaderWait)
	if err := p.startCompactor(); err != nil {
		p.router.Close()
		p.metrics.close()
		return err
	}
	return nil
}

// closeServices stops the compactor and ends the router's and the
// metrics' subscriptions.
func (p *Process) closeServices() {
	p.closeCompactor()
	p.router.Close()
	p.metrics.close()
}

// handoverGrace is how long a process that handed leadership over keeps
// serving before it closes its HTTP server: a few lease renewals, time for
// the others to hear of the new leader.
const handoverGrace = time.Second

// nodeStopGrace is the part of Shutdown's grace kept for the node's clean
// stop: (1+ρ)·MaxLease at most, 620 ms with the default timings, and
// room for a lease as long as 4 s.
const nodeStopGrace = 5 * time.Second

// Served reports the HTTP server's end (http.ErrServerClosed after
// Shutdown).
func (p *Process) Served() <-chan error { return p.served }

func (p *Process) closeResources() error {
	if p.releaseHeap != nil {
		p.releaseHeap()
	}
	var errs []error
	if p.ln != nil && p.http == nil {
		errs = append(errs, p.ln.Close())
	}
	if p.grpcLn != nil && p.grpc == nil && p.etcd == nil {
		errs = append(errs, p.grpcLn.Close())
	}
	if p.trans != nil {
		errs = append(errs, p.trans.Close())
	}
	if p.store != nil {
		errs = append(errs, p.store.Close())
	}
	if p.State != nil {
		errs = append(errs, p.State.Close())
	}
	return errors.Join(errs...)
}

// The files of a data directory: the log's store (a WALStore's folder
// or a BoltStore's file) and the replicated state's.
const (
	walDir    = "log"
	logFile   = "edictkv.db"
	stateFile = "state.db"
)

// logStoreOf returns the kind of log store to open in dir, and its path:
// the one asked for, or the one dir holds, or a WALStore in a new dir.
func logStoreOf(dir, want string) (kind, path string, err error) {
	exists := func(name string) (bool, error) {
		_, err := os.Stat(filepath.Join(dir, name))
		if errors.Is(err, os.ErrNotExist) {
			return false, nil
		}
		return err == nil, err
	}
	hasWAL, err := exists(walDir)
	if err != nil {
		return "", "", fmt.Errorf("process: data dir: %w", err)
	}
	hasBolt, err := exists(logFile)
	if err != nil {
		return "", "", fmt.Errorf("process: data dir: %w", err)
	}
	switch {
	case want != "" && want != "wal" && want != "bolt":
		return "", "", fmt.Errorf("process: unknown log store %q (want wal or bolt)", want)
	case hasWAL && hasBolt:
		return "", "", fmt.Errorf("process: %s holds two logs, %s/ and %s: remove the one that is not this member's", dir, walDir, logFile)
	case want == "wal" && hasBolt, want == "bolt" && hasWAL:
		return "", "", fmt.Errorf("process: %s holds a log in another store (%s); the log store %q would start an empty log beside it", dir, map[bool]string{true: logFile, false: walDir + "/"}[hasBolt], want)
	case want == "bolt", want == "" && hasBolt:
		return "bolt", filepath.Join(dir, logFile), nil
	}
	return "wal", filepath.Join(dir, walDir), nil
}

// logStore is what the process needs of the log's store.
type logStore interface {
	edictlog.Store
	Stats() (storage.Stats, error)
	Close() error
}

// ErrOldFormat refuses a data directory written by an edictkv whose
// state was kept by the log (fsm/kvfsm, in the log's snapshots, with
// revisions that were log indexes): this version keeps the state in a
// file of its own and cannot read it.
var ErrOldFormat = errors.New("process: the data directory is in the format of an earlier edictkv")

// checkFormat refuses a data directory that has the log's store but not
// the state's: one written before the state had a file of its own.
func checkFormat(dir, logPath, statePath string) error {
	if _, err := os.Stat(logPath); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("process: data dir: %w", err)
	}
	switch _, err := os.Stat(statePath); {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("%w: %s holds the log's store (%s) but no state file (%s): it was written with the state in the "+
			"log's snapshots (kvfsm, revisions were log indexes), which this version does not read; start this process "+
			"from an empty data directory and copy the keys over with a client", ErrOldFormat, dir, logFile, stateFile)
	case err != nil:
		return fmt.Errorf("process: data dir: %w", err)
	}
	return nil
}
