package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/directory"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/kvservice"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/route"
	"github.com/edictlog/edictlog/cmd/edictkv/kvjson"
	"github.com/edictlog/edictlog/edict"
	"github.com/prometheus/client_golang/prometheus"
)

// Node is what the API asks of the log beyond the KV service: its status,
// and the admin operations (edictlog.Node).
type Node interface {
	Status() edictlog.Status
	Clock() edict.Clock
	// Read is the log's read barrier (readiness asks it, at the follower
	// level, with the empty query).
	Read(ctx context.Context, level edictlog.ReadLevel, query []byte) (edictlog.ReadResult, error)
	AddLearner(ctx context.Context, id edict.ProcessID, addr string) error
	Promote(ctx context.Context, id edict.ProcessID) error
	Remove(ctx context.Context, id edict.ProcessID) error
	ForceRecovery(ctx context.Context, survivors []edict.ProcessID) (uint64, error)
}

// Router routes the calls that need the leader (*route.Router).
type Router interface {
	Do(ctx context.Context, forwarded bool, serve func(context.Context) error,
		forward func(ctx context.Context, leader edict.ProcessID) error) error
	Retry(ctx context.Context, try func(context.Context) error) error
	Transfer(ctx context.Context, forwarded bool, target edict.ProcessID,
		forward func(ctx context.Context, leader edict.ProcessID) error) (edict.ProcessID, error)
	Wait() time.Duration
}

// Config configures a Server.
type Config struct {
	ID        edict.ProcessID
	Node      Node
	KV        *kvservice.Service
	Router    Router
	Directory *directory.Directory
	// MaxBodyBytes bounds the JSON bodies of the cluster endpoints
	// (default 64 KiB).
	MaxBodyBytes int
	// Timeout bounds an admin call's commit (default 10s).
	Timeout time.Duration
	Logger  *slog.Logger
	// Registerer receives the API's request metrics (none if nil);
	// Metrics, if set, is served at /metrics (the process's registry).
	Registerer prometheus.Registerer
	Metrics    http.Handler
	// Client forwards requests to the leader and asks the other
	// processes for their status (default: a 10s timeout).
	Client *http.Client
	// Pprof serves net/http/pprof under /debug/pprof/.
	Pprof bool
	// LocalLeader, if set, reports this process's partition's leader
	// under an election with local leaders (see kvjson.LocalLeaderJSON).
	LocalLeader func() (*kvjson.LocalLeaderJSON, bool)
	// Watch, if set, serves GET /v1/watch/<key> from this process's
	// applied state; WatchProgress is how long a stream goes without a
	// line before it gets a progress line (default
	// DefaultWatchProgress).
	Watch         Watchable
	WatchProgress time.Duration
}

// Server serves the HTTP API of one edictkv process.
type Server struct {
	cfg      Config
	log      *slog.Logger
	mux      *http.ServeMux
	metrics  *metrics
	forward  *route.HTTPForwarder
	draining atomic.Bool
	// drained is closed by Drain: watch streams end then.
	drained   chan struct{}
	drainOnce sync.Once
}

// New returns a Server for cfg.
func New(cfg Config) (*Server, error) {
	if cfg.Node == nil || cfg.KV == nil || cfg.Router == nil || cfg.Directory == nil || cfg.ID == edict.None {
		return nil, errors.New("httpapi: Config.ID, Node, KV, Router and Directory are required")
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 64 << 10
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 10 * time.Second}
	}
	if cfg.WatchProgress <= 0 {
		cfg.WatchProgress = DefaultWatchProgress
	}
	s := &Server{cfg: cfg, log: cfg.Logger.With("component", "httpapi", "node", uint64(cfg.ID)),
		mux: http.NewServeMux(), drained: make(chan struct{}), forward: &route.HTTPForwarder{Self: cfg.ID, Client: cfg.Client, Timeout: cfg.Timeout + time.Second}}
	s.forward.Applied = func(ctx context.Context, rev int64) {
		if err := cfg.KV.AwaitRevision(ctx, rev); err != nil {
			s.log.Warn("answering a write the leader applied before this process did", "revision", rev, "err", err)
		}
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	s.metrics = m
	s.routes()
	return s, nil
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.RequestURI == "*" {
		// ServeMux answers a "*" target with an empty 400; every error
		// answer is JSON. (net/http answers OPTIONS * itself.)
		writeError(w, errorf(http.StatusBadRequest, kvjson.CodeInvalidRequest, "the request target * names no resource"))
		return
	}
	s.mux.ServeHTTP(w, r)
}

// Drain marks the server as shutting down: /readyz fails from now on, so
// load balancers stop sending requests while in-flight ones finish, and
// watch streams end (with a line that says so), so that their clients
// resume through another process rather than hold the shutdown up.
func (s *Server) Drain() {
	s.draining.Store(true)
	s.drainOnce.Do(func() { close(s.drained) })
}

