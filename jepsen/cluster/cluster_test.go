package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edictlog/edictlog/cmd/edictkv/kvjson"
)

// binary is the edictkv built once, with -tags jepsen, for every test.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "jepsen-cluster-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "edictkv")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	err = Build(ctx, "../..", binary)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func testLogger(t *testing.T) *slog.Logger {
	if os.Getenv("CLUSTER_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func start(t *testing.T, mode Mode, n int) *Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	c, err := Start(ctx, Config{N: n, Binary: binary, Dir: dir, Mode: mode, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			for _, nd := range c.Nodes() {
				b, _ := os.ReadFile(nd.LogPath)
				if len(b) > 4000 {
					b = b[len(b)-4000:]
				}
				t.Logf("tail of %s:\n%s", nd.LogPath, b)
			}
		}
	})
	return c
}

var client = &http.Client{Timeout: 5 * time.Second}

func put(t *testing.T, n *Node, key, value string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, n.URL()+"/v1/kv/"+key, strings.NewReader(value))
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT %s at node %d: %s %s", key, n.ID, resp.Status, b)
	}
}

// get reads key at n (stale read: what n has applied); "" if absent or on
// error.
func get(n *Node, key string) string {
	resp, err := client.Get(n.URL() + "/v1/kv/" + key + "?consistency=stale")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var g kvjson.GetResponse
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&g) != nil || g.Value == nil {
		return ""
	}
	return *g.Value
}

func eventually(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("timed out after %v waiting for %s", d, what)
}

func leader(t *testing.T, c *Cluster) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	id, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// partitionTest writes a key, partitions the leader away from the other
// two, sees a new leader among them take a write, and heals.
func partitionTest(t *testing.T, c *Cluster) {
	old := leader(t, c)
	put(t, c.Node(old), "k", "v1")
	var majority []int
	for _, n := range c.Nodes() {
		if n.ID != old {
			majority = append(majority, n.ID)
		}
	}
	if err := c.Partition([][]int{{old}, majority}); err != nil {
		t.Fatal(err)
	}
	var next int
	eventually(t, "a new leader in the majority", 15*time.Second, func() bool {
		st, err := c.Status(context.Background(), majority[0])
		if err != nil || st.Leader == 0 || st.Leader == old {
			return false
		}
		next = st.Leader
		st2, err := c.Status(context.Background(), next)
		return err == nil && st2.IsLeader
	})
	if !slices.Contains(majority, next) {
		t.Fatalf("leader %d not in the majority %v", next, majority)
	}
	eventually(t, "the old leader to step down", 15*time.Second, func() bool {
		st, err := c.Status(context.Background(), old)
		return err == nil && !st.IsLeader
	})
	put(t, c.Node(next), "k", "v2")
	if c.net != nil {
		// Kernel-level: the cut-off node cannot even forward a write.
		short := &http.Client{Timeout: 5 * time.Second}
		req, _ := http.NewRequest(http.MethodPut, c.Node(old).URL()+"/v1/kv/k", strings.NewReader("lost"))
		if resp, err := short.Do(req); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				t.Fatalf("a write through the cut-off node succeeded: %s", b)
			}
		}
	}
	if got := get(c.Node(old), "k"); got != "v1" {
		t.Fatalf("the cut-off node read %q, want v1", got)
	}
	if err := c.Heal(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the old leader to catch up after the heal", 15*time.Second, func() bool { return get(c.Node(old), "k") == "v2" })
}

