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
	"strings"
	"sync"
	"time"

	"github.com/edictlog/edictlog/cmd/edictkv/kvjson"
	"github.com/edictlog/edictlog/jepsen/cluster"
	"github.com/edictlog/edictlog/jepsen/history"
	"github.com/edictlog/edictlog/jepsen/nemesis"
	"github.com/edictlog/edictlog/jepsen/workload"
)

// testCluster is the cluster as the nemesis and the workloads see it: it
// tracks the members (a replacement changes them) and every fault still in
// force, so that healAll can undo them all.
type testCluster struct {
	c    *cluster.Cluster
	http *http.Client

	// startLimit is how long a restarted process may run without
	// answering before it counts as not started.
	startLimit time.Duration
	logf       func(format string, args ...any)

	mu      sync.Mutex
	rec     *history.Recorder // where process failures go (nil until the history begins)
	members []int
	down    map[int]bool // killed, or exited on its own: to be restarted
	// failed are the processes that could not start (exited before they
	// answered, or did not answer within startLimit), and why: the run is
	// invalid already, they count as not live, and only the final heal
	// tries them again.
	failed  map[int]string
	removed map[int]bool // taken out of the cluster: never restarted
	blocked bool         // a partition may be in force
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
	tc := newTestCluster(o.progress)
	c, err := cluster.Start(ctx, cluster.Config{N: o.Nodes, Binary: o.Binary, Dir: filepath.Join(o.Out, "nodes"),
		Mode: cluster.Mode(o.Mode), Lease: o.Lease, GRPC: o.Workload == "set" || o.Workload == "watch", Logger: logger,
		ExtraArgs: extra, OnExit: tc.exited})
	if err != nil {
		return nil, fmt.Errorf("jepsen: start cluster: %w", err)
	}
	tc.c = c
	for i := 1; i <= o.Nodes; i++ {
		tc.members = append(tc.members, i)
	}
	return tc, nil
}

// startLimit is how long a restarted process may take to answer HTTP: a
// node restarts in well under a second on this machine, slow disk or not.
const startLimit = 15 * time.Second

func newTestCluster(logf func(string, ...any)) *testCluster {
	return &testCluster{http: &http.Client{Timeout: 10 * time.Second}, startLimit: startLimit, logf: logf,
		down: map[int]bool{}, failed: map[int]string{}, removed: map[int]bool{}, paused: map[int]bool{}, rated: map[int]bool{},
		delayed: map[int]bool{}, slowed: map[int]bool{}, ioLimit: map[int]bool{}, cpuLim: map[int]bool{}}
}

// record sends process failures to rec from now on.
func (t *testCluster) record(rec *history.Recorder) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.rec = rec
}

// exited is cluster.Config.OnExit: a process exited without the harness
// killing it. It could not start (it never answered), or it crashed:
// either way the product's failure, recorded for the checker
// (check.Processes). The node is down; one that crashed is restarted
// with the next heal, one that could not start only by the final heal.
func (t *testCluster) exited(e cluster.Exit) {
	f := history.FCrashed
	if !e.Answered {
		f = history.FNotStarted
	}
	t.mu.Lock()
	if !t.removed[e.ID] {
		t.down[e.ID] = true
		if !e.Answered {
			t.failed[e.ID] = e.String()
		}
	}
	rec := t.rec
	t.mu.Unlock()
	if rec != nil {
		rec.Add(history.Op{Process: history.MonitorProcess, Type: history.Fail, F: f, Node: e.ID, Error: e.Detail()})
	}
	if t.logf != nil {
		t.logf("%s", e)
	}
}

