package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edictlog/edictlog/cmd/edictkv/internal/route"
	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/fsm/kvfsm"
	"github.com/edictlog/edictlog/log"
	"github.com/prometheus/client_golang/prometheus"
)

// Limits bound what a client may write. They are the server's policy; the
// state machine's decoders have their own, larger, hard bounds.
type Limits struct {
	MaxKeyBytes   int // default 1 KiB, at most kvfsm.MaxKeySize
	MaxValueBytes int // default 1 MiB
	MaxBodyBytes  int // JSON bodies of the cluster endpoints; default 64 KiB
}

func (l Limits) withDefaults() Limits {
	if l.MaxKeyBytes <= 0 {
		l.MaxKeyBytes = 1 << 10
	}
	l.MaxKeyBytes = min(l.MaxKeyBytes, kvfsm.MaxKeySize)
	if l.MaxValueBytes <= 0 {
		l.MaxValueBytes = 1 << 20
	}
	if l.MaxBodyBytes <= 0 {
		l.MaxBodyBytes = 64 << 10
	}
	return l
}

// Config configures a Server.
type Config struct {
	ID   edict.ProcessID
	Node *log.Node
	KV   *kvfsm.KV
	// HTTPAddrs are the HTTP addresses (host:port) of the processes known
	// at start, this one included. The replicated registry adds to them.
	HTTPAddrs map[edict.ProcessID]string
	// GRPCAddrs are the gRPC addresses known at start, if any.
	GRPCAddrs map[edict.ProcessID]string
	Limits    Limits
	// LeaderWait is how long a request that needs the leader waits for one
	// to be known before the answer is 503 (default 3s); WriteTimeout
	// bounds a write's commit (default 10s).
	LeaderWait, WriteTimeout time.Duration
	Logger                   *slog.Logger
	// Registry receives the metrics; a new private one if nil (see
	// Server.Registry).
	Registry *prometheus.Registry
	// Client forwards requests to the leader (default: 10s timeout).
	Client *http.Client
	// Pprof serves net/http/pprof under /debug/pprof/.
	Pprof bool
	// LocalLeader, if set, reports this process's partition's leader
	// under an election with local leaders (see LocalLeaderJSON).
	LocalLeader func() (*LocalLeaderJSON, bool)
}

// Server serves the HTTP API of one edictkv process.
type Server struct {
	cfg     Config
	log     *slog.Logger
	mux     *http.ServeMux
	metrics *metrics
	// router decides where requests that need the leader run; the etcd
	// API shares it (Router).
	router *route.Router

	mu    sync.Mutex
	addrs map[edict.ProcessID]string // from Config.HTTPAddrs

	draining atomic.Bool
	// gate is held shared by every request served as leader, and
	// exclusively by a handover, which so waits for them to finish: a write
	// still pending when leadership moves would end with an unknown
	// outcome. handingOver, once set, sends later requests to the next
	// leader instead.
	gate        sync.RWMutex
	handingOver atomic.Bool
	closeOnce   sync.Once
}

// New returns a Server for cfg. Call Close when done with it.
func New(cfg Config) (*Server, error) {
	if cfg.Node == nil || cfg.KV == nil || cfg.ID == edict.None {
		return nil, errors.New("httpapi: Config.ID, Node and KV are required")
	}
	cfg.Limits = cfg.Limits.withDefaults()
	if cfg.LeaderWait <= 0 {
		cfg.LeaderWait = 3 * time.Second
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 10 * time.Second}
	}
	s := &Server{cfg: cfg, log: cfg.Logger.With("component", "httpapi", "node", uint64(cfg.ID)),
		mux: http.NewServeMux(), addrs: map[edict.ProcessID]string{}}
	for id, a := range cfg.HTTPAddrs {
		s.addrs[id] = a
	}
	m, err := newMetrics(s)
	if err != nil {
		return nil, err
	}
	s.metrics = m
	s.router = route.New(cfg.Node, cfg.LeaderWait)
	s.routes()
	return s, nil
}

// Router is the Server's leader router, for the etcd API to share.
func (s *Server) Router() *route.Router { return s.router }

// Registry is the Prometheus registry the Server's metrics live in.
func (s *Server) Registry() *prometheus.Registry { return s.cfg.Registry }

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.RequestURI == "*" {
		// ServeMux answers a "*" target with an empty 400; every error
		// answer is JSON. (net/http answers OPTIONS * itself.)
		writeError(w, errorf(http.StatusBadRequest, CodeInvalidRequest, "the request target * names no resource"))
		return
	}
	s.mux.ServeHTTP(w, r)
}

// Drain marks the server as shutting down: /readyz fails from now on, so
// load balancers stop sending requests while in-flight ones finish.
func (s *Server) Drain() { s.draining.Store(true) }

// serveGated runs serve unless a handover is under way; served reports
// whether it ran.
func (s *Server) serveGated(ctx context.Context, serve func(context.Context) error) (served bool, err error) {
	if !s.gate.TryRLock() {
		return false, nil
	}
	defer s.gate.RUnlock()
	if s.handingOver.Load() {
		return false, nil
	}
	return true, serve(ctx)
}

