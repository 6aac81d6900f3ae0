package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/edictlog/edictlog/cmd/edictkv/kvjson"
)

// binary is edictkv, built once for the end-to-end tests.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "edictkv-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "edictkv")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// freePort picks a port that was free a moment ago.
// freePort returns a port nothing listens on and that this test binary
// has not handed out before: the kernel may give a port it just released
// to the very next bind(0), so two picks in a row could name one port for
// two listeners (TestEtcdctl once got a node's HTTP port as another's
// raft port, and the second bind failed).
func freePort(t *testing.T) string {
	t.Helper()
	handedMu.Lock()
	defer handedMu.Unlock()
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		if !handed[addr] {
			handed[addr] = true
			return addr
		}
	}
}

var (
	handedMu sync.Mutex
	handed   = map[string]bool{}
)

type proc struct {
	id        int
	raft, api string
	gossip    string // gossip address; "" without gossip
	dir       string
	cmd       *exec.Cmd
	log       *os.File
}

type cluster struct {
	t     *testing.T
	peers string
	procs []*proc
	// flags, if set, gives flags every start of p adds (gossip's).
	flags func(p *proc) []string
}

func newCluster(t *testing.T, n int) *cluster {
	return newClusterWith(t, n, false, nil)
}

// newClusterWith starts n processes; with gossip, each gets a gossip
// address too, and flags are added to every start of every process.
func newClusterWith(t *testing.T, n int, gossip bool, flags func(c *cluster, p *proc) []string) *cluster {
	c := &cluster{t: t}
	if flags != nil {
		c.flags = func(p *proc) []string { return flags(c, p) }
	}
	root := t.TempDir()
	var peers []string
	for i := 1; i <= n; i++ {
		p := &proc{id: i, raft: freePort(t), api: freePort(t), dir: filepath.Join(root, fmt.Sprint(i))}
		if gossip {
			p.gossip = freePort(t)
		}
		c.procs = append(c.procs, p)
		peers = append(peers, fmt.Sprintf("%d=%s/%s", i, p.raft, p.api))
	}
	c.peers = strings.Join(peers, ",")
	for _, p := range c.procs {
		c.start(p)
	}
	t.Cleanup(func() {
		for _, p := range c.procs {
			if p.cmd != nil {
				_ = p.cmd.Process.Kill()
				_ = p.cmd.Wait()
				p.log.Close()
			}
		}
		if t.Failed() {
			for _, p := range c.procs {
				b, _ := os.ReadFile(p.log.Name())
				t.Logf("log of node %d (last 3000 bytes):\n%s", p.id, tail(b, 3000))
			}
		}
	})
	return c
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// start runs `edictkv serve` for p, configured through both flags and
// EDICTKV_* variables (the data dir comes from the environment); extra
// flags (--join) are appended.
func (c *cluster) start(p *proc, extra ...string) {
	c.t.Helper()
	if err := os.MkdirAll(p.dir, 0o750); err != nil {
		c.t.Fatal(err)
	}
	logf, err := os.OpenFile(filepath.Join(p.dir, "..", fmt.Sprintf("node%d.log", p.id)), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o640)
	if err != nil {
		c.t.Fatal(err)
	}
	cmd := exec.Command(binary, "serve", "--id", fmt.Sprint(p.id), "--raft-addr", p.raft, "--http-addr", p.api,
		"--peers", c.peers, "--log-format", "json", "--log-level", "info")
	if c.flags != nil {
		cmd.Args = append(cmd.Args, c.flags(p)...)
	}
	cmd.Args = append(cmd.Args, extra...)
	cmd.Env = append(os.Environ(), "EDICTKV_DATA_DIR="+p.dir, "EDICTKV_CLUSTER_ID=e2e")
	cmd.Stdout, cmd.Stderr = logf, logf
	dieWithTest(cmd)
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	p.cmd, p.log = cmd, logf
}

// stop signals p and waits for it to exit; after SIGTERM it must exit
// cleanly. It may run on another goroutine than the test's.
func (c *cluster) stop(p *proc, sig syscall.Signal) error {
	if err := p.cmd.Process.Signal(sig); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	var err error
	select {
	case err = <-done:
		if sig != syscall.SIGTERM {
			err = nil
		}
	case <-time.After(60 * time.Second):
		err = fmt.Errorf("node %d did not exit after %v", p.id, sig)
		_ = p.cmd.Process.Kill()
		<-done
	}
	p.cmd = nil
	p.log.Close()
	if err != nil {
		return fmt.Errorf("node %d after %v: %w", p.id, sig, err)
	}
	return nil
}

func (c *cluster) mustStop(p *proc, sig syscall.Signal) {
	c.t.Helper()
	if err := c.stop(p, sig); err != nil {
		c.t.Fatal(err)
	}
}

// ready polls p's /readyz: it knows a leader and has applied what it was
// told is committed.
func (c *cluster) ready(p *proc) {
	c.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if code, _, err := call("GET", "http://"+p.api+"/readyz", ""); err == nil && code == 200 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.t.Fatalf("node %d not ready within 60s", p.id)
}

var httpc = &http.Client{Timeout: 30 * time.Second}

func call(method, url, body string) (int, []byte, error) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	resp, err := httpc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// killLeader SIGKILLs the leader and returns the new one, which must be
// another process.
func (c *cluster) killLeader(leader *proc) *proc {
	c.t.Helper()
	c.mustStop(leader, syscall.SIGKILL)
	next := c.leader()
	if next == leader {
		c.t.Fatal("the killed process still leads")
	}
	return next
}

// leader polls /v1/status on the live processes until one leads.
func (c *cluster) leader() *proc {
	c.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		for _, p := range c.procs {
			if p.cmd == nil {
				continue
			}
			code, b, err := call("GET", "http://"+p.api+"/v1/status", "")
			var st kvjson.StatusJSON
			if err == nil && code == 200 && json.Unmarshal(b, &st) == nil && st.IsLeader {
				return p
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.t.Fatal("no leader within 60s")
	return nil
}

func (c *cluster) other(not *proc) *proc {
	for _, p := range c.procs {
		if p != not && p.cmd != nil {
			return p
		}
	}
	c.t.Fatal("no other live process")
	return nil
}

// put writes through p, retrying only answers that say nothing was done
// (no leader yet, or the process not up): a 503 or a refused connection.
func (c *cluster) put(p *proc, key, value string) {
	c.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		code, b, err := call("PUT", "http://"+p.api+"/v1/kv/"+key, value)
		if err == nil && code == 200 {
			return
		}
		if time.Now().After(deadline) || (err == nil && code != 503) {
			c.t.Fatalf("PUT %s via node %d: %d %s %v", key, p.id, code, b, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// get reads key through p at level and returns its value ("" if missing).
func (c *cluster) get(p *proc, key, level string) (string, int) {
	c.t.Helper()
	code, b, err := call("GET", "http://"+p.api+"/v1/kv/"+key+"?consistency="+level, "")
	if err != nil {
		c.t.Fatalf("GET %s via node %d: %v", key, p.id, err)
	}
	if code != 200 {
		return "", code
	}
	var g kvjson.GetResponse
	if err := json.Unmarshal(b, &g); err != nil || g.Value == nil {
		c.t.Fatalf("GET %s: %s (%v)", key, b, err)
	}
	return *g.Value, code
}

// mustRead checks key has value through every live process at every level
// (a stale read may lag: it is polled).
func (c *cluster) mustRead(key, value string) {
	c.t.Helper()
	for _, p := range c.procs {
		if p.cmd == nil {
			continue
		}
		for _, level := range []string{"lease", "follower", "stale"} {
			deadline := time.Now().Add(30 * time.Second)
			for {
				v, code := c.get(p, key, level)
				if v == value {
					break
				}
				if level != "stale" || time.Now().After(deadline) {
					c.t.Fatalf("%s read of %s via node %d: %q (status %d), want %q", level, key, p.id, v, code, value)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
}

func TestEndToEnd(t *testing.T) {
	c := newCluster(t, 3)
	leader := c.leader()

	// Writes through every process, reads at every level through every one.
	for _, p := range c.procs {
		c.put(p, fmt.Sprintf("k%d", p.id), fmt.Sprintf("v%d", p.id))
	}
	for _, p := range c.procs {
		c.mustRead(fmt.Sprintf("k%d", p.id), fmt.Sprintf("v%d", p.id))
	}

	// A compare-and-swap conflict is a 409 and leaves the value alone.
	f := c.other(leader)
	if code, b, _ := call("PUT", "http://"+f.api+"/v1/kv/k1?cas=0", "again"); code != 409 || !strings.Contains(string(b), "cas_failed") {
		t.Fatalf("create-only PUT of an existing key: %d %s", code, b)
	}
	if code, b, _ := call("PUT", "http://"+f.api+"/v1/kv/k1?prev=v1", "w1"); code != 200 {
		t.Fatalf("CAS by value: %d %s", code, b)
	}
	c.mustRead("k1", "w1")

	// SIGKILL the leader: a new leader accepts writes; nothing acknowledged
	// is lost.
	acked := map[string]string{"k1": "w1", "k2": "v2", "k3": "v3"}
	for i := range 20 {
		k := fmt.Sprintf("pre%d", i)
		c.put(f, k, k)
		acked[k] = k
	}
	next := c.killLeader(leader)
	for i := range 10 {
		k := fmt.Sprintf("post%d", i)
		c.put(c.other(nil), k, k)
		acked[k] = k
	}
	for k, v := range acked {
		if got, code := c.get(next, k, "lease"); got != v {
			t.Fatalf("after failover %s = %q (status %d), want %q", k, got, code, v)
		}
	}
	c.start(leader) // back from its data directory
	c.ready(leader)
	// A restarted process grants nothing for (1+ρ)·MaxLease (the restart
	// quarantine, ~0.42s by default): until then, with the leader about to
	// leave, no process could hold a quorum. Let it pass before the
	// graceful handover, which must then show no error at all.
	time.Sleep(time.Second)
	// SIGTERM the leader while a client writes through another process:
	// leadership is handed over and the client sees no error.
	leader = c.leader()
	f = c.other(leader)
	stopped := make(chan error, 1)
	go func() { stopped <- c.stop(leader, syscall.SIGTERM) }()
	for i := 0; ; i++ {
		k := fmt.Sprintf("term%d", i)
		code, b, err := call("PUT", "http://"+f.api+"/v1/kv/"+k, k)
		switch {
		case err == nil && code == 200:
			acked[k] = k
		default:
			t.Fatalf("write %s during the leader's SIGTERM: %d %s %v", k, code, b, err)
		}
		select {
		case err := <-stopped:
			if err != nil {
				t.Fatal(err)
			}
		default:
			continue
		}
		t.Logf("%d writes during the SIGTERM handover, all acknowledged", i+1)
		break
	}
	if c.leader() == leader {
		t.Fatal("the stopped process still leads")
	}
	c.start(leader)
	c.ready(leader)

	// Restart every process from its data directory: all data is there.
	for _, p := range c.procs {
		c.mustStop(p, syscall.SIGTERM)
	}
	for _, p := range c.procs {
		c.start(p)
	}
	for _, p := range c.procs {
		c.ready(p)
	}
	for k, v := range acked {
		c.mustRead(k, v)
	}
}
