// Package cluster starts and controls the real edictkv processes of a
// Jepsen-style test: it builds the binary (with the build tag jepsen, which
// compiles in the fault hooks of cmd/edictkv/internal/process/faults_jepsen.go), starts
// processes 1..N, and injects faults: network partitions, SIGKILL and
// restart, SIGSTOP and SIGCONT (held, or in bursts: Stall), clock rate
// drift, message delay, slow fsyncs, the loss of a node's disk (Wipe), and
// the gray failures of a busy host: a writer beside the nodes on their
// filesystem (StartDiskHog), and in netns mode the kernel's own I/O and
// CPU throttles (ThrottleIO, LimitCPU). It also starts the processes that
// membership changes add (AddProcess, and Rejoin for a wiped node).
//
// There are two modes.
//
// ModeNetns (Linux, root) gives every process its own network namespace,
// joined to the harness's namespace by a veth pair into a private bridge
// (10.213.x.0/24). Partitions are kernel-level drops inside the nodes'
// namespaces: nftables rules if nft is installed, else blackhole routes.
// Every kind of traffic between partitioned nodes is cut — the log's
// transport, HTTP forwarding between nodes, gRPC — but never the harness's
// own traffic to any node: a client in the harness still reaches every
// node, as a client that can see both sides of a partition would.
//
// ModePortable runs everything on 127.0.0.1 and partitions through each
// process's POST /debug/jepsen/faults: a process drops the log's messages
// and snapshot streams to and from the processes it is told to block. It
// does not cover anything else: HTTP requests a follower forwards to the
// leader (and the address-registry and gRPC traffic between processes)
// still cross a partition, so a follower in a minority can still get a
// write through to a leader in the majority. A killed or paused process
// cannot be told of a partition; it is given its blocked list when it is
// restarted (through the environment, before its first message) or resumed.
//
// Clock drift (SetClockRate), message delay (SetDelay) and slow fsyncs
// (SetFsync) go through /debug/jepsen/faults in both modes. Each process's
// stdout and stderr go to Dir/n<ID>.log, which Close keeps.
//
// Every fault is undone by its own call (Heal, Restart, Resume, a rate of
// 1, the zero Delay or Fsync, UnthrottleIO, UnlimitCPU, StopDiskHog), and
// Close undoes what the host keeps after the processes die (the cgroups,
// the disk hog's files).
package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/edictlog/edictlog/cmd/edictkv/kvjson"
)

// Mode says how processes are networked and partitioned.
type Mode string

// The modes.
const (
	// ModeNetns: one network namespace per node (Linux, root).
	ModeNetns Mode = "netns"
	// ModePortable: 127.0.0.1, partitions via /debug/jepsen/faults.
	ModePortable Mode = "portable"
)

// Config configures a Cluster.
type Config struct {
	// N is the number of founding processes (ids 1..N).
	N int
	// Binary is an edictkv built with -tags jepsen (see Build).
	Binary string
	// Dir holds the data directories (Dir/n<ID>) and logs (Dir/n<ID>.log).
	Dir string
	// Mode: ModePortable if empty.
	Mode Mode
	// Lease is passed as --lease (zero: the binary's default).
	Lease time.Duration
	// GRPC serves the etcd API on every node (--grpc-addr).
	GRPC bool
	// ExtraArgs are appended to every process's serve arguments.
	ExtraArgs []string
	// NoNftables makes netns mode partition with blackhole routes even
	// when nft is installed.
	NoNftables bool
	// StartTimeout bounds Start's wait for a leader (default 30s).
	StartTimeout time.Duration
	Logger       *slog.Logger
	// OnExit, if set, is told of every process that exits without the
	// cluster having killed it: one that could not start, or crashed. It
	// is called from the goroutine that waited for the process, before
	// anyone waiting for the exit (Restart, WaitUp) learns of it.
	OnExit func(Exit)
}

// Exit describes a process that exited on its own (Config.OnExit).
type Exit struct {
	ID int
	// Err is how it exited (exit status 1, signal: aborted).
	Err string
	// Uptime is the time from its start to its exit.
	Uptime time.Duration
	// Answered says whether it ever answered /v1/status: if not, it never
	// started.
	Answered bool
	// Tail is the last lines it wrote to its log.
	Tail string
}

// String says what happened, in one line.
func (e Exit) String() string {
	what := "crashed"
	if !e.Answered {
		what = "could not start"
	}
	return fmt.Sprintf("node %d %s: %s", e.ID, what, e.Detail())
}

