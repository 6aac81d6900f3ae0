package main

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/edictlog/edictlog/cmd/edictkv/internal/compactor"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/kvservice"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/process"
	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect/detectors"
	"github.com/edictlog/edictlog/transport"
)

// parsePeers parses "1=raftaddr/httpaddr,2=...": each member's id, its
// transport address and its HTTP address.
func parsePeers(s string) (map[edict.ProcessID]process.Peer, error) {
	out := map[edict.ProcessID]process.Peer{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for _, item := range strings.Split(s, ",") {
		idStr, addrs, ok := strings.Cut(strings.TrimSpace(item), "=")
		raft, httpAddr, ok2 := strings.Cut(addrs, "/")
		id, err := strconv.ParseUint(idStr, 10, 64)
		if !ok || !ok2 || err != nil || id == 0 || raft == "" || httpAddr == "" {
			return nil, fmt.Errorf("--peers item %q: want id=raftaddr/httpaddr with a positive id", item)
		}
		if _, dup := out[edict.ProcessID(id)]; dup {
			return nil, fmt.Errorf("--peers names process %d twice", id)
		}
		out[edict.ProcessID(id)] = process.Peer{RaftAddr: raft, HTTPAddr: httpAddr}
	}
	return out, nil
}

// parseClusterKey decodes --cluster-key: hex, or base64 (standard or URL
// alphabet, padded or not), of 16, 24 or 32 bytes (AES-128, -192 or -256
// for memberlist). Hex is tried first: a 32-, 48- or 64-character string
// of hex digits is read as hex. The errors never repeat the key: it is a
// secret, and errors end up in logs.
func parseClusterKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	okLen := func(b []byte) bool { return len(b) == 16 || len(b) == 24 || len(b) == 32 }
	if b, err := hex.DecodeString(s); err == nil && okLen(b) {
		return b, nil
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			if okLen(b) {
				return b, nil
			}
			return nil, fmt.Errorf("--cluster-key decodes to %d bytes; want 16, 24 or 32 (e.g. openssl rand -base64 32)", len(b))
		}
	}
	return nil, errors.New("--cluster-key is neither hex nor base64 of 16, 24 or 32 bytes (e.g. openssl rand -base64 32)")
}

// splitList splits a comma-separated list, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