// startFailed sorts out a start that returned err after took: a process
// that exited is exited's (already recorded); one that ran without
// answering for the whole startLimit could not start, and is recorded
// here. Anything else (the harness could not spawn it, the caller's time
// was up) is no failure of the node's.
func (t *testCluster) startFailed(id int, err error, took time.Duration) {
	if !errors.Is(err, cluster.ErrNoAnswer) || took < t.startLimit {
		return
	}
	why := fmt.Sprintf("its process ran without answering HTTP for %v after it was started: %v", took.Round(time.Millisecond), err)
	t.mu.Lock()
	t.failed[id] = why
	rec := t.rec
	t.mu.Unlock()
	if rec != nil {
		rec.Add(history.Op{Process: history.MonitorProcess, Type: history.Fail, F: history.FNotStarted, Node: id, Error: why})
	}
	if t.logf != nil {
		t.logf("node %d could not start: %s", id, why)
	}
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

// Live implements nemesis.Cluster: the processes (members or not) that
// run, are not paused, and have not failed to start.
func (t *testCluster) Live() []int {
	var out []int
	for _, n := range t.c.Nodes() {
		if t.c.PID(n.ID) == 0 {
			continue
		}
		t.mu.Lock()
		live := !t.paused[n.ID] && t.failed[n.ID] == "" && !t.removed[n.ID]
		t.mu.Unlock()
		if live {
			out = append(out, n.ID)
		}
	}
	return out
}

// Block implements nemesis.Cluster. A partition counts as in force even
// when applying it failed part way, so that the heal lifts what it left.
func (t *testCluster) Block(b map[int][]int) error {
	t.mu.Lock()
	if len(b) > 0 {
		t.blocked = true
	}
	t.mu.Unlock()
	err := t.c.Block(b)
	if len(b) == 0 && err == nil {
		t.mu.Lock()
		t.blocked = false
		t.mu.Unlock()
	}
	return err
}

// Kill implements nemesis.Cluster: a member killed is to be restarted (a
// removed process is not).
func (t *testCluster) Kill(id int) error {
	err := t.c.Kill(id)
	if err == nil {
		t.mu.Lock()
		if !t.removed[id] {
			t.down[id] = true
		}
		t.mu.Unlock()
	}
	return err
}

// Restart implements nemesis.Cluster. A process that could not start is
// recorded as such (exited, startFailed) and stays down.
func (t *testCluster) Restart(id int) error {
	t0 := time.Now()
	var err error
	if t.c.PID(id) != 0 {
		// Started before but did not answer then: wait for it again.
		ctx, cancel := context.WithTimeout(context.Background(), t.startLimit)
		err = t.c.WaitUp(ctx, id)
		cancel()
	} else {
		err = t.c.Restart(id)
	}
	if err == nil {
		t.mu.Lock()
		delete(t.down, id)
		delete(t.failed, id)
		t.mu.Unlock()
		return nil
	}
	t.startFailed(id, err, time.Since(t0))
	return err
}

func (t *testCluster) Pause(id int) error {
	err := t.c.Pause(id)
	if err == nil {
		t.set(t.paused, id, true)
	}
	return err
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

// WaitUp implements nemesis.Cluster; a process that does not answer
// within startLimit could not start.
func (t *testCluster) WaitUp(ctx context.Context, id int) error {
	t0 := time.Now()
	err := t.c.WaitUp(ctx, id)
	if err != nil {
		t.startFailed(id, err, time.Since(t0))
	}
	return err
}

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
	err := t.c.StartDiskHog(spec)
	if err == nil {
		t.mu.Lock()
		t.hog = true
		t.mu.Unlock()
	}
	return err
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
// final unless it says a membership change is still in progress, and so is
// a 503 that says the change would lose the quorum.
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
			if code == http.StatusBadRequest || code == http.StatusConflict && !bytes.Contains(msg, []byte("in progress")) ||
				code == http.StatusServiceUnavailable && bytes.Contains(msg, []byte(kvjson.CodeQuorumLost)) {
				// Refused: retrying will not help. The nemesis reports a
				// refusal as the server's answer, not its own failure.
				return fmt.Errorf("%w: %s: %d %s", nemesis.ErrRefused, path, code, msg)
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
	t0 := time.Now()
	n, err := t.c.AddProcess(ctx)
	if n == nil {
		return 0, err
	}
	if err != nil {
		t.startFailed(n.ID, err, time.Since(t0))
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
	err := t.admin(ctx, "/v1/cluster/learners", kvjson.LearnerRequest{ID: uint64(id), RaftAddr: n.RaftAddr, HTTPAddr: n.HTTPAddr})
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
		err := t.admin(ctx, "/v1/cluster/promote", kvjson.MemberRequest{ID: uint64(id)})
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
	err := t.admin(ctx, "/v1/cluster/remove", kvjson.MemberRequest{ID: uint64(id)})
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
	t.removed[id] = true
	delete(t.down, id)
	delete(t.failed, id)
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
func (t *testCluster) Rejoin(ctx context.Context, id int) error {
	t.mu.Lock()
	delete(t.removed, id)
	t.mu.Unlock()
	t0 := time.Now()
	err := t.c.Rejoin(ctx, id)
	if err != nil {
		t.startFailed(id, err, time.Since(t0))
	}
	return err
}

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
	return t.admin(ctx, "/v1/cluster/transfer", kvjson.TransferRequest{ID: uint64(to)})
}

// HealLeftovers implements nemesis.Cluster: it undoes every fault still in
// force (the schedule calls it after each fault, whose own undo should
// have left nothing) and says what it undid. A process that could not
// start is left down: its failure is recorded, and only the final heal
// tries it again.
func (t *testCluster) HealLeftovers(ctx context.Context) (string, error) {
	return t.heal(ctx, false)
}

// healAll undoes every fault still in force, at the end of the test: the
// network, paused and killed processes (those that could not start
// before, too), clock rates, delays, slow fsyncs, the kernel's throttles,
// the disk hog. A process that cannot start is the product's failure,
// recorded as such, not an error of the heal's.
func (t *testCluster) healAll(ctx context.Context) (string, error) {
	return t.heal(ctx, true)
}

func (t *testCluster) heal(ctx context.Context, retryFailed bool) (string, error) {
	t.mu.Lock()
	paused, rated, delayed := keys(t.paused), keys(t.rated), keys(t.delayed)
	slowed, ioLimit, cpuLim, hog, blocked := keys(t.slowed), keys(t.ioLimit), keys(t.cpuLim), t.hog, t.blocked
	var down []int
	for _, id := range keys(t.down) {
		if t.failed[id] == "" || retryFailed {
			down = append(down, id)
		}
	}
	t.mu.Unlock()
	var did []string
	var errs []error
	undo := func(what string, ids []int, f func(int) error) {
		var done []int
		for _, id := range ids {
			if err := f(id); err != nil {
				errs = append(errs, err)
			} else {
				done = append(done, id)
			}
		}
		if len(done) > 0 {
			did = append(did, fmt.Sprintf("%s %v", what, done))
		}
	}
	if blocked {
		if err := t.Block(nil); err != nil {
			errs = append(errs, err)
		} else {
			did = append(did, "healed the network")
		}
	}
	if hog {
		if _, err := t.StopDiskHog(); err != nil {
			errs = append(errs, err)
		} else {
			did = append(did, "stopped the disk hog")
		}
	}
	// The throttles first: a process held to a sliver of CPU would be
	// slow to answer the rest.
	undo("lifted the CPU quota on", cpuLim, t.UnlimitCPU)
	undo("lifted the I/O throttle on", ioLimit, t.UnthrottleIO)
	undo("slow fsyncs off on", slowed, func(id int) error { return t.SetFsync(id, cluster.Fsync{}) })
	undo("resumed", paused, t.Resume)
	// All at once: one that hangs must not hold the others down.
	var restarted, notStarted []int
	restartErrs := make([]error, len(down))
	var wg sync.WaitGroup
	for i, id := range down {
		wg.Go(func() { restartErrs[i] = t.Restart(id) })
	}
	wg.Wait()
	for i, id := range down {
		switch err := restartErrs[i]; {
		case err == nil:
			restarted = append(restarted, id)
		case t.hasFailed(id):
			notStarted = append(notStarted, id) // recorded for the checker
		default:
			errs = append(errs, err)
		}
	}
	if len(restarted) > 0 {
		did = append(did, fmt.Sprintf("restarted %v", restarted))
	}
	if len(notStarted) > 0 {
		did = append(did, fmt.Sprintf("%v could not start", notStarted))
	}

	undo("clock rate 1 on", rated, func(id int) error { return t.SetClockRate(id, 1) })
	undo("message delay off on", delayed, func(id int) error { return t.SetDelay(id, cluster.Delay{}) })
	return strings.Join(did, "; "), errors.Join(errs...)
}

func (t *testCluster) hasFailed(id int) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.failed[id] != ""
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