// Detail is String without the node and the verdict: how it exited, and
// what it wrote last.
func (e Exit) Detail() string {
	out := fmt.Sprintf("its process exited on its own (%s) %v after it was started", e.Err, e.Uptime.Round(time.Millisecond))
	if !e.Answered {
		out += ", before it ever answered"
	}
	if e.Tail != "" {
		out += "; its log ends: " + e.Tail
	}
	return out
}

// Start failures of a node, as Restart, WaitUp, AddProcess and Rejoin
// report them (wrapped): the process exited before it answered, or it ran
// but did not answer before the wait's deadline.
var (
	ErrExited   = errors.New("exited during its start")
	ErrNoAnswer = errors.New("does not answer HTTP")
)

// Build builds edictkv with the fault hooks: go build -tags jepsen -o out
// ./cmd/edictkv, run in repoRoot.
func Build(ctx context.Context, repoRoot, out string) error {
	abs, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-tags", "jepsen", "-o", abs, "./cmd/edictkv")
	cmd.Dir = repoRoot
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("cluster: go build -tags jepsen ./cmd/edictkv: %w\n%s", err, buf.Bytes())
	}
	return nil
}

// Node is one process of the cluster. Its exported fields do not change.
type Node struct {
	ID int
	// HTTPAddr, GRPCAddr (empty without Config.GRPC) and RaftAddr are
	// host:port as reachable from the harness (and from the other nodes).
	HTTPAddr, GRPCAddr, RaftAddr string
	DataDir                      string
	LogPath                      string

	ip   string // netns: the node's address
	ns   string // netns: its namespace
	args []string

	// Guarded by Cluster.mu.
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
	// exitErr is how cmd exited; written before done is closed.
	exitErr error
	// Of cmd: when it was started, whether the cluster sent it SIGKILL
	// (an exit it caused), whether it has answered /v1/status.
	started  time.Time
	killSent bool
	answered bool
	paused   bool
	rate     float64 // clock rate last set (1: normal)
	delay    Delay   // the delay fault last set (zero: none)
	fsync    Fsync   // the fsync fault last set (zero: none)
	// cgroups are the kernel throttles in force, by controller.
	cgroups map[string]*cgroupHold
}

// URL is the node's HTTP base URL (http://host:port).
func (n *Node) URL() string { return "http://" + n.HTTPAddr }

// Cluster is a running set of edictkv processes.
type Cluster struct {
	cfg    Config
	log    *slog.Logger
	client *http.Client
	net    *netnsNet // nil in portable mode

	mu     sync.Mutex
	nodes  map[int]*Node
	groups [][]int // the partition in force; nil when healed
	// cut, if set, is a partition that groups cannot express (a ring, a
	// bridge): whom each node may not talk to, symmetric.
	cut map[int][]int
	// hog is the disk hog running, if any.
	hog *diskHog
}

// ErrNoLeader is returned by Leader when no live node claims to lead.
var ErrNoLeader = errors.New("cluster: no node leads")

// Start starts processes 1..cfg.N and waits until one leads. On error
// everything started is torn down.
func Start(ctx context.Context, cfg Config) (_ *Cluster, err error) {
	if cfg.Mode == "" {
		cfg.Mode = ModePortable
	}
	if cfg.N < 1 {
		return nil, errors.New("cluster: N must be positive")
	}
	if cfg.Binary == "" || cfg.Dir == "" {
		return nil, errors.New("cluster: Binary and Dir are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 30 * time.Second
	}
	if cfg.Binary, err = filepath.Abs(cfg.Binary); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o750); err != nil {
		return nil, err
	}
	c := &Cluster{cfg: cfg, log: cfg.Logger.With("component", "jepsen-cluster"), nodes: map[int]*Node{},
		client: &http.Client{Timeout: 2 * time.Second}}
	switch cfg.Mode {
	case ModePortable:
	case ModeNetns:
		if c.net, err = newNetnsNet(ctx, c.log, !cfg.NoNftables); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("cluster: unknown mode %q", cfg.Mode)
	}
	defer func() {
		if err != nil {
			_ = c.Close()
		}
	}()
	var nodes []*Node
	for id := 1; id <= cfg.N; id++ {
		n, err := c.newNode(ctx, id)
		if err != nil {
			return nil, err
		}
		nodes = append(nodes, n)
	}
	peers := peersArg(nodes)
	c.mu.Lock()
	for _, n := range nodes {
		n.args = c.serveArgs(n, peers, false)
		c.nodes[n.ID] = n
		if err := c.spawn(n); err != nil {
			c.mu.Unlock()
			return nil, err
		}
	}
	c.mu.Unlock()
	wctx, cancel := context.WithTimeout(ctx, cfg.StartTimeout)
	defer cancel()
	if _, err := c.WaitLeader(wctx); err != nil {
		return nil, fmt.Errorf("cluster: no leader after start: %w (logs in %s)", err, cfg.Dir)
	}
	return c, nil
}