// Handle serves h at pattern (http.ServeMux's syntax) beside the API: an
// endpoint of the process's own, such as the Jepsen harness's fault hooks.
// Call it before the Server serves.
func (s *Server) Handle(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

func (s *Server) routes() {
	s.mux.HandleFunc("/v1/kv/", s.instrument("kv", s.handleKV))
	s.mux.HandleFunc("/v1/kv", s.instrument("kv", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, errorf(http.StatusBadRequest, kvjson.CodeInvalidKey, "empty key: use /v1/kv/<key>"))
	}))
	s.handle("GET", "/v1/cluster", s.instrument("cluster", s.handleCluster))
	s.handle("GET", "/v1/status", s.instrument("status", s.handleStatus))
	s.handle("POST", "/v1/cluster/transfer", s.instrument("admin", s.handleTransfer))
	s.handle("POST", "/v1/cluster/learners", s.instrument("admin", s.handleAddLearner))
	s.handle("POST", "/v1/cluster/promote", s.instrument("admin", s.handlePromote))
	s.handle("POST", "/v1/cluster/remove", s.instrument("admin", s.handleRemove))
	s.handle("POST", "/v1/cluster/recover", s.instrument("admin", s.handleRecover))
	s.handle("POST", "/v1/cluster/addresses", s.instrument("admin", s.handleAddresses))
	if s.cfg.Watch != nil {
		s.handle("GET", "/v1/watch/", s.instrument("watch", s.handleWatch))
		s.mux.HandleFunc("/v1/watch", s.instrument("watch", func(w http.ResponseWriter, r *http.Request) {
			writeError(w, errorf(http.StatusBadRequest, kvjson.CodeInvalidKey, "empty key: use /v1/watch/<key>, or /v1/watch/?prefix for every key"))
		}))
	}
	s.handle("GET", "/livez", s.handleLivez)
	s.handle("GET", "/readyz", s.handleReadyz)
	if s.cfg.Metrics != nil {
		s.handle("GET", "/metrics", s.cfg.Metrics.ServeHTTP)
	}
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
		writeError(w, errorf(http.StatusNotFound, kvjson.CodeNoEndpoint, fmt.Sprintf("no endpoint at %s", r.URL.Path)))
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
		writeError(w, errorf(http.StatusMethodNotAllowed, kvjson.CodeMethod, fmt.Sprintf("method %s not allowed on %s", r.Method, path)))
	})
}

// atLeader runs a request that needs the leader through the router: serve
// here if this process leads, and otherwise forward it to the leader (or
// redirect, with ?redirect); with no leader reachable within the router's
// wait, answer 503. serve returns a *edictlog.NotLeaderError, having written
// nothing, when leadership moved under it; the request is then routed
// again. body is the request body, already read, so that it can be
// forwarded; write says the request changes state. A write forwarded here
// and answered 200 is answered by the forwarder once it has applied it
// too (route.HTTPForwarder.Applied), as a gRPC write is.
func (s *Server) atLeader(w http.ResponseWriter, r *http.Request, body []byte, redirect, write bool, serve func(ctx context.Context) error) {
	if from := route.ForwarderHTTP(r); write && from != edict.None {
		// The forwarder answers once it has applied the write: the log
		// tells it of the commit at once.
		inner := serve
		serve = func(ctx context.Context) error { return inner(kvservice.ForwardedBy(ctx, from)) }
	}
	s.answerRouted(w, r, s.cfg.Router.Do(r.Context(), route.ForwardedHTTP(r), serve, s.forwarder(w, r, body, redirect, write)))
}

// forwarder sends the request on to the leader: a redirect with
// ?redirect, else a proxied call.
func (s *Server) forwarder(w http.ResponseWriter, r *http.Request, body []byte, redirect, write bool) func(context.Context, edict.ProcessID) error {
	return func(ctx context.Context, leader edict.ProcessID) error {
		addr := s.cfg.Directory.HTTPAddr(leader)
		switch {
		case addr == "":
			return &edictlog.NotLeaderError{Leader: leader, Err: route.ErrNoAddress}
		case redirect:
			s.metrics.forwarded.WithLabelValues("redirect").Inc()
			w.Header().Set("Location", "http://"+addr+r.URL.RequestURI())
			writeError(w, errorf(http.StatusTemporaryRedirect, kvjson.CodeNotLeader, fmt.Sprintf("the leader is process %d at %s", leader, addr)))
			return nil
		}
		err := s.forward.Forward(w, r, leader, addr, body, write)
		switch {
		case err == nil:
			s.metrics.forwarded.WithLabelValues("proxy").Inc()
		case errors.Is(err, edictlog.ErrOutcomeUnknown):
			writeError(w, errorf(http.StatusBadGateway, kvjson.CodeOutcomeUnknown,
				fmt.Sprintf("the leader (%s) did not answer: the write may or may not have been applied; read the key to find out: %v", addr, err)))
			return nil
		}
		return err
	}
}

// answerRouted answers what the router's loop ended with when nothing
// was answered yet.
func (s *Server) answerRouted(w http.ResponseWriter, r *http.Request, err error) {
	var nle *edictlog.NotLeaderError
	switch {
	case !errors.As(err, &nle):
		// Answered, here or by the leader, or the client left.
	case errors.Is(err, route.ErrMisdirected):
		// One hop only: the forwarder looks for the leader again.
		writeError(w, errorf(http.StatusMisdirectedRequest, kvjson.CodeNotLeader, fmt.Sprintf("process %d does not lead", s.cfg.ID)))
	case r.Context().Err() != nil:
		// The client left.
	default:
		s.noLeader(w, nle.Leader)
	}
}

// noLeader answers 503: no leader was known, or reachable, within the
// router's wait; leader is the one known, if any.
func (s *Server) noLeader(w http.ResponseWriter, leader edict.ProcessID) {
	w.Header().Set("Retry-After", "1")
	why := "no leader known to"
	if leader != edict.None && leader != s.cfg.ID {
		why = fmt.Sprintf("leader %d not reachable from", leader)
	}
	writeError(w, errorf(http.StatusServiceUnavailable, kvjson.CodeNoLeader,
		fmt.Sprintf("%s process %d after %v; retry", why, s.cfg.ID, s.cfg.Router.Wait())))
}
