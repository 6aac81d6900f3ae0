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
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/edictlog/edictlog/cmd/edictkv/internal/route"
	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/fsm/kvfsm"
	"github.com/edictlog/edictlog/log"
	"github.com/prometheus/client_golang/prometheus"
)

// Directory tells the API where the processes of the cluster are.
type Directory interface {
	// ClientAddr is id's gRPC address (host:port), "" if unknown.
	ClientAddr(id edict.ProcessID) string
	// PeerAddr is id's log transport address, "" if unknown.
	PeerAddr(id edict.ProcessID) string
}

// Config configures a Server.
type Config struct {
	ID   edict.ProcessID
	Node *log.Node
	// ClusterID names the cluster; the header's cluster_id is its FNV-1a
	// hash.
	ClusterID string
	Directory Directory
	// DBSize, if set, reports the store's size in bytes (Status).
	DBSize func() int64
	// MaxKeyBytes and MaxValueBytes bound keys and values (defaults 1 KiB
	// and 1 MiB, as edictkv's HTTP API); MaxTxnOps the ops of one Txn
	// branch (default 128, etcd's).
	MaxKeyBytes, MaxValueBytes, MaxTxnOps int
	// LeaderWait is how long a request that needs the leader waits for one
	// (default 3s); WriteTimeout bounds a write's commit (default 10s).
	LeaderWait, WriteTimeout time.Duration
	// Router routes the requests that need the leader; edictkv shares its
	// HTTP API's (httpapi.Server.Router), whose own wait then applies.
	// If nil, the Server makes one with LeaderWait, and Close closes it.
	Router *route.Router
	// Registerer receives the request metrics (optional).
	Registerer prometheus.Registerer
	Logger     *slog.Logger
}

// Server serves etcd's v3 gRPC API (KV, Cluster, Maintenance) for one
// edictkv process. Register it on a grpc.Server; Close it after that
// server has stopped.
type Server struct {
	cfg       Config
	clusterID uint64
	limits    limits
	log       *slog.Logger
	health    *health.Server
	metrics   *grpcMetrics

	router    *route.Router
	ownRouter bool // made by New: Close closes it

	mu    sync.Mutex
	peers map[edict.ProcessID]*peerConn // forwarding connections
}

// New returns a Server for cfg.
func New(cfg Config) (*Server, error) {
	if cfg.Node == nil || cfg.ID == edict.None || cfg.Directory == nil {
		return nil, errors.New("etcdapi: Config.ID, Node and Directory are required")
	}
	if cfg.MaxKeyBytes <= 0 {
		cfg.MaxKeyBytes = 1 << 10
	}
	cfg.MaxKeyBytes = min(cfg.MaxKeyBytes, kvfsm.MaxKeySize)
	if cfg.MaxValueBytes <= 0 {
		cfg.MaxValueBytes = 1 << 20
	}
	if cfg.MaxTxnOps <= 0 {
		cfg.MaxTxnOps = 128
	}
	if cfg.LeaderWait <= 0 {
		cfg.LeaderWait = 3 * time.Second
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ClusterID == "" {
		cfg.ClusterID = "edictkv"
	}
	h := fnv.New64a()
	h.Write([]byte(cfg.ClusterID))
	s := &Server{cfg: cfg, clusterID: h.Sum64(), log: cfg.Logger.With("component", "etcdapi", "node", uint64(cfg.ID)),
		limits: limits{maxKey: cfg.MaxKeyBytes, maxValue: cfg.MaxValueBytes, maxTxnOps: cfg.MaxTxnOps},
		health: health.NewServer(), peers: map[edict.ProcessID]*peerConn{}}
	m, err := newGRPCMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	s.metrics = m
	s.router = cfg.Router
	if s.router == nil {
		s.router, s.ownRouter = route.New(cfg.Node, cfg.LeaderWait), true
	}
	return s, nil
}

// ServerOptions are the grpc.Server options the API needs: message sizes
// that fit the limits, and the interceptors that count requests and name
// unimplemented calls.
func (s *Server) ServerOptions() []grpc.ServerOption {
	// A Txn of MaxTxnOps puts of the largest value, plus framing.
	maxMsg := min(s.cfg.MaxTxnOps*(s.cfg.MaxKeyBytes+s.cfg.MaxValueBytes)+64<<10, kvfsm.MaxCommandSize)
	return []grpc.ServerOption{
		grpc.MaxRecvMsgSize(maxMsg),
		grpc.MaxSendMsgSize(kvfsm.MaxResultSize),
		grpc.ChainUnaryInterceptor(s.unaryInterceptor),
		grpc.ChainStreamInterceptor(s.streamInterceptor),
	}
}

// Register registers etcd's services on g: KV, Cluster and Maintenance
// (partly), and Watch, Lease and Auth, which answer Unimplemented; plus
// the standard gRPC health service.
func (s *Server) Register(g *grpc.Server) {
	pb.RegisterKVServer(g, &kvService{s: s})
	pb.RegisterClusterServer(g, &clusterService{s: s})
	pb.RegisterMaintenanceServer(g, &maintenanceService{s: s})
	pb.RegisterWatchServer(g, &pb.UnimplementedWatchServer{})
	pb.RegisterLeaseServer(g, &pb.UnimplementedLeaseServer{})
	pb.RegisterAuthServer(g, &pb.UnimplementedAuthServer{})
	healthpb.RegisterHealthServer(g, s.health)
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
}

// Close closes the connections used to forward requests to the leader,
// and the router if the Server made it, and marks the health service not
// serving.
func (s *Server) Close() error {
	s.health.Shutdown()
	if s.ownRouter {
		s.router.Close()
	}
	s.mu.Lock()
	peers := s.peers
	s.peers = map[edict.ProcessID]*peerConn{}
	s.mu.Unlock()
	var errs []error
	for _, p := range peers {
		errs = append(errs, p.conn.Close())
	}
	return errors.Join(errs...)
}

// header is the response header: revision is the state machine's revision
// the answer reflects, raft_term the Node's ReignIndex (a number that
// grows with each reign; edictlog has no terms).
func (s *Server) header(revision uint64) *pb.ResponseHeader {
	return &pb.ResponseHeader{ClusterId: s.clusterID, MemberId: uint64(s.cfg.ID),
		Revision: int64(revision), RaftTerm: s.cfg.Node.ReignIndex()}
}

// unaryInterceptor counts requests by method and code, and words the
// generated Unimplemented answers so they say it is edictkv's choice.
func (s *Server) unaryInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	start := time.Now()
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