// newNode allocates a node's addresses (and in netns mode its namespace).
func (c *Cluster) newNode(ctx context.Context, id int) (*Node, error) {
	n := &Node{ID: id, DataDir: filepath.Join(c.cfg.Dir, fmt.Sprintf("n%d", id)),
		LogPath: filepath.Join(c.cfg.Dir, fmt.Sprintf("n%d.log", id)), rate: 1}
	if c.net != nil {
		ns, ip, err := c.net.addNode(ctx, id)
		if err != nil {
			return nil, err
		}
		n.ns, n.ip = ns, ip
		n.RaftAddr = net.JoinHostPort(ip, "7001")
		n.HTTPAddr = net.JoinHostPort(ip, "8001")
		if c.cfg.GRPC {
			n.GRPCAddr = net.JoinHostPort(ip, "9001")
		}
		return n, nil
	}
	k := 2
	if c.cfg.GRPC {
		k = 3
	}
	ports, err := freePorts(k)
	if err != nil {
		return nil, err
	}
	n.RaftAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
	n.HTTPAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1]))
	if c.cfg.GRPC {
		n.GRPCAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[2]))
	}
	return n, nil
}

// freePorts finds k free TCP ports on 127.0.0.1 (holding all of them open
// together, so they differ).
func freePorts(k int) ([]int, error) {
	var ports []int
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for range k {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("cluster: free port: %w", err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func peersArg(nodes []*Node) string {
	var items []string
	for _, n := range nodes {
		items = append(items, fmt.Sprintf("%d=%s/%s", n.ID, n.RaftAddr, n.HTTPAddr))
	}
	return strings.Join(items, ",")
}

func (c *Cluster) serveArgs(n *Node, peers string, join bool) []string {
	args := []string{"serve", "--id", strconv.Itoa(n.ID), "--data-dir", n.DataDir,
		"--raft-addr", n.RaftAddr, "--http-addr", n.HTTPAddr, "--peers", peers,
		"--log-format", "json", "--log-level", "info"}
	if n.GRPCAddr != "" {
		args = append(args, "--grpc-addr", n.GRPCAddr)
	}
	if c.cfg.Lease > 0 {
		args = append(args, "--lease", c.cfg.Lease.String())
	}
	if join {
		args = append(args, "--join")
	}
	return append(args, c.cfg.ExtraArgs...)
}

// faultsEnv is process.FaultsEnv (a jepsen build's; not imported, to keep
// this package free of the server's dependencies).
const faultsEnv = "EDICTKV_JEPSEN_FAULTS"

// spawn starts n's process; c.mu is held.
func (c *Cluster) spawn(n *Node) error {
	if n.done != nil {
		select {
		case <-n.done:
		default:
			return fmt.Errorf("cluster: node %d is running", n.ID)
		}
	}
	logf, err := os.OpenFile(n.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return err
	}
	var cmd *exec.Cmd
	if n.ns != "" {
		// ip netns exec execs the command: the PID is edictkv's.
		cmd = exec.Command("ip", append([]string{"netns", "exec", n.ns, c.cfg.Binary}, n.args...)...)
	} else {
		cmd = exec.Command(c.cfg.Binary, n.args...)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = os.Environ()
	// The partition (portable mode), clock rate, delay and fsync delay in
	// force, from the first message and the first write on.
	init := struct {
		Blocked   []int   `json:"blocked"`
		ClockRate float64 `json:"clock_rate"`
		Delay     Delay   `json:"delay"`
		Fsync     Fsync   `json:"fsync"`
	}{Blocked: []int{}, ClockRate: n.rate, Delay: n.delay, Fsync: n.fsync}
	if c.net == nil {
		init.Blocked = c.blockedFor(n.ID)
	}
	b, _ := json.Marshal(init)
	cmd.Env = append(cmd.Env, faultsEnv+"="+string(b))
	cmd.SysProcAttr = sysProcAttr()
	fmt.Fprintf(logf, "### cluster: starting node %d at %s: %s\n", n.ID, time.Now().Format(time.RFC3339Nano), strings.Join(cmd.Args, " "))
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("cluster: start node %d: %w", n.ID, err)
	}
	done := make(chan struct{})
	go func() {
		err := cmd.Wait()
		fmt.Fprintf(logf, "### cluster: node %d exited at %s: %v\n", n.ID, time.Now().Format(time.RFC3339Nano), err)
		logf.Close()
		// n's process fields are cmd's until done closes: no new
		// process starts before that.
		c.mu.Lock()
		n.exitErr = err
		expected, answered, uptime := n.killSent, n.answered, time.Since(n.started)
		c.mu.Unlock()
		if !expected {
			c.log.Warn("node exited on its own", "node", n.ID, "err", err, "uptime", uptime, "answered", answered)
			if c.cfg.OnExit != nil {
				why := "exit status 0"
				if err != nil {
					why = err.Error()
				}
				c.cfg.OnExit(Exit{ID: n.ID, Err: why, Uptime: uptime, Answered: answered, Tail: logTail(n.LogPath, tailLines)})
			}
		}
		close(done)
	}()
	n.cmd, n.done, n.paused = cmd, done, false
	n.exitErr, n.started, n.killSent, n.answered = nil, time.Now(), false, false
	c.log.Info("node started", "node", n.ID, "pid", cmd.Process.Pid, "http", n.HTTPAddr)
	return nil
}

// running reports whether n's process is up (paused counts); c.mu is held.
func (n *Node) running() bool {
	if n.done == nil {
		return false
	}
	select {
	case <-n.done:
		return false
	default:
		return true
	}
}

// PID is the node's process id, 0 when it is not running.
func (c *Cluster) PID(id int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.nodes[id]
	if n == nil || !n.running() {
		return 0
	}
	return n.cmd.Process.Pid
}

// Nodes returns the nodes in id order, added ones included.
func (c *Cluster) Nodes() []*Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sortedLocked()
}

func (c *Cluster) sortedLocked() []*Node {
	out := make([]*Node, 0, len(c.nodes))
	for _, n := range c.nodes {
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b *Node) int { return a.ID - b.ID })
	return out
}

// Node returns the node with id, or nil.
func (c *Cluster) Node(id int) *Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[id]
}