// A process that exits on its own is told to OnExit, once, with how it
// exited and its log's last lines: one killed from outside the harness
// had answered (it crashed); one whose data directory is broken exits
// before it ever answers (it could not start), and Restart says so at
// once (ErrExited), without waiting out its limit. The harness's own
// kills are not reported.
func TestPortableExitsReported(t *testing.T) {
	exits := make(chan Exit, 10)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := Start(ctx, Config{N: 3, Binary: binary, Dir: t.TempDir(), Mode: ModePortable, Logger: testLogger(t),
		OnExit: func(e Exit) { exits <- e }})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ld := leader(t, c)
	victim := ld%3 + 1
	if err := c.Kill(victim); err != nil {
		t.Fatal(err)
	}
	if err := c.Restart(victim); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(c.PID(victim), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	e := <-exits
	if e.ID != victim || !e.Answered || !strings.Contains(e.Err, "killed") {
		t.Fatalf("crash reported as %+v", e)
	}
	// Its data directory becomes a file: it cannot start again.
	dir := c.Node(victim).DataDir
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, []byte("not a directory"), 0o600); err != nil {
		t.Fatal(err)
	}
	err = c.Restart(victim)
	if !errors.Is(err, ErrExited) {
		t.Fatalf("restart of a node that cannot start: %v", err)
	}
	e = <-exits
	if e.ID != victim || e.Answered || e.Tail == "" {
		t.Fatalf("failed start reported as %+v", e)
	}
	t.Logf("%v\n%s", err, e)
	if !strings.Contains(e.String(), fmt.Sprintf("node %d could not start", victim)) {
		t.Fatal(e.String())
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-exits:
		t.Fatalf("the harness's own kills reported: %+v", e)
	default:
	}
}

func TestPortablePartition(t *testing.T) {
	c := start(t, ModePortable, 3)
	partitionTest(t, c)
}

func TestPortableKillRestartPauseResume(t *testing.T) {
	c := start(t, ModePortable, 3)
	ld := leader(t, c)
	put(t, c.Node(ld), "a", "1")
	victim := ld%3 + 1 // a follower
	if err := c.Kill(victim); err != nil {
		t.Fatal(err)
	}
	if c.PID(victim) != 0 {
		t.Fatal("a killed node has a PID")
	}
	put(t, c.Node(leader(t, c)), "a", "2")
	if err := c.Restart(victim); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the restarted node to catch up", 15*time.Second, func() bool { return get(c.Node(victim), "a") == "2" })

	// Pause the leader: another takes over; resumed, it follows.
	ld = leader(t, c)
	if err := c.Pause(ld); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a new leader while the old one is paused", 15*time.Second, func() bool {
		id, err := c.Leader(context.Background())
		return err == nil && id != ld
	})
	put(t, c.Node(leader(t, c)), "a", "3")
	if err := c.Resume(ld); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the resumed node to catch up", 15*time.Second, func() bool { return get(c.Node(ld), "a") == "3" })

	// Clock rate: set and read back.
	if err := c.SetClockRate(victim, 1.5); err != nil {
		t.Fatal(err)
	}
	resp, err := client.Get(c.Node(victim).URL() + "/debug/jepsen/faults")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		ClockRate float64 `json:"clock_rate"`
	}
	err = json.NewDecoder(resp.Body).Decode(&f)
	resp.Body.Close()
	if err != nil || f.ClockRate != 1.5 {
		t.Fatalf("clock rate read back %v (%v)", f.ClockRate, err)
	}
}

