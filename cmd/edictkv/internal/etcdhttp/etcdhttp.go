// Package etcdhttp is the HTTP side of edictkv's etcd client port: what
// etcd serves beside its gRPC API on the same client URL (etcd's
// server/embed/serve.go and etcdserver/api/etcdhttp), so that the tools
// that look there find it.
//
//   - /v3/ is etcd's own generated JSON gateway
//     (go.etcd.io/etcd/api/v3/etcdserverpb/gw, grpc-gateway v2) with the
//     ServeMux options etcd passes it: protojson with proto field names,
//     unpopulated fields left out, unknown fields ignored. Every call goes
//     through a gRPC connection to the process's own gRPC server, as
//     etcd's gateway does, so that it is routed, forwarded, counted and
//     refused exactly as a gRPC client's call is; /v3/watch is a POST
//     whose answer streams one {"result": WatchResponse} per line, for
//     etcd3gw, Patroni and curl. /v3beta/ is rewritten to /v3/, as etcd
//     does. The services edictkv registers as Unimplemented (Lease, Auth)
//     answer 501 with gRPC's code 12, as etcd's gateway answers any gRPC
//     error; Lock and Election, which edictkv does not serve, 404.
//   - /health (etcd's {"health":"true","reason":""}: no active alarm but
//     those ?exclude= names, a leader known unless ?serializable=true,
//     and a read through the gRPC API at that level), /livez and /readyz
//     with etcd's checks and their /livez/<check> paths, ?exclude= and
//     ?verbose, /version (etcd's version.Versions) and /metrics.
//
// Answers carry etcd's CORS headers for any origin (etcd's default
// --cors), and OPTIONS is answered 200, as etcd's access controller
// does.
package etcdhttp

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	gw "github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	etcdgw "go.etcd.io/etcd/api/v3/etcdserverpb/gw"
	"go.etcd.io/etcd/api/v3/version"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/edict"
)

// Node is what the health checks ask of the log (edictlog.Node).
type Node interface {
	Status() edictlog.Status
}

// Config configures a Handler.
type Config struct {
	ID edict.ProcessID
	// Conn reaches this process's own gRPC server: the gateway's calls and
	// the health checks' reads go through it.
	Conn *grpc.ClientConn
	Node Node
	// Alarms are the alarms active now (kvservice.Service.Alarms).
	Alarms func() []*pb.AlarmMember
	// Metrics is served at /metrics.
	Metrics http.Handler
	// Version is the etcd version the process answers as (etcdapi.Version):
	// /version reports it as the server's, and its major.minor as the
	// cluster's and the storage's.
	Version string
	// ReadTimeout bounds a health check's read (default 5s).
	ReadTimeout time.Duration
	Logger      *slog.Logger
}

// Handler serves etcd's HTTP endpoints of a client port.
type Handler struct {
	cfg Config
	log *slog.Logger
	mux *http.ServeMux
	kv  pb.KVClient
}

// New registers etcd's gateway on cfg.Conn and returns the handler. ctx
// bounds the gateway's calls: cancel it when the port closes.
func New(ctx context.Context, cfg Config) (*Handler, error) {
	if cfg.Conn == nil || cfg.Node == nil || cfg.Alarms == nil || cfg.Metrics == nil || cfg.ID == edict.None {
		return nil, fmt.Errorf("etcdhttp: Config.ID, Conn, Node, Alarms and Metrics are required")
	}
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	h := &Handler{cfg: cfg, log: cfg.Logger.With("component", "etcdhttp", "node", uint64(cfg.ID)),
		mux: http.NewServeMux(), kv: pb.NewKVClient(cfg.Conn)}
	// etcd's options (server/embed/serve.go, registerGateway).
	gwmux := gw.NewServeMux(gw.WithMarshalerOption(gw.MIMEWildcard, &gw.HTTPBodyMarshaler{
		Marshaler: &gw.JSONPb{
			MarshalOptions:   protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: false},
			UnmarshalOptions: protojson.UnmarshalOptions{DiscardUnknown: true},
		},
	}))
	for _, register := range []func(context.Context, *gw.ServeMux, *grpc.ClientConn) error{
		etcdgw.RegisterKVHandler, etcdgw.RegisterWatchHandler, etcdgw.RegisterLeaseHandler,
		etcdgw.RegisterClusterHandler, etcdgw.RegisterMaintenanceHandler, etcdgw.RegisterAuthHandler,
	} {
		if err := register(ctx, gwmux, cfg.Conn); err != nil {
			return nil, fmt.Errorf("etcdhttp: the gateway: %w", err)
		}
	}
	h.mux.Handle("/v3/", gwmux)
	h.mux.Handle("/metrics", cfg.Metrics)
	h.mux.HandleFunc("/version", h.version)
	h.mux.HandleFunc("/health", h.health)
	h.installChecks("livez", []check{{"serializable_read", h.readCheck(true)}})
	h.installChecks("readyz", []check{
		{"data_corruption", h.alarmCheck(pb.AlarmType_CORRUPT)},
		{"serializable_read", h.readCheck(true)},
		{"linearizable_read", h.readCheck(false)},
		{"non_learner", h.learnerCheck},
	})
	return h, nil
}