func (c *Cluster) node(id int) (*Node, error) {
	n := c.nodes[id]
	if n == nil {
		return nil, fmt.Errorf("cluster: no node %d", id)
	}
	return n, nil
}

// blockedFor is whom id may not exchange anything with under the current
// partition; c.mu is held.
func (c *Cluster) blockedFor(id int) []int {
	out := []int{}
	if c.cut != nil {
		out = append(out, c.cut[id]...)
		slices.Sort(out)
		return out
	}
	if c.groups == nil {
		return out
	}
	var mine []int
	for _, g := range c.groups {
		if slices.Contains(g, id) {
			mine = g
		}
	}
	for other := range c.nodes {
		if other != id && !slices.Contains(mine, other) {
			out = append(out, other)
		}
	}
	slices.Sort(out)
	return out
}

// Partition splits the nodes into groups: nodes in different groups cannot
// exchange anything (in portable mode: no log traffic), and a node listed
// in no group is alone. It replaces any earlier partition.
func (c *Cluster) Partition(groups [][]int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	seen := map[int]bool{}
	cp := make([][]int, 0, len(groups))
	for _, g := range groups {
		for _, id := range g {
			if seen[id] {
				return fmt.Errorf("cluster: node %d is in two groups", id)
			}
			seen[id] = true
		}
		cp = append(cp, slices.Clone(g))
	}
	c.groups, c.cut = cp, nil
	c.log.Info("partition", "groups", groups)
	return c.applyLocked()
}

// Block cuts the links between each node and the nodes listed for it, in
// both directions, whatever shape that makes (a ring of overlapping
// majorities, a bridge). Nil or empty heals. A node added later (AddProcess)
// is not cut off. It replaces any earlier partition.
func (c *Cluster) Block(blocked map[int][]int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(blocked) == 0 {
		c.groups, c.cut = nil, nil
		c.log.Info("heal")
		return c.applyLocked()
	}
	cut := map[int][]int{}
	add := func(a, b int) {
		if a != b && !slices.Contains(cut[a], b) {
			cut[a] = append(cut[a], b)
		}
	}
	for a, bs := range blocked {
		for _, b := range bs {
			if c.nodes[a] == nil || c.nodes[b] == nil {
				return fmt.Errorf("cluster: block %d-%d: no such node", a, b)
			}
			add(a, b)
			add(b, a)
		}
	}
	c.groups, c.cut = nil, cut
	c.log.Info("partition", "cut", cut)
	return c.applyLocked()
}

