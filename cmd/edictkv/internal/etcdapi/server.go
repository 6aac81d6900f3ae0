package etcdapi

import (
	"context"
	"errors"
	"hash/fnv"
	"log/slog"
	"strings"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/directory"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/kvservice"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/route"
	"github.com/edictlog/edictlog/edict"
	"github.com/prometheus/client_golang/prometheus"
)

// Node is what the API asks of the log beyond the KV service (edictlog.Node).
type Node interface {
	Status() edictlog.Status
	// ReignIndex is what the header reports as raft_term.
	ReignIndex() uint64
	// SetAddress changes a member's log transport address, through the
	// log (MemberUpdate).
	SetAddress(ctx context.Context, id edict.ProcessID, addr string) error
}

// Router routes the calls that need the leader (*route.Router), and
// retries the linearizable reads served here while no leader is known.
type Router interface {
	Do(ctx context.Context, forwarded bool, serve func(context.Context) error,
		forward func(ctx context.Context, leader edict.ProcessID) error) error
	Retry(ctx context.Context, try func(context.Context) error) error
	HandOver(ctx context.Context, target edict.ProcessID) (edict.ProcessID, error)
}

// Config configures a Server.
type Config struct {
	ID        edict.ProcessID
	Node      Node
	KV        *kvservice.Service
	Router    Router
	Directory *directory.Directory
	// ClusterID names the cluster; the header's cluster_id is its FNV-1a
	// hash.
	ClusterID string
	// Storage, if set, is the state's store: Status reports its sizes,
	// HashKV hashes it and Defragment defragments it.
	Storage Storage
	// Watchable, if set, is the state's store, from which the Watch
	// service serves this process's watches (Unimplemented without it).
	Watchable Watchable
	// WatchProgressInterval is how often a watcher that asked for
	// progress_notify and was sent no event meanwhile is sent a progress
	// notification (etcd's --watch-progress-notify-interval). Zero:
	// DefaultWatchProgressInterval; under 100ms: 100ms, as etcd's.
	WatchProgressInterval time.Duration
	// Registerer receives the request metrics (none if nil).
	Registerer prometheus.Registerer
	Logger     *slog.Logger
}

// Server serves etcd's v3 gRPC API for one edictkv process. Register it on
// a grpc.Server; Close it after that server has stopped.
type Server struct {
	cfg       Config
	clusterID uint64
	log       *slog.Logger
	health    *health.Server
	metrics   *grpcMetrics
	forward   *route.GRPCForwarder
	watches   watchStreams
	// drained is closed by Drain: the forwarding streams end.
	drained   chan struct{}
	drainOnce sync.Once
}

// New returns a Server for cfg.
func New(cfg Config) (*Server, error) {
	if cfg.Node == nil || cfg.KV == nil || cfg.Router == nil || cfg.Directory == nil || cfg.ID == edict.None {
		return nil, errors.New("etcdapi: Config.ID, Node, KV, Router and Directory are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ClusterID == "" {
		cfg.ClusterID = "edictkv"
	}
	h := fnv.New64a()
	h.Write([]byte(cfg.ClusterID))
	m, err := newGRPCMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	return &Server{cfg: cfg, clusterID: h.Sum64(), log: cfg.Logger.With("component", "etcdapi", "node", uint64(cfg.ID)),
		health: health.NewServer(), metrics: m, drained: make(chan struct{}),
		forward: route.NewGRPCForwarder(cfg.ID, cfg.Directory.GRPCAddr,
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(kvservice.MaxResponseBytes), grpc.ForceCodecV2(newCodec())))}, nil
}

// grpcOverhead is what gRPC's framing may add to the largest request the
// KV service takes (etcd allows the same).
const grpcOverhead = 512 << 10

// streamWorkers is how many goroutines serve calls, each one call after
// another (grpc.NumStreamWorkers). A call that finds none idle gets a
// goroutine of its own, as without them. A new goroutine starts on a
// small stack that every call grows again (copying it twice or three
// times): in a profile of 64 clients' reads that was a tenth of the
// leader's CPU. Reads finish in tens of microseconds, so a few workers
// serve many clients; writes hold theirs until they commit, so that as
// many as the clients writing at once are worth keeping.
const streamWorkers = 128