// ServeHTTP is etcd's access controller in front of the mux: /v3beta/ is
// /v3/, CORS for any origin, OPTIONS answered at once.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if rest, ok := strings.CutPrefix(r.URL.Path, "/v3beta/"); ok {
		r.URL.Path = "/v3/" + rest
		r.URL.RawPath = ""
	}
	w.Header().Add("Access-Control-Allow-Methods", "POST, GET, OPTIONS, PUT, DELETE")
	w.Header().Add("Access-Control-Allow-Origin", "*")
	w.Header().Add("Access-Control-Allow-Headers", "accept, content-type, authorization")
	if r.Method == http.MethodOptions {
		w.WriteHeader(http.StatusOK)
		return
	}
	h.mux.ServeHTTP(w, r)
}

func (h *Handler) version(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
		return
	}
	mm := h.cfg.Version
	if v := strings.SplitN(mm, ".", 3); len(v) == 3 {
		mm = v[0] + "." + v[1] + ".0"
	}
	w.Header().Set("Content-Type", "application/json")
	b, _ := json.Marshal(version.Versions{Server: h.cfg.Version, Cluster: mm, Storage: mm})
	_, _ = w.Write(b)
}

// health is etcd's Health: "true" or "false" as strings.
type health struct {
	Health string `json:"health"`
	Reason string `json:"reason"`
}

// health answers /health as etcd's does (etcdhttp.HandleHealth): active
// alarms but those excluded, then a leader known (unless serializable),
// then a read at that level.
func (h *Handler) health(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
		return
	}
	exclude := r.URL.Query()["exclude"]
	serializable := r.URL.Query().Get("serializable") == "true"
	out := health{Health: "true"}
	for _, a := range h.cfg.Alarms() {
		if slices.Contains(exclude, a.Alarm.String()) {
			continue
		}
		out.Health, out.Reason = "false", "ALARM UNKNOWN"
		switch a.Alarm {
		case pb.AlarmType_NOSPACE:
			out.Reason = "ALARM NOSPACE"
		case pb.AlarmType_CORRUPT:
			out.Reason = "ALARM CORRUPT"
		}
		break
	}
	if out.Health == "true" && !serializable && h.cfg.Node.Status().Leader == edict.None {
		out.Health, out.Reason = "false", "RAFT NO LEADER"
	}
	if out.Health == "true" {
		if err := h.read(r.Context(), serializable); err != nil {
			out.Health, out.Reason = "false", fmt.Sprintf("RANGE ERROR:%s", err)
		}
	}
	b, _ := json.Marshal(out)
	if out.Health != "true" {
		h.log.Warn("/health false", "reason", out.Reason)
		http.Error(w, string(b), http.StatusServiceUnavailable)
		return
	}
	_, _ = w.Write(b)
}

// read is the health checks' read, through the gRPC API as a client's:
// a serializable one is answered here, a linearizable one by the leader.
func (h *Handler) read(ctx context.Context, serializable bool) error {
	ctx, cancel := context.WithTimeout(ctx, h.cfg.ReadTimeout)
	defer cancel()
	_, err := h.kv.Range(ctx, &pb.RangeRequest{Key: []byte{0}, KeysOnly: true, Limit: 1, Serializable: serializable})
	return err
}

// check is one of /livez's or /readyz's named checks.
type check struct {
	name string
	run  func(context.Context) error
}

func (h *Handler) readCheck(serializable bool) func(context.Context) error {
	return func(ctx context.Context) error { return h.read(ctx, serializable) }
}

func (h *Handler) alarmCheck(t pb.AlarmType) func(context.Context) error {
	return func(context.Context) error {
		for _, a := range h.cfg.Alarms() {
			if a.Alarm == t {
				return fmt.Errorf("alarm activated: %s", t)
			}
		}
		return nil
	}
}

func (h *Handler) learnerCheck(context.Context) error {
	if slices.Contains(h.cfg.Node.Status().Learners, h.cfg.ID) {
		return fmt.Errorf("not supported for learner")
	}
	return nil
}

// installChecks serves /<kind> (every check but those ?exclude= names)
// and /<kind>/<check>, in etcd's text format: "ok" (after each check's
// line with ?verbose), or 503 with every check's line.
func (h *Handler) installChecks(kind string, checks []check) {
	serve := func(w http.ResponseWriter, r *http.Request, run []check) {
		if r.Method != http.MethodGet {
			w.Header().Set("Allow", http.MethodGet)
			http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
			return
		}
		var report strings.Builder
		failed := false
		for _, c := range run {
			if err := c.run(r.Context()); err != nil {
				fmt.Fprintf(&report, "[-]%s failed: %v\n", c.name, err)
				failed = true
			} else {
				fmt.Fprintf(&report, "[+]%s ok\n", c.name)
			}
		}
		if failed {
			h.log.Warn("health check failed", "path", r.URL.Path, "reason", report.String())
			http.Error(w, report.String(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if r.URL.Query().Has("verbose") {
			fmt.Fprint(w, report.String())
		}
		fmt.Fprint(w, "ok\n")
	}
	h.mux.HandleFunc("/"+kind, func(w http.ResponseWriter, r *http.Request) {
		exclude := r.URL.Query()["exclude"]
		serve(w, r, slices.DeleteFunc(slices.Clone(checks), func(c check) bool { return slices.Contains(exclude, c.name) }))
	})
	for _, c := range checks {
		h.mux.HandleFunc("/"+kind+"/"+c.name, func(w http.ResponseWriter, r *http.Request) { serve(w, r, []check{c}) })
	}
}