// Heal ends any partition.
func (c *Cluster) Heal() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.groups, c.cut = nil, nil
	c.log.Info("heal")
	return c.applyLocked()
}

// applyLocked puts the partition in force on every node (in portable mode
// every running, unpaused one).
func (c *Cluster) applyLocked() error {
	var errs []error
	for _, n := range c.sortedLocked() {
		blocked := c.blockedFor(n.ID)
		if c.net != nil {
			var ips []string
			for _, b := range blocked {
				ips = append(ips, c.nodes[b].ip)
			}
			errs = append(errs, c.net.block(n.ns, ips))
			continue
		}
		if !n.running() || n.paused {
			continue // told at Restart or Resume
		}
		errs = append(errs, c.postFaults(n, map[string]any{"blocked": blocked}))
	}
	return errors.Join(errs...)
}

func (c *Cluster) postFaults(n *Node, body map[string]any) error {
	b, _ := json.Marshal(body)
	resp, err := c.client.Post(n.URL()+"/debug/jepsen/faults", "application/json", bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("cluster: node %d faults: %w", n.ID, err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("cluster: node %d faults: %s: %s (is the binary built with -tags jepsen?)", n.ID, resp.Status, msg)
	}
	return nil
}

// Kill SIGKILLs a node's process and waits for it to die.
func (c *Cluster) Kill(id int) error {
	c.mu.Lock()
	n, err := c.node(id)
	if err != nil {
		c.mu.Unlock()
		return err
	}
	if !n.running() {
		c.mu.Unlock()
		return fmt.Errorf("cluster: node %d is not running", id)
	}
	n.killSent = true
	_ = n.cmd.Process.Signal(syscall.SIGKILL)
	n.paused = false
	done := n.done
	c.mu.Unlock()
	select {
	case <-done:
		c.log.Info("node killed", "node", id)
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("cluster: node %d did not die within 10s of SIGKILL", id)
	}
}

// Restart starts a killed node again with the same arguments and data
// directory, under the partition and clock rate in force, and waits until
// it answers HTTP (not until it has caught up).
func (c *Cluster) Restart(id int) error {
	c.mu.Lock()
	n, err := c.node(id)
	if err == nil {
		err = c.spawn(n)
	}
	c.mu.Unlock()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return c.waitUp(ctx, n)
}

// Bounce SIGKILLs a node's process and starts it again at once, with the
// same arguments, data directory and faults in force, without waiting for
// it to answer (WaitUp does): a crash and restart a few milliseconds
// apart, which a node can suffer more than once within a lease. down is
// the time from the signal to the new process's exec.
func (c *Cluster) Bounce(id int) (down time.Duration, err error) {
	c.mu.Lock()
	n, err := c.node(id)
	if err == nil && !n.running() {
		err = fmt.Errorf("cluster: node %d is not running", id)
	}
	if err != nil {
		c.mu.Unlock()
		return 0, err
	}
	start := time.Now()
	n.killSent = true
	_ = n.cmd.Process.Signal(syscall.SIGKILL)
	n.paused = false
	done := n.done
	c.mu.Unlock()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		return 0, fmt.Errorf("cluster: node %d did not die within 10s of SIGKILL", id)
	}
	c.mu.Lock()
	err = c.spawn(n)
	c.mu.Unlock()
	down = time.Since(start)
	c.log.Info("node bounced", "node", id, "down", down)
	return down, err
}

// WaitUp waits until node id answers HTTP.
func (c *Cluster) WaitUp(ctx context.Context, id int) error {
	c.mu.Lock()
	n, err := c.node(id)
	c.mu.Unlock()
	if err != nil {
		return err
	}
	return c.waitUp(ctx, n)
}

