package jepsen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/edictlog/edictlog/jepsen/cluster"
	"github.com/edictlog/edictlog/jepsen/history"
	"github.com/edictlog/edictlog/jepsen/workload"
)

// testCluster is the cluster as the nemesis and the workloads see it: it
// tracks the members (a replacement changes them) and every fault still in
// force, so that healAll can undo them all.
type testCluster struct {
	c    *cluster.Cluster
	http *http.Client

	mu      sync.Mutex
	members []int
	down    map[int]bool // killed
	paused  map[int]bool
	rated   map[int]bool // clock rate not 1
	delayed map[int]bool // a delay fault set
	slowed  map[int]bool // an fsync delay set
	ioLimit map[int]bool // the kernel's I/O throttle in force
	cpuLim  map[int]bool // the kernel's CPU quota in force
	hog     bool         // the disk hog runs
}

func startCluster(ctx context.Context, o Options) (*testCluster, error) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if o.ClusterLogging != nil {
		logger = slog.New(slog.NewTextHandler(o.ClusterLogging, nil))
	}
	extra := []string{"--rho", fmt.Sprint(o.Rho)}
	if o.SnapshotEvery > 0 {
		extra = append(extra, "--snapshot-every", fmt.Sprint(o.SnapshotEvery))
	}
	c, err := cluster.Start(ctx, cluster.Config{N: o.Nodes, Binary: o.Binary, Dir: filepath.Join(o.Out, "nodes"),
		Mode: cluster.Mode(o.Mode), Lease: o.Lease, GRPC: o.Workload == "set", Logger: logger,
		ExtraArgs: extra})
	if err != nil {
		return nil, fmt.Errorf("jepsen: start cluster: %w", err)
	}
	tc := &testCluster{c: c, http: &http.Client{Timeout: 10 * time.Second},
		down: map[int]bool{}, paused: map[int]bool{}, rated: map[int]bool{}, delayed: map[int]bool{},
		slowed: map[int]bool{}, ioLimit: map[int]bool{}, cpuLim: map[int]bool{}}
	for i := 1; i <= o.Nodes; i++ {
		tc.members = append(tc.members, i)
	}
	return tc, nil
}

func (t *testCluster) close() { _ = t.c.Close() }

func (t *testCluster) leaderOrZero(ctx context.Context) int {
	l, _ := t.c.Leader(ctx)
	return l
}

// targets are the members' HTTP addresses: clients talk to any of them,
// up or not.
func (t *testCluster) targets() []workload.Target {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []workload.Target
	for _, id := range t.members {
		if n := t.c.Node(id); n != nil {
			out = append(out, workload.Target{ID: id, Addr: n.HTTPAddr})
		}
	}
	return out
}

func (t *testCluster) grpcTargets() []workload.GRPCTarget {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []workload.GRPCTarget
	for _, id := range t.members {
		if n := t.c.Node(id); n != nil {
			out = append(out, workload.GRPCTarget{ID: id, Addr: n.GRPCAddr})
		}
	}
	return out
}

// Members implements nemesis.Cluster.
func (t *testCluster) Members() []int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.members)
}

func (t *testCluster) Block(b map[int][]int) error { return t.c.Block(b) }

func (t *testCluster) Kill(id int) error {
	t.set(t.down, id, true)
	return t.c.Kill(id)
}

func (t *testCluster) Restart(id int) error {
	err := t.c.Restart(id)
	if err == nil {
		t.set(t.down, id, false)
	}
	return err
}

func (t *testCluster) Pause(id int) error {
	t.set(t.paused, id, true)
	return t.c.Pause(id)
}

func (t *testCluster) Resume(id int) error {
	err := t.c.Resume(id)
	if err == nil {
		t.set(t.paused, id, false)
	}
	return err
}

func (t *testCluster) SetClockRate(id int, rate float64) error {
	t.set(t.rated, id, rate != 1)
	return t.c.SetClockRate(id, rate)
}

func (t *testCluster) Leader(ctx context.Context) (int, error) { return t.c.Leader(ctx) }

// Bounce implements nemesis.Cluster. A process that did not start again
// counts as down, so that healAll restarts it.
func (t *testCluster) Bounce(id int) (time.Duration, error) {
	d, err := t.c.Bounce(id)
	if err != nil {
		t.set(t.down, id, true)
	}
	return d, err
}

func (t *testCluster) WaitUp(ctx context.Context, id int) error { return t.c.WaitUp(ctx, id) }

func (t *testCluster) SetDelay(id int, d cluster.Delay) error {
	t.set(t.delayed, id, d != cluster.Delay{})
	return t.c.SetDelay(id, d)
}