func TestPortableAddProcess(t *testing.T) {
	c := start(t, ModePortable, 3)
	n, err := c.AddProcess(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if n.ID != 4 || len(c.Nodes()) != 4 {
		t.Fatalf("added node %d; %d nodes", n.ID, len(c.Nodes()))
	}
	ld := c.Node(leader(t, c))
	body := fmt.Sprintf(`{"id":%d,"raft_addr":%q,"http_addr":%q}`, n.ID, n.RaftAddr, n.HTTPAddr)
	resp, err := client.Post(ld.URL()+"/v1/cluster/learners", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("add learner: %s %s", resp.Status, b)
	}
	put(t, ld, "x", "y")
	eventually(t, "the learner to catch up", 15*time.Second, func() bool { return get(n, "x") == "y" })
}

// admin posts an admin request to node n and fails the test unless it is
// accepted.
func admin(t *testing.T, n *Node, path, body string) {
	t.Helper()
	resp, err := client.Post(n.URL()+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: %s %s", path, body, resp.Status, b)
	}
}

// A member loses its disk: Wipe empties its data directory, the cluster
// removes it, and Rejoin starts it on the same address as a joining
// process, which the cluster adds back and which catches up from empty.
func TestPortableWipeAndRejoin(t *testing.T) {
	c := start(t, ModePortable, 3)
	ld := leader(t, c)
	put(t, c.Node(ld), "a", "1")
	victim := ld%3 + 1
	n := c.Node(victim)
	eventually(t, "the victim to apply a", 15*time.Second, func() bool { return get(n, "a") == "1" })
	if err := c.Wipe(victim); err == nil {
		t.Fatal("wiped a running node")
	}
	if err := c.Kill(victim); err != nil {
		t.Fatal(err)
	}
	if err := c.Wipe(victim); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(n.DataDir); !os.IsNotExist(err) {
		t.Fatalf("the data directory is still there: %v", err)
	}
	admin(t, c.Node(ld), "/v1/cluster/remove", fmt.Sprintf(`{"id":%d}`, victim))
	put(t, c.Node(leader(t, c)), "a", "2")
	if err := c.Rejoin(context.Background(), victim); err != nil {
		t.Fatal(err)
	}
	st, err := c.Status(context.Background(), victim)
	if err != nil || slices.Contains(st.Members, victim) || st.Applied != 0 {
		t.Fatalf("the rejoining process, before it is added: %+v (%v)", st, err)
	}
	ld = leader(t, c)
	admin(t, c.Node(ld), "/v1/cluster/learners", fmt.Sprintf(`{"id":%d,"raft_addr":%q,"http_addr":%q}`, victim, n.RaftAddr, n.HTTPAddr))
	eventually(t, "the empty learner to catch up", 15*time.Second, func() bool { return get(n, "a") == "2" })
	admin(t, c.Node(ld), "/v1/cluster/promote", fmt.Sprintf(`{"id":%d}`, victim))
	eventually(t, "a member again", 15*time.Second, func() bool {
		st, err := c.Status(context.Background(), victim)
		return err == nil && slices.Contains(st.Members, victim) && st.Leader != 0
	})
}

// netnsOK skips the test unless netns mode can work here.
func netnsOK(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("netns mode needs root")
	}
	if out, err := exec.Command("ip", "netns", "list").CombinedOutput(); err != nil {
		t.Skipf("ip netns does not work here: %v %s", err, out)
	}
}

func TestNetnsPartition(t *testing.T) {
	netnsOK(t)
	c := start(t, ModeNetns, 3)
	// ip netns exec execs: the PID is edictkv's own.
	pid := c.PID(1)
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil || filepath.Base(exe) != "edictkv" {
		t.Fatalf("PID %d runs %q (%v), not edictkv", pid, exe, err)
	}
	partitionTest(t, c)
}