// waitUp waits until n answers /v1/status. It gives up at once if n's
// process exits meanwhile (ErrExited, with the exit and the log's last
// lines), and at ctx's end if it runs without answering (ErrNoAnswer).
func (c *Cluster) waitUp(ctx context.Context, n *Node) error {
	c.mu.Lock()
	done := n.done
	c.mu.Unlock()
	if done == nil {
		return fmt.Errorf("cluster: node %d was never started", n.ID)
	}
	for {
		if _, err := c.status(ctx, n); err == nil {
			return nil
		}
		select {
		case <-done:
			// Read after done closed: the process's own exit.
			return fmt.Errorf("cluster: node %d %w (%v); its log ends: %s", n.ID, ErrExited, c.exitOf(n, done), logTail(n.LogPath, tailLines))
		case <-ctx.Done():
			return fmt.Errorf("cluster: node %d %w: %w; its log ends: %s", n.ID, ErrNoAnswer, ctx.Err(), logTail(n.LogPath, tailLines))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// exitOf says how the process whose done channel is done exited.
func (c *Cluster) exitOf(n *Node, done chan struct{}) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case n.done != done:
		return "replaced by a newer process"
	case n.exitErr == nil:
		return "exit status 0"
	}
	return n.exitErr.Error()
}

// Pause SIGSTOPs a node's process.
func (c *Cluster) Pause(id int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, err := c.signalLocked(id, syscall.SIGSTOP, "pause")
	if err != nil {
		return err
	}
	n.paused = true
	c.log.Info("node paused", "node", id)
	return nil
}

// signalLocked sends sig to a running node's process; c.mu is held.
func (c *Cluster) signalLocked(id int, sig syscall.Signal, verb string) (*Node, error) {
	n, err := c.node(id)
	if err != nil {
		return nil, err
	}
	if !n.running() {
		return nil, fmt.Errorf("cluster: node %d is not running", id)
	}
	if err := n.cmd.Process.Signal(sig); err != nil {
		return nil, fmt.Errorf("cluster: %s node %d: %w", verb, id, err)
	}
	return n, nil
}

// Resume SIGCONTs a paused node's process and tells it of the clock rate,
// delay and fsync delay in force (and in portable mode of the partition),
// which may have changed while it was stopped.
func (c *Cluster) Resume(id int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, err := c.signalLocked(id, syscall.SIGCONT, "resume")
	if err != nil {
		return err
	}
	n.paused = false
	c.log.Info("node resumed", "node", id)
	body := map[string]any{"clock_rate": n.rate, "delay": n.delay, "fsync": n.fsync}
	if c.net == nil {
		body["blocked"] = c.blockedFor(id)
	}
	return c.postFaults(n, body)
}

// SetClockRate makes a node's clock run at rate relative to real time from
// now on (1: normal); it also holds after a Restart. A paused node gets it
// when resumed.
func (c *Cluster) SetClockRate(id int, rate float64) error {
	if !(rate > 0) {
		return fmt.Errorf("cluster: clock rate %g must be positive", rate)
	}
	return c.setFault(id, func(n *Node) { n.rate = rate }, "clock_rate", rate)
}

// setFault records a fault setting on node id, so that a restart or a
// resume re-applies it, and tells the running process now.
func (c *Cluster) setFault(id int, record func(*Node), field string, value any) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, err := c.node(id)
	if err != nil {
		return err
	}
	record(n)
	if !n.running() || n.paused {
		return nil
	}
	return c.postFaults(n, map[string]any{field: value})
}

// Delay is the delay fault of a node (process.DelayJSON; not imported,
// to keep this package free of the server's dependencies): P of the log
// messages it receives held MinMS..MaxMS, Dup of them delivered again up
// to MaxMS later, Reorder of them held up to ReorderMS so that later ones
// overtake them, and incoming snapshot streams held SnapshotMS/2..
// SnapshotMS. The zero Delay is none.
type Delay struct {
	P          float64 `json:"p,omitempty"`
	MinMS      int     `json:"min_ms,omitempty"`
	MaxMS      int     `json:"max_ms,omitempty"`
	Dup        float64 `json:"dup,omitempty"`
	Reorder    float64 `json:"reorder,omitempty"`
	ReorderMS  int     `json:"reorder_ms,omitempty"`
	SnapshotMS int     `json:"snapshot_ms,omitempty"`
}

// SetDelay sets a node's delay fault (in both modes through the test-only
// hook: the kernel here has no netem); it also holds after a Restart. A
// paused node gets it when resumed, a stopped one when restarted.
func (c *Cluster) SetDelay(id int, d Delay) error {
	return c.setFault(id, func(n *Node) { n.delay = d }, "delay", d)
}

// HookStats is what a node's fault hook counted (process.FaultStatsJSON):
// the delay's and the fsync delay's counts since each was last set, the
// snapshot counts since the process started.
type HookStats struct {
	Held               uint64 `json:"held"`
	Duplicated         uint64 `json:"duplicated"`
	Reordered          uint64 `json:"reordered"`
	SnapshotsHeld      uint64 `json:"snapshots_held"`
	SnapshotsHolding   int64  `json:"snapshots_holding"`
	SnapshotsReceived  uint64 `json:"snapshots_received"`
	SnapshotsSending   int64  `json:"snapshots_sending"`
	SnapshotsInstalled uint64 `json:"snapshots_installed"`
	SnapshotsFailed    uint64 `json:"snapshots_failed"`
	// The fsync delay's counts since it was last set: batches delayed,
	// the delay added in all, batches waiting now.
	FsyncDelayed uint64 `json:"fsync_delayed"`
	FsyncDelayMS uint64 `json:"fsync_delay_ms"`
	FsyncWaiting int64  `json:"fsync_waiting"`
}