func runServe(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("serve", stderr)
	id := fs.Uint64("id", 0, "this process's id: positive, unique in the cluster (required)")
	dataDir := fs.String("data-dir", "", "where the log, stable state and snapshots live (required)")
	raftAddr := fs.String("raft-addr", "127.0.0.1:7001", "listen address of the log transport")
	raftAdv := fs.String("raft-advertise", "", "transport address other processes use, if not --raft-addr")
	httpAddr := fs.String("http-addr", "127.0.0.1:8001", "listen address of the HTTP API")
	httpAdv := fs.String("http-advertise", "", "HTTP address other processes forward to, if not --http-addr")
	grpcAddr := fs.String("grpc-addr", "", "listen address of the etcd v3 gRPC API (e.g. 127.0.0.1:2379); empty: off")
	grpcAdv := fs.String("grpc-advertise", "", "etcd API address other processes forward to and list, if not --grpc-addr")
	peers := fs.String("peers", "", "the cluster's members: id=raftaddr/httpaddr,... (this process included unless --join)")
	join := fs.Bool("join", false, "start as a new process that an existing cluster (--peers) will add with add-learner")
	clusterID := fs.String("cluster-id", "edictkv", "cluster name checked in every transport handshake (and gossip packet)")
	gossipAddr := fs.String("gossip-addr", "", "gossip (memberlist) bind address, UDP and TCP; empty: no gossip, the default lapse-and-silence detector")
	gossipAdv := fs.String("gossip-advertise", "", "gossip address other processes use, if not --gossip-addr")
	gossipJoin := fs.String("gossip-join", "", "other processes' gossip addresses, comma-separated: joined at start and re-joined while not live")
	detector := fs.String("detector", "memberlist", "weak leader election: memberlist (gossip's with --gossip-addr, else lowest-live), lowest-live, or one of the papers' ("+strings.Join(detectors.Names(), ", ")+"); see docs/detectors.md")
	clusterKey := fs.String("cluster-key", "", "gossip encryption key: base64 or hex of 16, 24 or 32 bytes (every process the same)")
	rho := fs.Float64("rho", 1e-3, "clock drift bound ρ every process's clock must meet")
	lease := fs.Duration("lease", 0, "longest lease a leader holds (0: the --profile's; the library default, 620ms)")
	profile := fs.String("profile", "default", "lease timings: default (a quiet leader's lease about 310ms, a killed leader replaced in about 0.3s), or "+
		"lan (about 160ms and 0.15s; a leader then rides out a first stall of its process of 135ms, not 270ms); see docs/benchmarks.md, Failover")
	renewInterval := fs.Duration("renew-interval", 0, "the lease's renewal interval: a quiet leader's lease is --round-trip plus this (0: the --profile's; default 300ms)")
	roundTrip := fs.Duration("round-trip", 0, "round-trip time 99.9% of lease exchanges beat (0: the --profile's; default 10ms)")
	tlsCert := fs.String("tls-cert", "", "PEM certificate for mutual TLS between processes")
	tlsKey := fs.String("tls-key", "", "PEM private key for --tls-cert")
	tlsCA := fs.String("tls-ca", "", "PEM CA bundle that signs every member's certificate")
	tlsName := fs.String("tls-server-name", "", "name peers' certificates are checked against, if not the host dialed")
	maxKey := fs.Int("max-key-bytes", 1024, "largest key a client may write")
	maxValue := fs.Int("max-value-bytes", 1<<20, "largest value a client may write")
	snapEvery := fs.Uint64("snapshot-every", 0, "snapshot the state machine after this many entries (0: 8192)")
	compaction := newStorageFlags(fs)
	progressEvery := watchProgressFlag(fs)
	leaderWait := fs.Duration("leader-wait", 3*time.Second, "how long a request waits for a leader before 503")
	pprofOn := fs.Bool("pprof", false, "serve Go's profiler under /debug/pprof/ on the HTTP API")
	logStore := fs.String("log-store", "", "the log's store: wal (the folder log/) or bolt (the file edictkv.db); empty: the one --data-dir holds, wal in a new one")
	logFormat := fs.String("log-format", "text", "log format: text or json")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn or error")
	if err := parse(fs, args); err != nil {
		return err
	}
	logger, err := newLogger(stderr, *logFormat, *logLevel)
	if err != nil {
		return err
	}
	members, err := parsePeers(*peers)
	if err != nil {
		return err
	}
	self := edict.ProcessID(*id)
	_, listed := members[self]
	switch {
	case self == 0:
		return errors.New("--id is required and must be positive")
	case *dataDir == "":
		return errors.New("--data-dir is required")
	case len(members) == 0:
		return errors.New("--peers is required (this process alone: --peers 1=127.0.0.1:7001/127.0.0.1:8001)")
	case !*join && !listed:
		return fmt.Errorf("--peers does not name this process (%d); list it, or use --join to be added as a learner", self)
	case *join && listed:
		return fmt.Errorf("--join: --peers lists the existing members, not this process (%d)", self)
	}
	if *grpcAdv != "" && *grpcAddr == "" {
		return errors.New("--grpc-advertise needs --grpc-addr (the etcd API is off without it)")
	}
	switch {
	case *detector == "memberlist":
	case !slices.Contains(detectors.Names(), *detector):
		return fmt.Errorf("--detector %q: want memberlist or one of %s", *detector, strings.Join(detectors.Names(), ", "))
	case *gossipAddr != "":
		return fmt.Errorf("--gossip-addr runs the memberlist detector; it cannot be combined with --detector %s", *detector)
	}
	timings, ok := leaseProfiles[*profile]
	if !ok {
		return fmt.Errorf("--profile %q: want default or lan", *profile)
	}
	timings = timings.override(*roundTrip, *renewInterval, *lease)
	key, err := parseClusterKey(*clusterKey)
	if err != nil {
		return err
	}
	retention, err := compaction.retention()
	if err != nil {
		return err
	}
	joins := splitList(*gossipJoin)
	if *gossipAddr == "" && (key != nil || len(joins) > 0 || *gossipAdv != "") {
		return errors.New("--cluster-key, --gossip-join and --gossip-advertise need --gossip-addr (gossip is off without it)")
	}
	var tlsFiles *transport.TLSFiles
	if *tlsCert != "" || *tlsKey != "" || *tlsCA != "" {
		if *tlsCert == "" || *tlsKey == "" || *tlsCA == "" {
			return errors.New("TLS needs all of --tls-cert, --tls-key and --tls-ca")
		}
		tlsFiles = &transport.TLSFiles{CertFile: *tlsCert, KeyFile: *tlsKey, CAFile: *tlsCA, ServerName: *tlsName}
	}
	p, err := process.Listen(process.Config{ID: self, DataDir: *dataDir, RaftAddr: *raftAddr, RaftAdvertise: *raftAdv,
		HTTPAddr: *httpAddr, HTTPAdvertise: *httpAdv, GRPCAddr: *grpcAddr, GRPCAdvertise: *grpcAdv, ClusterID: *clusterID, Join: *join, TLS: tlsFiles, Rho: *rho,
		Lease: timings.maxLease, RoundTrip: timings.roundTrip, RenewInterval: timings.renewInterval,
		SnapshotEvery: *snapEvery, LeaderWait: *leaderWait, Logger: logger, Pprof: *pprofOn, LogStore: *logStore,
		GossipAddr: *gossipAddr, GossipAdvertise: *gossipAdv, GossipJoin: joins, ClusterKey: key, Detector: *detector,
		Limits:         kvservice.Limits{MaxKeyBytes: *maxKey, MaxValueBytes: *maxValue},
		AutoCompaction: retention, QuotaBackendBytes: *compaction.quota, WatchProgressInterval: *progressEvery})
	if err != nil {
		return err
	}
	if err := p.Start(members); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	select {
	case <-ctx.Done():
	case err := <-p.Served():
		logger.Error("HTTP server stopped", "err", err)
	}
	logger.Info("shutting down")
	// Kubernetes' default grace before its SIGKILL. The node's clean
	// stop (about one lease) comes within it, so that a rescheduled
	// process serves at once instead of sitting out the restart
	// quarantine (process.Shutdown).
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("shutdown: %w", err)
	}
	logger.Info("stopped")
	return nil
}