// HandOver transfers leadership to the most up-to-date other member, if
// this process leads: new requests wait for the next leader, requests in
// flight finish first, then the log transfers leadership. It reports the
// target, or None if there was nothing to do.
func (s *Server) HandOver(ctx context.Context) (edict.ProcessID, error) {
	if !s.cfg.Node.Status().IsLeader {
		return edict.None, nil
	}
	target := s.transferTarget()
	if target == edict.None {
		return edict.None, nil
	}
	s.handingOver.Store(true)
	s.gate.Lock() // waits for the requests in flight
	s.gate.Unlock()
	if err := s.cfg.Node.TransferLeadership(ctx, target); err != nil {
		return target, fmt.Errorf("httpapi: transfer leadership to %d: %w", target, err)
	}
	return target, nil
}

// Close ends the Server's subscriptions to the Node's events. It does not
// stop the Node. Close the etcd API, which shares the router, first.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		s.router.Close()
	})
}

// Handle serves h at pattern (http.ServeMux's syntax) beside the API: an
// endpoint of the process's own, such as the Jepsen harness's fault hooks.
// Call it before the Server serves.
func (s *Server) Handle(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

func (s *Server) routes() {
	s.mux.HandleFunc("/v1/kv/", s.instrument("kv", s.handleKV))
	s.mux.HandleFunc("/v1/kv", s.instrument("kv", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, errorf(http.StatusBadRequest, CodeInvalidKey, "empty key: use /v1/kv/<key>"))
	}))
	s.handle("GET", "/v1/cluster", s.instrument("cluster", s.handleCluster))
	s.handle("GET", "/v1/status", s.instrument("status", s.handleStatus))
	s.handle("POST", "/v1/cluster/transfer", s.instrument("admin", s.handleTransfer))
	s.handle("POST", "/v1/cluster/learners", s.instrument("admin", s.handleAddLearner))
	s.handle("POST", "/v1/cluster/promote", s.instrument("admin", s.handlePromote))
	s.handle("POST", "/v1/cluster/remove", s.instrument("admin", s.handleRemove))
	s.handle("POST", "/v1/cluster/recover", s.instrument("admin", s.handleRecover))
	s.handle("POST", "/v1/cluster/addresses", s.instrument("admin", s.handleAddresses))
	s.handle("GET", "/livez", s.handleLivez)
	s.handle("GET", "/readyz", s.handleReadyz)
	s.handle("GET", "/metrics", s.metrics.handler().ServeHTTP)
	if s.cfg.Pprof {
		s.mux.HandleFunc("/debug/pprof/", pprof.Index)
		s.mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		s.mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		s.mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		s.mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	// Without this, ServeMux answers an unknown path with a plain-text
	// 404: every error answer is JSON.
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, errorf(http.StatusNotFound, CodeNoEndpoint, fmt.Sprintf("no endpoint at %s", r.URL.Path)))
	})
}

// handle registers h for method (GET also serves HEAD) on path, and a JSON
// 405 for the other methods there: ServeMux's own 405 is plain text.
func (s *Server) handle(method, path string, h http.HandlerFunc) {
	s.mux.HandleFunc(method+" "+path, h)
	s.mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
		allow := method
		if method == http.MethodGet {
			allow += ", HEAD"
		}
		w.Header().Set("Allow", allow)
		writeError(w, errorf(http.StatusMethodNotAllowed, CodeMethod, fmt.Sprintf("method %s not allowed on %s", r.Method, path)))
	})
}