func (t *testCluster) SetFsync(id int, d cluster.Fsync) error {
	t.set(t.slowed, id, d != cluster.Fsync{})
	return t.c.SetFsync(id, d)
}

// ThrottleIO implements nemesis.Cluster. It counts as in force even when
// it failed half way, so that healAll lifts whatever it left.
func (t *testCluster) ThrottleIO(id int, l cluster.IOLimit) (string, error) {
	t.set(t.ioLimit, id, true)
	return t.c.ThrottleIO(id, l)
}

func (t *testCluster) UnthrottleIO(id int) error {
	err := t.c.UnthrottleIO(id)
	if err == nil {
		t.set(t.ioLimit, id, false)
	}
	return err
}

func (t *testCluster) LimitCPU(id int, share float64) (string, error) {
	t.set(t.cpuLim, id, true)
	return t.c.LimitCPU(id, share)
}

func (t *testCluster) UnlimitCPU(id int) error {
	err := t.c.UnlimitCPU(id)
	if err == nil {
		t.set(t.cpuLim, id, false)
	}
	return err
}

// Stall implements nemesis.Cluster; it leaves nothing to heal (the process
// is continued before it returns).
func (t *testCluster) Stall(ctx context.Context, id int, d time.Duration) error {
	return t.c.Stall(ctx, id, d)
}

func (t *testCluster) StartDiskHog(spec cluster.DiskHogSpec) error {
	t.mu.Lock()
	t.hog = true
	t.mu.Unlock()
	return t.c.StartDiskHog(spec)
}

func (t *testCluster) StopDiskHog() (cluster.DiskHogStats, error) {
	st, err := t.c.StopDiskHog()
	t.mu.Lock()
	t.hog = false
	t.mu.Unlock()
	return st, err
}

func (t *testCluster) Metrics(ctx context.Context, id int) (map[string]float64, error) {
	return t.c.Metrics(ctx, id)
}

func (t *testCluster) HookStats(ctx context.Context, id int) (cluster.HookStats, error) {
	return t.c.HookStats(ctx, id)
}

func (t *testCluster) Status(ctx context.Context, id int) (cluster.Status, error) {
	return t.c.Status(ctx, id)
}

func (t *testCluster) set(m map[int]bool, id int, on bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if on {
		m[id] = true
	} else {
		delete(m, id)
	}
}

