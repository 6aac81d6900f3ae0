package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/edictlog/edictlog/cmd/edictkv/internal/process"
	"github.com/edictlog/edictlog/edict"
)

// runDev starts three processes in this one, with data in a temporary
// folder, and serves until interrupted. It prefers HTTP ports 8001-8003 so
// that the README's commands work as written, and takes free ports when
// those are taken. Its processes run the gossip detector, as a production
// cluster would, each joining those started before it.
func runDev(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("dev", stderr)
	n := fs.Int("nodes", 3, "how many processes")
	basePort := fs.Int("http-port", 8001, "HTTP port of the first process; the others follow (taken ports: any free one)")
	grpcPort := fs.Int("grpc-port", 2379, "etcd v3 gRPC port of the first process; the others follow (taken ports: any free one); 0: no etcd API")
	dir := fs.String("dir", "", "data folder, kept on exit (default: a temporary folder, removed on exit)")
	logLevel := fs.String("log-level", "warn", "log level: debug, info, warn or error")
	logFormat := fs.String("log-format", "text", "log format: text or json")
	compaction := newStorageFlags(fs)
	progressEvery := watchProgressFlag(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if *n < 1 || *n > 9 {
		return errors.New("--nodes must be 1 to 9")
	}
	retention, err := compaction.retention()
	if err != nil {
		return err
	}
	logger, err := newLogger(stderr, *logFormat, *logLevel)
	if err != nil {
		return err
	}
	root := *dir
	if root == "" {
		if root, err = os.MkdirTemp("", "edictkv-dev-"); err != nil {
			return err
		}
		defer os.RemoveAll(root)
	}
	procs := map[edict.ProcessID]*process.Process{}
	closeAll := func() {
		for _, p := range procs {
			_ = p.Close()
		}
	}
	peers := map[edict.ProcessID]process.Peer{}
	for i := 1; i <= *n; i++ {
		id := edict.ProcessID(i)
		cfg := process.Config{ID: id, DataDir: filepath.Join(root, fmt.Sprintf("node%d", i)),
			RaftAddr: "127.0.0.1:0", HTTPAddr: fmt.Sprintf("127.0.0.1:%d", *basePort+i-1), ClusterID: "edictkv-dev",
			GossipAddr: "127.0.0.1:0", Logger: logger,
			AutoCompaction: retention, QuotaBackendBytes: *compaction.quota, WatchProgressInterval: *progressEvery}
		if *grpcPort > 0 {
			cfg.GRPCAddr = fmt.Sprintf("127.0.0.1:%d", *grpcPort+i-1)
		}
		p, err := process.Listen(cfg)
		if err != nil {
			// A preferred port is taken: any free one will do.
			cfg.HTTPAddr = "127.0.0.1:0"
			if *grpcPort > 0 {
				cfg.GRPCAddr = "127.0.0.1:0"
			}
			if p, err = process.Listen(cfg); err != nil {
				closeAll()
				return err
			}
		}
		procs[id] = p
		peers[id] = process.Peer{RaftAddr: p.RaftAddr(), HTTPAddr: p.HTTPAddr(), GRPCAddr: p.GRPCAddr()}
	}
	// Each gossip port is bound by its process's Start, so that no other
	// program can take it between a pick and the bind: each process joins
	// the gossip of those started before it, and gossip tells them of it.
	var gossipAddrs []string
	for i := 1; i <= *n; i++ {
		p := procs[edict.ProcessID(i)]
		p.JoinGossip(gossipAddrs)
		if err := p.Start(peers); err != nil {
			closeAll()
			return err
		}
		gossipAddrs = append(gossipAddrs, p.GossipAddr())
	}
	first := procs[1].HTTPAddr()
	fmt.Fprintf(stdout, "edictkv dev: %d processes, data in %s\n", *n, root)
	var endpoints []string
	for i := 1; i <= *n; i++ {
		p := procs[edict.ProcessID(i)]
		fmt.Fprintf(stdout, "  node %d  http://%s", i, p.HTTPAddr())
		if a := p.GRPCAddr(); a != "" {
			fmt.Fprintf(stdout, "  etcd API %s", a)
			endpoints = append(endpoints, a)
		}
		fmt.Fprintf(stdout, "  gossip %s\n", p.GossipAddr())
	}
	fmt.Fprintf(stdout, "try:\n  curl -X PUT --data hello %s/v1/kv/a\n  curl %s/v1/kv/a\n  curl %s/v1/cluster\n", first, first, first)
	if len(endpoints) > 0 {
		fmt.Fprintf(stdout, "  etcdctl --endpoints=%s get a\n", strings.Join(endpoints, ","))
	}
	fmt.Fprintln(stdout, "Ctrl-C stops the cluster.")

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	<-ctx.Done()
	fmt.Fprintln(stdout, "edictkv dev: stopping")
	// Every process stops together, so there is no one to hand leadership
	// to: Close stops each at once (its Node still releases its lease).
	var errs []error
	for _, p := range procs {
		errs = append(errs, p.Close())
	}
	return errors.Join(errs...)
}