// httpAddr returns the HTTP address of process id, or "" if unknown. The
// replicated registry wins over the start-time addresses: it is newer.
func (s *Server) httpAddr(id edict.ProcessID) string {
	if kv, ok := s.cfg.KV.Get(registryKey(id)); ok && kv.Value != "" {
		return kv.Value
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addrs[id]
}

// GRPCAddr returns the gRPC (etcd API) address of process id, or "" if
// unknown: the replicated registry's, else the start-time one.
func (s *Server) GRPCAddr(id edict.ProcessID) string {
	if kv, ok := s.cfg.KV.Get(grpcRegistryKey(id)); ok && kv.Value != "" {
		return kv.Value
	}
	return s.cfg.GRPCAddrs[id]
}

// Registered returns the addresses the replicated registry holds for
// process id: "" for each it does not hold.
func (s *Server) Registered(id edict.ProcessID) (httpAddr, grpcAddr string) {
	h, _ := s.cfg.KV.Get(registryKey(id))
	g, _ := s.cfg.KV.Get(grpcRegistryKey(id))
	return h.Value, g.Value
}

// registryKey is where the replicated registry keeps id's HTTP address.
// It is under kvfsm.SystemPrefix, whose leading NUL keeps it out of the
// HTTP API's key space (checkKey refuses control characters); the etcd
// API refuses the prefix, and no multi-key range reaches it.
func registryKey(id edict.ProcessID) string {
	return fmt.Sprintf("%shttp/%d", kvfsm.SystemPrefix, uint64(id))
}

// grpcRegistryKey is where the registry keeps id's gRPC address.
func grpcRegistryKey(id edict.ProcessID) string {
	return fmt.Sprintf("%sgrpc/%d", kvfsm.SystemPrefix, uint64(id))
}

// atLeader runs a request that needs the leader through the router
// (internal/route): serve here if this process leads, and otherwise
// forward it to the leader (or redirect, with ?redirect); with no leader
// reachable within LeaderWait, answer 503. serve returns a
// *log.NotLeaderError, having written nothing, when leadership moved under
// it; the request is then routed again. body is the request body, already
// read, so that it can be forwarded.
func (s *Server) atLeader(w http.ResponseWriter, r *http.Request, body []byte, redirect bool, serve func(ctx context.Context) error) {
	forwarded := r.Header.Get(HeaderForwardedBy) != ""
	err := s.router.Do(r.Context(), forwarded,
		func(ctx context.Context) error {
			served, err := s.serveGated(ctx, serve)
			if !served {
				return &log.NotLeaderError{Leader: edict.None, Err: errHandingOver}
			}
			return err
		},
		func(ctx context.Context, leader edict.ProcessID) error {
			addr := s.httpAddr(leader)
			switch {
			case addr == "":
				return &log.NotLeaderError{Leader: leader, Err: errNoAddress}
			case redirect:
				s.metrics.forwarded.WithLabelValues("redirect").Inc()
				w.Header().Set("Location", "http://"+addr+r.URL.RequestURI())
				writeError(w, errorf(http.StatusTemporaryRedirect, CodeNotLeader, fmt.Sprintf("the leader is process %d at %s", leader, addr)))
				return nil
			case s.forward(w, r, addr, body):
				return nil
			}
			return &log.NotLeaderError{Leader: leader, Err: errUnreachable}
		})
	var nle *log.NotLeaderError
	switch {
	case !errors.As(err, &nle):
		// Answered, here or by the leader.
	case errors.Is(err, route.ErrMisdirected):
		// One hop only: the forwarder looks for the leader again.
		writeError(w, errorf(http.StatusMisdirectedRequest, CodeNotLeader, fmt.Sprintf("process %d does not lead", s.cfg.ID)))
	case r.Context().Err() != nil:
		// The client left.
	default:
		s.noLeader(w, nle.Leader)
	}
}

// The reasons a request is routed again, for logs and errors.
var (
	errHandingOver = errors.New("httpapi: handing leadership over")
	errNoAddress   = errors.New("httpapi: the leader's HTTP address is not known")
	errUnreachable = errors.New("httpapi: the leader could not be reached")
)

// noLeader answers 503: no leader was known, or reachable, within
// LeaderWait; leader is the one known, if any.
func (s *Server) noLeader(w http.ResponseWriter, leader edict.ProcessID) {
	w.Header().Set("Retry-After", "1")
	why := "no leader known to"
	if leader != edict.None && leader != s.cfg.ID {
		why = fmt.Sprintf("leader %d not reachable from", leader)
	}
	writeError(w, errorf(http.StatusServiceUnavailable, CodeNoLeader,
		fmt.Sprintf("%s process %d after %v; retry", why, s.cfg.ID, s.cfg.LeaderWait)))
}

// forward sends the request to the leader at addr and copies its answer.
// It reports false, having written nothing, when the answer is worth
// another look for the leader: the target did not lead (421) or could not
// be connected to. A write whose connection failed after it was sent may
// have been applied: that is answered as an unknown outcome, never retried
// (a retried compare-and-swap could fail against its own first attempt).
func (s *Server) forward(w http.ResponseWriter, r *http.Request, addr string, body []byte) bool {
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.WriteTimeout+time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, r.Method, "http://"+addr+r.URL.RequestURI(), strings.NewReader(string(body)))
	if err != nil {
		s.log.Error("build forwarded request", "err", err)
		return false
	}
	req.Header.Set("Content-Type", r.Header.Get("Content-Type"))
	req.Header.Set(HeaderForwardedBy, fmt.Sprint(uint64(s.cfg.ID)))
	resp, err := s.cfg.Client.Do(req)
	if err != nil {
		s.log.Debug("forward to leader failed", "addr", addr, "err", err)
		var op *net.OpError
		if r.Method == http.MethodGet || (errors.As(err, &op) && op.Op == "dial") || r.Context().Err() != nil {
			return r.Context().Err() != nil // nothing sent, or a read: look again
		}
		writeError(w, errorf(http.StatusBadGateway, CodeOutcomeUnknown,
			fmt.Sprintf("the leader (%s) did not answer: the write may or may not have been applied; read the key to find out: %v", addr, err)))
		return true
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusMisdirectedRequest {
		return false
	}
	s.metrics.forwarded.WithLabelValues("proxy").Inc()
	for k, vs := range resp.Header {
		if strings.HasPrefix(k, "X-Edictkv-") || k == "Content-Type" || k == "Retry-After" || k == "Location" {
			w.Header()[k] = vs
		}
	}
	w.WriteHeader(resp.StatusCode)
	if _, err := io.Copy(w, resp.Body); err != nil {
		s.log.Debug("copy forwarded answer", "err", err)
	}
	return true
}