// ServerOptions are the grpc.Server options the API needs: message sizes
// that fit the KV service's limits, the interceptors that count requests
// and name unimplemented calls, the workers that serve calls, and the
// codec that marshals etcd's messages once (codec.go).
func (s *Server) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ForceServerCodecV2(newCodec()),
		grpc.NumStreamWorkers(streamWorkers),
		grpc.MaxRecvMsgSize(s.cfg.KV.Limits().MaxRequestBytes + grpcOverhead),
		grpc.MaxSendMsgSize(kvservice.MaxResponseBytes),
		grpc.ChainUnaryInterceptor(s.unaryInterceptor),
		grpc.ChainStreamInterceptor(s.streamInterceptor),
	}
}

// Register registers etcd's services on g: KV, Cluster and Maintenance
// (partly), Watch (with Config.Watchable), and Lease and Auth, which
// answer Unimplemented; plus the standard gRPC health service, and
// edictkv's forwarding stream (stream.go), by which the other processes
// send their clients' calls on to this one while it leads.
func (s *Server) Register(g *grpc.Server) {
	pb.RegisterKVServer(g, &kvServer{s: s})
	pb.RegisterClusterServer(g, &clusterServer{s: s})
	pb.RegisterMaintenanceServer(g, &maintenanceServer{s: s})
	if s.cfg.Watchable != nil {
		pb.RegisterWatchServer(g, &watchServer{s: s})
	} else {
		pb.RegisterWatchServer(g, &pb.UnimplementedWatchServer{})
	}
	g.RegisterService(&forwardService, s)
	pb.RegisterLeaseServer(g, &pb.UnimplementedLeaseServer{})
	pb.RegisterAuthServer(g, &pb.UnimplementedAuthServer{})
	healthpb.RegisterHealthServer(g, s.health)
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
}

// Drain marks the API as shutting down: the health service answers
// NOT_SERVING from now on, so that clients move to other endpoints while
// the calls in flight finish. Watch streams, which never finish by
// themselves, end at once with Unavailable (clientv3 resumes them
// through another member from the revision it reached), and new ones are
// refused; forwarding streams end once the calls they ran are answered
// (stream.go).
func (s *Server) Drain() {
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	s.watches.drain()
	s.drainOnce.Do(func() { close(s.drained) })
}

// Close closes the connections used to forward calls to the leader and
// shuts the health service down.
func (s *Server) Close() error {
	s.health.Shutdown()
	return s.forward.Close()
}

// fill completes a response header, as etcd's v3rpc does after its server
// answered: the KV service sets the revision, the API the rest. A header
// the leader filled in (forwarded) keeps its term and cluster, and names
// this process, which answered the client.
func (s *Server) fill(h *pb.ResponseHeader, forwarded bool) {
	if h == nil {
		return
	}
	h.MemberId = uint64(s.cfg.ID)
	if !forwarded {
		h.ClusterId = s.clusterID
		h.RaftTerm = s.cfg.Node.ReignIndex()
	}
}

// header is a response header at revision, for the calls the KV service
// does not answer.
// header is the header of an answer that reads no key: the state's
// current revision here.
func (s *Server) header() *pb.ResponseHeader {
	h := &pb.ResponseHeader{Revision: s.cfg.KV.Rev()}
	s.fill(h, false)
	return h
}

// unaryInterceptor counts requests by method and code, and words the
// generated Unimplemented answers so they say it is edictkv's choice. A
// call whose client requires a leader (clientv3.WithRequireLeader) is
// answered etcd's "no leader" at once while none is known, as etcd's
// interceptor does, rather than waiting for one.
func (s *Server) unaryInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	start := time.Now()
	if requiresLeader(ctx) && s.cfg.Node.Status().Leader == edict.None {
		return nil, s.finish(info.FullMethod, start, rpctypes.ErrGRPCNoLeader)
	}
	resp, err := h(ctx, req)
	err = s.finish(info.FullMethod, start, err)
	return resp, err
}

func (s *Server) streamInterceptor(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	start := time.Now()
	return s.finish(info.FullMethod, start, h(srv, ss))
}

func (s *Server) finish(method string, start time.Time, err error) error {
	st := status.Convert(err)
	if st.Code() == codes.Unimplemented && strings.HasPrefix(st.Message(), "method ") {
		err = status.Errorf(codes.Unimplemented, "edictkv does not implement %s", method)
	}
	s.metrics.observe(method, st.Code(), time.Since(start))
	return err
}