// TestNetnsPartitionRoutes runs the partition test with blackhole routes
// instead of nftables, after planting leftovers of a "crashed" run for
// Start to remove.
func TestNetnsPartitionRoutes(t *testing.T) {
	netnsOK(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, args := range [][]string{{"netns", "add", nsPrefix + "0badc0de-1"}, {"link", "add", bridgePrefix + "0badc0de", "type", "bridge"}} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v %s", args, err, out)
		}
	}
	c, err := Start(ctx, Config{N: 3, Binary: binary, Dir: t.TempDir(), Mode: ModeNetns, NoNftables: true, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if out, _ := exec.Command("ip", "netns", "list").CombinedOutput(); strings.Contains(string(out), "0badc0de") {
		t.Fatalf("a leftover namespace survived Start: %s", out)
	}
	if err := exec.Command("ip", "link", "show", bridgePrefix+"0badc0de").Run(); err == nil {
		t.Fatal("a leftover bridge survived Start")
	}
	partitionTest(t, c)
}

// A bounce restarts a node at once, with the delay in force given to the
// new process through the environment; the hook's counters and the
// snapshot count from the logs are readable.
func TestPortableBounceAndDelay(t *testing.T) {
	c := start(t, ModePortable, 3)
	ld := leader(t, c)
	put(t, c.Node(ld), "a", "1")
	victim := ld%3 + 1
	d := Delay{P: 0.5, MinMS: 10, MaxMS: 50, Dup: 0.5}
	if err := c.SetDelay(victim, d); err != nil {
		t.Fatal(err)
	}
	pid := c.PID(victim)
	down, err := c.Bounce(victim)
	if err != nil {
		t.Fatal(err)
	}
	if c.PID(victim) == pid || c.PID(victim) == 0 {
		t.Fatalf("after a bounce the pid is %d (was %d)", c.PID(victim), pid)
	}
	if down > 5*time.Second {
		t.Fatalf("a bounce kept the node down for %v", down)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := c.WaitUp(ctx, victim); err != nil {
		t.Fatal(err)
	}
	put(t, c.Node(leader(t, c)), "a", "2")
	eventually(t, "the bounced node to catch up under the delay", 15*time.Second, func() bool { return get(c.Node(victim), "a") == "2" })
	resp, err := client.Get(c.Node(victim).URL() + "/debug/jepsen/faults")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Delay Delay `json:"delay"`
	}
	err = json.NewDecoder(resp.Body).Decode(&f)
	resp.Body.Close()
	if err != nil || f.Delay != d {
		t.Fatalf("the restarted node's delay is %+v (%v), want %+v", f.Delay, err, d)
	}
	// Lease renewals and heartbeats keep coming: some are held and some
	// duplicated before long.
	var st HookStats
	eventually(t, "messages held and duplicated", 15*time.Second, func() bool {
		st, err = c.HookStats(ctx, victim)
		return err == nil && st.Held > 0 && st.Duplicated > 0
	})
	if err := c.SetDelay(victim, Delay{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SnapshotCounts(); err != nil {
		t.Fatal(err)
	}
}

// procState is the state letter of a process in /proc/PID/stat (T:
// stopped), "" if it cannot be read.
func procState(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	_, rest, ok := strings.Cut(string(b), ") ")
	if !ok || rest == "" {
		return ""
	}
	return rest[:1]
}

// The gray faults on real processes, in portable mode: the fsync delay
// (kept across a bounce), stalls that always end continued, the disk hog
// and its clean-up; the kernel's throttles say they need netns mode.
func TestPortableGrayFaults(t *testing.T) {
	c := start(t, ModePortable, 3)
	ld := leader(t, c)
	victim := ld%3 + 1
	if err := c.SetFsync(victim, Fsync{MinMS: 60, MaxMS: 80}); err != nil {
		t.Fatal(err)
	}
	put(t, c.Node(ld), "a", "1")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	eventually(t, "the victim's batches delayed", 15*time.Second, func() bool {
		st, err := c.HookStats(ctx, victim)
		return err == nil && st.FsyncDelayed > 0 && st.FsyncDelayMS >= 60*st.FsyncDelayed
	})
	if _, err := c.Bounce(victim); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitUp(ctx, victim); err != nil {
		t.Fatal(err)
	}
	resp, err := client.Get(c.Node(victim).URL() + "/debug/jepsen/faults")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Fsync Fsync `json:"fsync"`
	}
	err = json.NewDecoder(resp.Body).Decode(&f)
	resp.Body.Close()
	if err != nil || f.Fsync != (Fsync{MinMS: 60, MaxMS: 80}) {
		t.Fatalf("the restarted node's fsync delay is %+v (%v)", f.Fsync, err)
	}
	if err := c.SetFsync(victim, Fsync{}); err != nil {
		t.Fatal(err)
	}

	// A stall stops the process for its time and always continues it,
	// even when its context ends first.
	pid := c.PID(victim)
	stalled := make(chan string, 1)
	go func() {
		time.Sleep(60 * time.Millisecond)
		stalled <- procState(pid)
	}()
	if err := c.Stall(ctx, victim, 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if st := <-stalled; st != "T" {
		t.Fatalf("during a stall the process is in state %q, not stopped", st)
	}
	if st := procState(pid); st == "T" || st == "" {
		t.Fatalf("after a stall the process is in state %q", st)
	}
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	begin := time.Now()
	err = c.Stall(short, victim, time.Minute)
	cancelShort()
	if err != nil || time.Since(begin) > 5*time.Second || procState(pid) == "T" {
		t.Fatalf("a stall cut short by its context: %v after %v, state %q", err, time.Since(begin), procState(pid))
	}
	put(t, c.Node(leader(t, c)), "a", "2")
	eventually(t, "the stalled node to catch up", 15*time.Second, func() bool { return get(c.Node(victim), "a") == "2" })

	// The lease statistics the gray nemeses report are on /metrics.
	m, err := c.Metrics(ctx, victim)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{`edictkv_leases_lost_total{cause="suspended"}`, "edictkv_reigns_started_total", "edictkv_unsynced_entries"} {
		if _, ok := m[name]; !ok {
			t.Fatalf("no %s among node %d's %d metrics", name, victim, len(m))
		}
	}

	if _, err := c.ThrottleIO(victim, IOLimit{WriteIOPS: 10}); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("an I/O throttle in portable mode: %v", err)
	}
	if _, err := c.LimitCPU(victim, 0.1); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("a CPU quota in portable mode: %v", err)
	}

	// The disk hog writes and fsyncs whole files beside the nodes, and
	// leaves nothing behind.
	if err := c.StartDiskHog(DiskHogSpec{FileMB: 4}); err != nil {
		t.Fatal(err)
	}
	if err := c.StartDiskHog(DiskHogSpec{FileMB: 4}); err == nil {
		t.Fatal("two disk hogs at once")
	}
	time.Sleep(500 * time.Millisecond)
	put(t, c.Node(leader(t, c)), "a", "3")
	st, err := c.StopDiskHog()
	if err != nil {
		t.Fatal(err)
	}
	if st.Files == 0 || st.MB < 4 || st.FsyncMax <= 0 {
		t.Fatalf("the disk hog wrote %+v", st)
	}
	if _, err := os.Stat(st.Dir); !os.IsNotExist(err) {
		t.Fatalf("the disk hog's folder is still there: %v", err)
	}
	if _, err := c.StopDiskHog(); err == nil {
		t.Fatal("stopped a disk hog twice")
	}
}

// The kernel's throttles in netns mode: the process moves into a cgroup
// of its own and back out when the throttle is lifted, or when the
// cluster closes; the cluster keeps working under them.
func TestNetnsThrottles(t *testing.T) {
	netnsOK(t)
	c := start(t, ModeNetns, 3)
	ld := leader(t, c)
	inGroup := func(id int) bool {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", c.PID(id)))
		return err == nil && strings.Contains(string(b), cgroupPrefix)
	}
	desc, err := c.ThrottleIO(ld, IOLimit{WriteBPS: 4 << 20, WriteIOPS: 25})
	if errors.Is(err, ErrUnsupported) {
		t.Skipf("no I/O throttle here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("leader %d: %s", ld, desc)
	if !inGroup(ld) {
		t.Fatal("the throttled process is in no cgroup of the harness")
	}
	put(t, c.Node(ld), "a", "1")
	dir := c.Node(ld).cgroups["io"].dir
	if err := c.UnthrottleIO(ld); err != nil {
		t.Fatal(err)
	}
	if inGroup(ld) {
		t.Fatal("the process stayed in the throttle's cgroup")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the throttle's cgroup %s is still there: %v", dir, err)
	}

	victim := ld%3 + 1
	desc, err = c.LimitCPU(victim, 0.1)
	if errors.Is(err, ErrUnsupported) {
		t.Skipf("no CPU quota here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("node %d: %s", victim, desc)
	if !inGroup(victim) {
		t.Fatal("the limited process is in no cgroup of the harness")
	}
	put(t, c.Node(leader(t, c)), "a", "2")
	eventually(t, "the limited node to catch up", 15*time.Second, func() bool { return get(c.Node(victim), "a") == "2" })
	dir = c.Node(victim).cgroups["cpu"].dir
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("Close left the quota's cgroup %s: %v", dir, err)
	}
}