// admin posts an admin request, to the leader first and then to the other
// members (which forward it), until one accepts it or ctx ends. A 409 is
// final unless it says a membership change is still in progress.
func (t *testCluster) admin(ctx context.Context, path string, body any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	var last error
	for ctx.Err() == nil {
		targets := t.targets()
		if l, err := t.c.Leader(ctx); err == nil {
			slices.SortStableFunc(targets, func(a, b workload.Target) int { return boolInt(b.ID == l) - boolInt(a.ID == l) })
		}
		for _, tg := range targets {
			code, msg, err := t.post(ctx, "http://"+tg.Addr+path, b)
			switch {
			case err != nil:
				last = err
				continue
			case code == http.StatusOK:
				return nil
			}
			last = fmt.Errorf("%s: %d %s", path, code, msg)
			if code == http.StatusBadRequest || code == http.StatusConflict && !bytes.Contains(msg, []byte("in progress")) {
				return last // refused: retrying will not help
			}
			break // the leader answered: ask it again shortly
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
	return errors.Join(last, ctx.Err())
}

func (t *testCluster) post(ctx context.Context, url string, body []byte) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	resp, err := t.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	return resp.StatusCode, bytes.TrimSpace(msg), nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// StartJoiner implements nemesis.Cluster: a new process (the next free
// id) that joins the cluster, up but not yet added.
func (t *testCluster) StartJoiner(ctx context.Context) (int, error) {
	n, err := t.c.AddProcess(ctx)
	if n == nil {
		return 0, err
	}
	return n.ID, err
}

// AddLearner implements nemesis.Cluster: the leader registers the
// process's HTTP address and adds it as a learner.
func (t *testCluster) AddLearner(ctx context.Context, id int) error {
	n := t.c.Node(id)
	if n == nil {
		return fmt.Errorf("no node %d", id)
	}
	err := t.admin(ctx, "/v1/cluster/learners", map[string]any{"id": id, "raft_addr": n.RaftAddr, "http_addr": n.HTTPAddr})
	if err != nil && ctx.Err() == nil {
		// An earlier attempt may have gone through before its answer
		// was lost.
		if _, learners, verr := t.view(ctx); verr == nil && slices.Contains(learners, id) {
			return nil
		}
	}
	return err
}

// Promote implements nemesis.Cluster: promote a learner to a member (a
// new epoch). The leader refuses a learner far behind, so it asks again
// until the promotion is accepted, or ctx ends.
func (t *testCluster) Promote(ctx context.Context, id int) error {
	for {
		err := t.admin(ctx, "/v1/cluster/promote", map[string]any{"id": id})
		if err == nil || ctx.Err() == nil && t.isMember(ctx, id) {
			t.mu.Lock()
			if !slices.Contains(t.members, id) {
				t.members = append(t.members, id)
			}
			t.mu.Unlock()
			return nil
		}
		if ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Remove implements nemesis.Cluster: take a member (or learner) out of
// the cluster through the leader, then stop its process. A removed
// process is no longer a client target, and nothing restarts it.
func (t *testCluster) Remove(ctx context.Context, id int) error {
	err := t.admin(ctx, "/v1/cluster/remove", map[string]any{"id": id})
	if err != nil && ctx.Err() == nil {
		// An earlier attempt may have gone through before its answer
		// was lost.
		if members, learners, verr := t.view(ctx); verr == nil && !slices.Contains(members, id) && !slices.Contains(learners, id) {
			err = nil
		}
	}
	if err != nil {
		return err
	}
	t.forget(id)
	if t.c.PID(id) != 0 {
		return t.c.Kill(id)
	}
	return nil
}

// forget drops id from the members and from every fault record: healAll
// must not restart a removed process.
func (t *testCluster) forget(id int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.members = slices.DeleteFunc(t.members, func(m int) bool { return m == id })
	delete(t.down, id)
	delete(t.paused, id)
	delete(t.rated, id)
	delete(t.delayed, id)
	delete(t.slowed, id)
	delete(t.ioLimit, id)
	delete(t.cpuLim, id)
}

// Wipe implements nemesis.Cluster: a killed node loses its disk. It stays
// down: it must not come back as the member it was.
func (t *testCluster) Wipe(id int) error {
	if err := t.c.Wipe(id); err != nil {
		return err
	}
	t.mu.Lock()
	delete(t.down, id) // not to be restarted by healAll
	t.mu.Unlock()
	return nil
}

// Rejoin implements nemesis.Cluster: start a wiped, removed node again as
// a process that joins (same id and address, empty disk).
func (t *testCluster) Rejoin(ctx context.Context, id int) error { return t.c.Rejoin(ctx, id) }

// SyncMembers implements nemesis.Cluster: after a change that failed (its
// outcome unknown), take the members from the leader's view.
func (t *testCluster) SyncMembers(ctx context.Context) error {
	members, _, err := t.view(ctx)
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.members = slices.Clone(members)
	return nil
}

// view is the members and learners as the leader reports them (asking
// for up to 5 s until a node leads).
func (t *testCluster) view(ctx context.Context) (members, learners []int, err error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	l, err := t.c.WaitLeader(ctx)
	if err != nil {
		return nil, nil, err
	}
	st, err := t.c.Status(ctx, l)
	if err != nil {
		return nil, nil, err
	}
	if len(st.Members) == 0 {
		return nil, nil, fmt.Errorf("leader %d reports no members", l)
	}
	return st.Members, st.Learners, nil
}

func (t *testCluster) isMember(ctx context.Context, id int) bool {
	members, _, err := t.view(ctx)
	return err == nil && slices.Contains(members, id)
}

// Transfer implements nemesis.Cluster.
func (t *testCluster) Transfer(ctx context.Context, to int) error {
	return t.admin(ctx, "/v1/cluster/transfer", map[string]any{"id": to})
}

// healAll undoes every fault still in force: the network, paused and
// killed processes, clock rates, delays, slow fsyncs, the kernel's
// throttles, the disk hog.
func (t *testCluster) healAll(ctx context.Context) error {
	t.mu.Lock()
	paused, down, rated, delayed := keys(t.paused), keys(t.down), keys(t.rated), keys(t.delayed)
	slowed, ioLimit, cpuLim, hog := keys(t.slowed), keys(t.ioLimit), keys(t.cpuLim), t.hog
	t.mu.Unlock()
	errs := []error{t.c.Heal()}
	if hog {
		_, err := t.StopDiskHog()
		errs = append(errs, err)
	}
	// The throttles first: a process held to a sliver of CPU would be
	// slow to answer the rest.
	for _, id := range cpuLim {
		errs = append(errs, t.UnlimitCPU(id))
	}
	for _, id := range ioLimit {
		errs = append(errs, t.UnthrottleIO(id))
	}
	for _, id := range slowed {
		errs = append(errs, t.SetFsync(id, cluster.Fsync{}))
	}
	for _, id := range paused {
		errs = append(errs, t.Resume(id))
	}
	for _, id := range down {
		errs = append(errs, t.Restart(id))
	}
	for _, id := range rated {
		errs = append(errs, t.SetClockRate(id, 1))
	}
	for _, id := range delayed {
		errs = append(errs, t.SetDelay(id, cluster.Delay{}))
	}
	return errors.Join(errs...)
}

func keys(m map[int]bool) []int {
	var out []int
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// waitConverged waits until a leader is known and every member has
// applied what the leader had committed when asked.
func (t *testCluster) waitConverged(ctx context.Context) error {
	l, err := t.c.WaitLeader(ctx)
	if err != nil {
		return fmt.Errorf("no leader after healing: %w", err)
	}
	st, err := t.c.Status(ctx, l)
	if err != nil {
		return err
	}
	for _, id := range t.Members() {
		for {
			s, err := t.c.Status(ctx, id)
			if err == nil && s.Applied >= st.Commit {
				break
			}
			if ctx.Err() != nil {
				return fmt.Errorf("node %d did not catch up to %d: %v", id, st.Commit, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}

// monitorEvery is how often the monitor asks who leads.
const monitorEvery = 100 * time.Millisecond

// monitor asks every live node's status who leads (cluster.Leader) every
// monitorEvery until ctx ends, and records what it saw as
// history.FLeader events of history.MonitorProcess: each change of
// leader, and every poll that finds none (so that the checker knows the
// cluster was still leaderless after a client operation proved a leader
// for a moment).
func (t *testCluster) monitor(ctx context.Context, rec *history.Recorder, done chan<- struct{}) {
	defer close(done)
	tick := time.NewTicker(monitorEvery)
	defer tick.Stop()
	last := -1
	for {
		pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		l, err := t.c.Leader(pctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			l = 0
		}
		if l == 0 || l != last {
			op := history.Op{Process: history.MonitorProcess, Type: history.Info, F: history.FLeader, Node: l}
			if err != nil {
				op.Error = err.Error()
			}
			rec.Add(op)
		}
		last = l
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// readyProbeKey is the key a member is asked to read at the follower
// level to show it can serve (absent: 404 is an answer too).
const readyProbeKey = "jepsen-ready-probe"

// waitReady waits up to limit for every member to be ready: it answers,
// knows a leader, has applied what it knows committed (its /v1/status
// says ready) and answers a follower read. Each member's outcome is
// recorded as a history.FReady event of history.MonitorProcess: OK when
// it became ready, Fail with the last reason when the harness gave up.
// It reports whether all were ready.
func (t *testCluster) waitReady(ctx context.Context, rec *history.Recorder, limit time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	members := t.Members()
	ok := make([]bool, len(members))
	var wg sync.WaitGroup
	for i, id := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			why := "never polled"
			for {
				st, err := t.c.Status(ctx, id)
				switch {
				case err != nil:
					why = "status: " + err.Error()
				case st.Leader == 0:
					why = "no leader known"
				case !st.Ready:
					why = fmt.Sprintf("not ready: applied %d, commit %d", st.Applied, st.Commit)
				default:
					why = t.probeRead(ctx, id)
					if why == "" {
						rec.Add(history.Op{Process: history.MonitorProcess, Type: history.OK, F: history.FReady, Node: id,
							Detail: fmt.Sprintf("leader %d, applied %d", st.Leader, st.Applied)})
						ok[i] = true
						return
					}
				}
				select {
				case <-ctx.Done():
					rec.Add(history.Op{Process: history.MonitorProcess, Type: history.Fail, F: history.FReady, Node: id,
						Error: fmt.Sprintf("not ready %v after the heal: %s", limit, why)})
					return
				case <-time.After(100 * time.Millisecond):
				}
			}
		}()
	}
	wg.Wait()
	return !slices.Contains(ok, false)
}

// probeRead reads readyProbeKey at the follower level from member id: ""
// if it answered (200 or 404), else why not.
func (t *testCluster) probeRead(ctx context.Context, id int) string {
	n := t.c.Node(id)
	if n == nil {
		return "no such node"
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.URL()+"/v1/kv/"+readyProbeKey+"?consistency=follower", nil)
	if err != nil {
		return err.Error()
	}
	resp, err := t.http.Do(req)
	if err != nil {
		return "follower read: " + err.Error()
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusNotFound {
		return fmt.Sprintf("follower read: %d %s", resp.StatusCode, bytes.TrimSpace(msg))
	}
	return ""
}