// HookStats asks a node's GET /debug/jepsen/faults for its counts.
func (c *Cluster) HookStats(ctx context.Context, id int) (HookStats, error) {
	c.mu.Lock()
	n, err := c.node(id)
	c.mu.Unlock()
	var out struct {
		Stats *HookStats `json:"stats"`
	}
	if err != nil {
		return HookStats{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.URL()+"/debug/jepsen/faults", nil)
	if err != nil {
		return HookStats{}, err
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return HookStats{}, fmt.Errorf("cluster: node %d faults: %w", id, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return HookStats{}, fmt.Errorf("cluster: node %d faults: %s", id, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return HookStats{}, err
	}
	if out.Stats == nil {
		return HookStats{}, fmt.Errorf("cluster: node %d reports no fault stats (an older binary?)", id)
	}
	return *out.Stats, nil
}

// Status is the part of a node's GET /v1/status (kvjson.StatusJSON) the
// harness reads, in the harness's ints.
type Status struct {
	ID         int
	Epoch      int
	Leader     int
	IsLeader   bool
	Commit     int
	Applied    int
	FirstIndex int
	LastIndex  int
	Members    []int
	Learners   []int
	Ready      bool
}

func statusOf(b kvjson.StatusJSON) Status {
	ints := func(ids []uint64) []int {
		out := make([]int, len(ids))
		for i, id := range ids {
			out[i] = int(id)
		}
		return out
	}
	return Status{ID: int(b.ID), Epoch: int(b.Epoch), Leader: int(b.Leader), IsLeader: b.IsLeader,
		Commit: int(b.Commit), Applied: int(b.Applied), FirstIndex: int(b.FirstIndex), LastIndex: int(b.LastIndex),
		Members: ints(b.Members), Learners: ints(b.Learners), Ready: b.Ready}
}

// Status asks one node for its status.
func (c *Cluster) Status(ctx context.Context, id int) (Status, error) {
	c.mu.Lock()
	n, err := c.node(id)
	c.mu.Unlock()
	if err != nil {
		return Status{}, err
	}
	return c.status(ctx, n)
}

func (c *Cluster) status(ctx context.Context, n *Node) (Status, error) {
	var st Status
	c.mu.Lock()
	asked := n.cmd
	c.mu.Unlock()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.URL()+"/v1/status", nil)
	if err != nil {
		return st, err
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("cluster: node %d status: %s", n.ID, resp.Status)
	}
	var body kvjson.StatusJSON
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return st, err
	}
	st = statusOf(body)
	c.mu.Lock()
	if n.cmd == asked && asked != nil {
		n.answered = true
	}
	c.mu.Unlock()
	return st, nil
}

// live is the nodes running and not paused.
func (c *Cluster) live() []*Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*Node
	for _, n := range c.sortedLocked() {
		if n.running() && !n.paused {
			out = append(out, n)
		}
	}
	return out
}

// Leader asks every live node's /v1/status and returns the one that
// claims to lead. If several do (an old leader not yet stepped down), it
// returns the one most others name as leader, the lowest id on a tie.
// ErrNoLeader: none claims to.
func (c *Cluster) Leader(ctx context.Context) (int, error) {
	nodes := c.live()
	sts := make([]*Status, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if st, err := c.status(ctx, n); err == nil {
				sts[i] = &st
			}
		}()
	}
	wg.Wait()
	votes := map[int]int{}
	var claims []int
	for i, st := range sts {
		if st == nil {
			continue
		}
		if st.IsLeader {
			claims = append(claims, nodes[i].ID)
		}
		if st.Leader != 0 {
			votes[st.Leader]++
		}
	}
	if len(claims) == 0 {
		return 0, ErrNoLeader
	}
	best := claims[0]
	for _, id := range claims[1:] {
		if votes[id] > votes[best] {
			best = id
		}
	}
	return best, nil
}

