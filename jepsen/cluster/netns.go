package cluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Names of everything netns mode creates carry a random tag of 8 hex
// digits: bridge ejbr<tag>, host-side veths ejv<tag><id> (the node side is
// renamed eth0 in its namespace), namespaces ejns-<tag>-<id>. The owner's
// PID is in ownerDir/<tag>.pid, so that Start can remove what crashed runs
// left behind without touching the resources of runs still alive.
const (
	bridgePrefix = "ejbr"
	vethPrefix   = "ejv"
	peerPrefix   = "ejp"
	nsPrefix     = "ejns-"
	ownerDir     = "/run/ejepsen"
	// subnetPrefix is the test-only private range: 10.213.<x>.0/24, x
	// picked among those not in use on the host.
	subnetPrefix = "10.213."
)

// netnsNet is netns mode's network: a bridge in the harness's namespace
// and a namespace per node.
type netnsNet struct {
	log    *slog.Logger
	tag    string
	bridge string
	subnet int // x of 10.213.x.0/24
	nft    bool

	mu  sync.Mutex
	nss map[int]string
}

func run(ctx context.Context, stdin []byte, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("cluster: %s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}

func newNetnsNet(ctx context.Context, log *slog.Logger, nft bool) (_ *netnsNet, err error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("cluster: netns mode needs root (network namespaces, veths, a bridge); use portable mode")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, errors.New("cluster: netns mode needs iproute2's ip command")
	}
	if _, err := run(ctx, nil, "ip", "netns", "list"); err != nil {
		return nil, fmt.Errorf("cluster: ip netns does not work here: %w", err)
	}
	cleanupLeftovers(ctx, log)
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	n := &netnsNet{log: log, tag: hex.EncodeToString(b), nss: map[int]string{}}
	n.bridge = bridgePrefix + n.tag
	if nft {
		_, lookErr := exec.LookPath("nft")
		n.nft = lookErr == nil
	}
	if err := os.MkdirAll(ownerDir, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(n.ownerFile(), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = n.close()
		}
	}()
	if n.subnet, err = freeSubnet(ctx); err != nil {
		return nil, err
	}
	for _, args := range [][]string{
		{"link", "add", n.bridge, "type", "bridge"},
		{"addr", "add", n.harnessIP() + "/24", "dev", n.bridge},
		{"link", "set", n.bridge, "up"},
	} {
		if _, err := run(ctx, nil, "ip", args...); err != nil {
			return nil, err
		}
	}
	log.Info("netns network up", "bridge", n.bridge, "subnet", fmt.Sprintf("%s%d.0/24", subnetPrefix, n.subnet), "nft", n.nft)
	return n, nil
}

func (n *netnsNet) ownerFile() string { return filepath.Join(ownerDir, n.tag+".pid") }

// harnessIP is the bridge's address: the harness's on the test network.
// It is never blocked.
func (n *netnsNet) harnessIP() string { return fmt.Sprintf("%s%d.1", subnetPrefix, n.subnet) }

// freeSubnet picks x such that 10.213.x.0/24 appears in no address or
// route of the host.
func freeSubnet(ctx context.Context) (int, error) {
	addrs, err := run(ctx, nil, "ip", "-4", "-o", "addr", "show")
	if err != nil {
		return 0, err
	}
	routes, err := run(ctx, nil, "ip", "-4", "route", "show", "table", "all")
	if err != nil {
		return 0, err
	}
	used := addrs + routes
	for range 64 {
		r, err := rand.Int(rand.Reader, big.NewInt(254))
		if err != nil {
			return 0, err
		}
		x := int(r.Int64()) + 1
		if !strings.Contains(used, fmt.Sprintf("%s%d.", subnetPrefix, x)) {
			return x, nil
		}
	}
	return 0, errors.New("cluster: no free 10.213.x.0/24 subnet")
}

// addNode creates node id's namespace with loopback up and a veth into the
// bridge; it returns the namespace and the node's address.
func (n *netnsNet) addNode(ctx context.Context, id int) (string, string, error) {
	if id < 1 || id > 240 {
		return "", "", fmt.Errorf("cluster: netns mode supports node ids 1..240, not %d", id)
	}
	ns := fmt.Sprintf("%s%s-%d", nsPrefix, n.tag, id)
	ip := fmt.Sprintf("%s%d.%d", subnetPrefix, n.subnet, 10+id)
	host := fmt.Sprintf("%s%s%d", vethPrefix, n.tag, id)
	peer := fmt.Sprintf("%s%s%d", peerPrefix, n.tag, id)
	if _, err := run(ctx, nil, "ip", "netns", "add", ns); err != nil {
		return "", "", err
	}
	n.mu.Lock()
	n.nss[id] = ns
	n.mu.Unlock()
	for _, args := range [][]string{
		{"-n", ns, "link", "set", "lo", "up"},
		{"link", "add", host, "type", "veth", "peer", "name", peer},
		{"link", "set", peer, "netns", ns},
		{"-n", ns, "link", "set", peer, "name", "eth0"},
		{"-n", ns, "addr", "add", ip + "/24", "dev", "eth0"},
		{"-n", ns, "link", "set", "eth0", "up"},
		{"link", "set", host, "master", n.bridge},
		{"link", "set", host, "up"},
	} {
		if _, err := run(ctx, nil, "ip", args...); err != nil {
			return "", "", err
		}
	}
	return ns, ip, nil
}

// nftTable is the table partitions live in, in each node's namespace.
const nftTable = "ejepsen"

// block makes the namespace ns drop everything to and from ips (and
// nothing else): ips empty heals it.
func (n *netnsNet) block(ns string, ips []string) error {
	ctx := context.Background()
	if n.nft {
		// Declaring the table first makes the delete succeed when it does
		// not exist yet; the file is applied atomically.
		script := fmt.Sprintf("table inet %[1]s\ndelete table inet %[1]s\n", nftTable)
		if len(ips) > 0 {
			set := strings.Join(ips, ", ")
			script += fmt.Sprintf("table inet %s {\n"+
				"\tchain input { type filter hook input priority -10; policy accept; ip saddr { %s } drop; }\n"+
				"\tchain output { type filter hook output priority -10; policy accept; ip daddr { %s } drop; }\n"+
				"}\n", nftTable, set, set)
		}
		_, err := run(ctx, []byte(script), "ip", "netns", "exec", ns, "nft", "-f", "-")
		return err
	}
	// Blackhole routes: both sides block each other, so a packet to a
	// blocked peer is never sent and a reply to one is never routed.
	if _, err := run(ctx, nil, "ip", "-n", ns, "route", "flush", "type", "blackhole"); err != nil {
		return err
	}
	for _, ip := range ips {
		if _, err := run(ctx, nil, "ip", "-n", ns, "route", "add", "blackhole", ip+"/32"); err != nil {
			return err
		}
	}
	return nil
}

// close removes the namespaces (their veths go with them), the bridge and
// the owner file. The processes must be dead.
func (n *netnsNet) close() error {
	ctx := context.Background()
	var errs []error
	n.mu.Lock()
	for id, ns := range n.nss {
		killNamespace(ctx, ns)
		if _, err := run(ctx, nil, "ip", "netns", "del", ns); err != nil {
			errs = append(errs, err)
		}
		delete(n.nss, id)
	}
	n.mu.Unlock()
	if _, err := run(ctx, nil, "ip", "link", "show", n.bridge); err == nil {
		if _, err := run(ctx, nil, "ip", "link", "del", n.bridge); err != nil {
			errs = append(errs, err)
		}
	}
	_ = os.Remove(n.ownerFile())
	return errors.Join(errs...)
}

// killNamespace SIGKILLs whatever still runs in ns: the processes of a
// crashed run (or of this one that outlived Close's kill).
func killNamespace(ctx context.Context, ns string) {
	out, err := run(ctx, nil, "ip", "netns", "pids", ns)
	if err != nil {
		return
	}
	for _, f := range strings.Fields(out) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// ownerAlive reports whether the run that owns tag is still running.
func ownerAlive(tag string) bool {
	b, err := os.ReadFile(filepath.Join(ownerDir, tag+".pid"))
	if err != nil {
		return false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return false
	}
	return syscall.Kill(pid, 0) == nil
}

// cleanupLeftovers removes the namespaces, veths, bridges and cgroups of
// earlier runs whose owner process is gone.
func cleanupLeftovers(ctx context.Context, log *slog.Logger) {
	dead := map[string]bool{}
	isDead := func(tag string) bool {
		if v, ok := dead[tag]; ok {
			return v
		}
		dead[tag] = !ownerAlive(tag)
		return dead[tag]
	}
	if out, err := run(ctx, nil, "ip", "netns", "list"); err == nil {
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) == 0 || !strings.HasPrefix(f[0], nsPrefix) {
				continue
			}
			ns := f[0]
			tag, _, _ := strings.Cut(strings.TrimPrefix(ns, nsPrefix), "-")
			if !isDead(tag) {
				continue
			}
			killNamespace(ctx, ns)
			if _, err := run(ctx, nil, "ip", "netns", "del", ns); err == nil {
				log.Info("removed a leftover namespace", "ns", ns)
			}
		}
	}
	if out, err := run(ctx, nil, "ip", "-o", "link", "show"); err == nil {
		for _, line := range strings.Split(out, "\n") {
			// "7: name@peer: <...>" or "7: name: <...>"
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
			var tag string
			switch {
			case strings.HasPrefix(name, bridgePrefix) && len(name) >= len(bridgePrefix)+8:
				tag = name[len(bridgePrefix) : len(bridgePrefix)+8]
			case strings.HasPrefix(name, vethPrefix) && len(name) >= len(vethPrefix)+8:
				tag = name[len(vethPrefix) : len(vethPrefix)+8]
			default:
				continue
			}
			if !isDead(tag) {
				continue
			}
			if _, err := run(ctx, nil, "ip", "link", "del", name); err == nil {
				log.Info("removed a leftover link", "link", name)
			}
		}
	}
	cleanupCgroups(log, isDead)
	if ents, err := os.ReadDir(ownerDir); err == nil {
		for _, e := range ents {
			if tag, ok := strings.CutSuffix(e.Name(), ".pid"); ok {
				isDead(tag)
			}
		}
	}
	for tag, d := range dead {
		if d {
			_ = os.Remove(filepath.Join(ownerDir, tag+".pid"))
		}
	}
}