// leaseTimings are the lease's timings a process runs with (edictlog.Config's
// RoundTrip, RenewInterval and MaxLease); zero is the library's default.
type leaseTimings struct{ roundTrip, renewInterval, maxLease time.Duration }

// override replaces the timings given (non-zero).
func (t leaseTimings) override(roundTrip, renewInterval, maxLease time.Duration) leaseTimings {
	if roundTrip != 0 {
		t.roundTrip = roundTrip
	}
	if renewInterval != 0 {
		t.renewInterval = renewInterval
	}
	if maxLease != 0 {
		t.maxLease = maxLease
	}
	return t
}

// leaseProfiles are --profile's choices. A dead leader is replaced once its
// lease runs out (its granters grant to no one else before), a quiet
// leader's lease is about RoundTrip+RenewInterval, and a leader rides out a
// stall of its process of up to its renewal lead, 0.9·RenewInterval, until
// it has seen one (then twice the longest stall, up to MaxLease; see
// docs/protocol.md, "The adaptive renewal lead"). lan halves the interval,
// so failover, and the first stall it rides out; it keeps the default's
// MaxLease, 620 ms, so that a starved leader's lease may grow as far as
// the default's, and the restart quarantine, the campaign fallback and the
// detectors' timings (all sized from MaxLease) are the default's.
var leaseProfiles = map[string]leaseTimings{
	"default": {},
	"lan":     {renewInterval: 150 * time.Millisecond, maxLease: 620 * time.Millisecond},
}

// storageFlags are the flags of the state's upkeep, etcd's, which serve
// and dev share.
type storageFlags struct {
	mode, keep *string
	quota      *int64
}

// newStorageFlags defines them on fs.
func newStorageFlags(fs *flag.FlagSet) storageFlags {
	return storageFlags{
		mode: fs.String("auto-compaction-mode", "periodic", "how --auto-compaction-retention reads, as etcd's: periodic (a duration, "+
			"e.g. 30m, or a number of hours) or revision (a number of revisions to keep)"),
		keep: fs.String("auto-compaction-retention", "0", "history the leader keeps by compacting the rest (see "+
			"--auto-compaction-mode); 0: no auto-compaction"),
		quota: fs.Int64("quota-backend-bytes", 0, "space quota of the state's file: a put that would take it over is refused "+
			"and raises the NOSPACE alarm, as etcd's; 0: etcd's default, 2 GiB; negative: no quota"),
	}
}

// watchProgressFlag defines etcd's flag of the period of watch progress
// notifications on fs, under its name of etcd v3.6 and its older
// experimental one.
func watchProgressFlag(fs *flag.FlagSet) *time.Duration {
	d := new(time.Duration)
	const usage = "how often a watcher that asked for progress notifications and got no event meanwhile is sent one, as etcd's (0: 10m; at least 100ms)"
	fs.DurationVar(d, "watch-progress-notify-interval", 0, usage)
	fs.DurationVar(d, "experimental-watch-progress-notify-interval", 0, "the same as --watch-progress-notify-interval (etcd's older name)")
	return d
}

// retention is what the auto-compaction flags ask for.
func (f storageFlags) retention() (compactor.Retention, error) {
	return compactor.ParseRetention(*f.mode, *f.keep)
}