// WaitLeader polls Leader until a node leads or ctx is done.
func (c *Cluster) WaitLeader(ctx context.Context) (int, error) {
	for {
		id, err := c.Leader(ctx)
		if err == nil {
			return id, nil
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("%w: %w", err, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// AddProcess starts a new process (the next free id) with --join and the
// current members (as a live node's /v1/status reports them; all known
// nodes if none answers) as --peers, and waits until it answers HTTP. The
// caller adds it to the cluster with the admin API (POST
// /v1/cluster/learners, then /v1/cluster/promote). Under a partition the
// new node is alone.
func (c *Cluster) AddProcess(ctx context.Context) (*Node, error) {
	members := c.liveMembers(ctx)
	c.mu.Lock()
	id := 1
	for c.nodes[id] != nil {
		id++
	}
	var peers []*Node
	for _, n := range c.sortedLocked() {
		if members == nil || slices.Contains(members, n.ID) {
			peers = append(peers, n)
		}
	}
	c.mu.Unlock()
	n, err := c.newNode(ctx, id)
	if err != nil {
		return nil, err
	}
	n.args = c.serveArgs(n, peersArg(peers), true)
	c.mu.Lock()
	c.nodes[id] = n
	err = c.spawn(n)
	if err == nil && (c.groups != nil || c.cut != nil) {
		// The others must block the newcomer too.
		err = c.applyLocked()
	}
	c.mu.Unlock()
	if err != nil {
		return n, err
	}
	wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	return n, c.waitUp(wctx, n)
}

// Wipe empties a stopped node's data directory, as a crash that loses the
// disk would: the process's next start knows nothing, not even its
// incarnation. A cluster must not take such a process back as the member
// it was (it would have forgotten its grants and its log); see Rejoin.
func (c *Cluster) Wipe(id int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, err := c.node(id)
	if err != nil {
		return err
	}
	if n.running() {
		return fmt.Errorf("cluster: node %d is running; kill it before wiping its disk", id)
	}
	if err := os.RemoveAll(n.DataDir); err != nil {
		return fmt.Errorf("cluster: wipe node %d: %w", id, err)
	}
	c.log.Info("node wiped", "node", id, "dir", n.DataDir)
	return nil
}

// Rejoin starts a stopped node again, with the same id, addresses and
// data directory, as a new process that joins the cluster (--join, and
// the current members, as a live node reports them, as --peers), and
// waits until it answers HTTP. It is for a node whose disk was wiped
// after the cluster removed it: the caller adds it back with the admin
// API (learner, then promote). Later restarts keep these arguments
// (--join is ignored once the data directory holds a log).
func (c *Cluster) Rejoin(ctx context.Context, id int) error {
	members := c.liveMembers(ctx)
	c.mu.Lock()
	n, err := c.node(id)
	if err == nil && n.running() {
		err = fmt.Errorf("cluster: node %d is running", id)
	}
	if err != nil {
		c.mu.Unlock()
		return err
	}
	var peers []*Node
	for _, p := range c.sortedLocked() {
		if p.ID != id && (members == nil || slices.Contains(members, p.ID)) {
			peers = append(peers, p)
		}
	}
	n.args = c.serveArgs(n, peersArg(peers), true)
	err = c.spawn(n)
	c.mu.Unlock()
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	return c.waitUp(wctx, n)
}

// liveMembers is the members as the first live node to answer reports
// them; nil if none answers.
func (c *Cluster) liveMembers(ctx context.Context) []int {
	for _, n := range c.live() {
		if st, err := c.status(ctx, n); err == nil && len(st.Members) > 0 {
			return st.Members
		}
	}
	return nil
}

// Close stops the disk hog, kills every process, removes the cgroups of
// the throttles in force and, in netns mode, the namespaces, bridge and
// rules. The logs and data stay in Dir.
func (c *Cluster) Close() error {
	var errs []error
	if _, err := c.StopDiskHog(); err != nil && !errors.Is(err, errNoHog) {
		errs = append(errs, err)
	}
	c.mu.Lock()
	var dones []chan struct{}
	for _, n := range c.nodes {
		if n.running() {
			n.killSent = true
			_ = n.cmd.Process.Signal(syscall.SIGKILL)
			dones = append(dones, n.done)
		}
	}
	c.mu.Unlock()
	for _, d := range dones {
		select {
		case <-d:
		case <-time.After(10 * time.Second):
			errs = append(errs, errors.New("cluster: a process did not die within 10s of SIGKILL"))
		}
	}
	c.mu.Lock()
	for _, n := range c.nodes {
		for ctl := range n.cgroups {
			errs = append(errs, c.releaseCgroupLocked(n, ctl))
		}
	}
	c.mu.Unlock()
	if c.net != nil {
		errs = append(errs, c.net.close())
	}
	return errors.Join(errs...)
}
