package jepsen

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edictlog/edictlog/cmd/edictkv/kvjson"
	"github.com/edictlog/edictlog/jepsen/check"
	"github.com/edictlog/edictlog/jepsen/cluster"
)

// The edictkv with the fault hooks, built once, on first use: the unit
// tests of this package need none.
var (
	binaryOnce sync.Once
	binaryPath string
	binaryDir  string
	binaryErr  error
)

func edictkv(t *testing.T) string {
	t.Helper()
	binaryOnce.Do(func() {
		binaryDir, binaryErr = os.MkdirTemp("", "jepsen-bin-")
		if binaryErr != nil {
			return
		}
		binaryPath = filepath.Join(binaryDir, "edictkv")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		binaryErr = cluster.Build(ctx, "..", binaryPath)
		cancel()
	})
	require.NoError(t, binaryErr)
	return binaryPath
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binaryDir != "" {
		os.RemoveAll(binaryDir)
	}
	os.Exit(code)
}

// mode is netns as root (CI), else portable.
func mode(t *testing.T) string {
	if os.Geteuid() == 0 {
		if err := exec.Command("ip", "netns", "list").Run(); err == nil {
			return string(cluster.ModeNetns)
		}
		t.Log("root, but ip netns does not work here: portable mode")
	}
	return string(cluster.ModePortable)
}

func scenario(t *testing.T, o Options) Results {
	t.Helper()
	o.Binary, o.Mode, o.Out = edictkv(t), mode(t), t.TempDir()
	o.Time, o.Quiet, o.Hold, o.Seed = 30*time.Second, 2*time.Second, 4*time.Second, 1
	o.CheckTimeout = time.Minute
	if testing.Verbose() {
		o.Progress = os.Stderr
	}
	res, err := Run(context.Background(), o)
	require.NoError(t, err)
	for _, f := range []string{"history.jsonl", "results.json", "latency.png", "throughput.png"} {
		st, err := os.Stat(filepath.Join(o.Out, f))
		require.NoError(t, err, f)
		assert.Positive(t, st.Size(), f)
	}
	assert.NotEmpty(t, res.Faults, "the nemesis ran")
	t.Logf("%s mode: %d ok, %d fail, %d info, faults %d", o.Mode, res.Stats.Total.OK, res.Stats.Total.Fail, res.Stats.Total.Info, len(res.Faults))
	t.Logf("verdict %s; availability: %s", res.Verdict, res.Availability.Summary())
	for _, v := range res.Availability.Violations {
		t.Logf("unavailable: %s", v)
	}
	// Availability is part of correctness: a leader within the bound
	// after every fault, every member ready soon after the final heal.
	assert.Equal(t, check.Valid, res.Availability.Valid, "unavailable: %v", res.Availability.Violations)
	assert.Len(t, res.Availability.Ready, res.Nodes, "every member's readiness after the final heal")
	return res
}

// Register histories under partitions, kills, pauses and clock drift
// within ρ are linearizable at the lease level, and a node leads within
// the bound after every fault (as in every scenario).
func TestJepsenRegister(t *testing.T) {
	res := scenario(t, Options{Workload: "register", Nemeses: []string{"partition", "kill", "pause", "clock"}})
	require.NotNil(t, res.Register)
	assert.Equal(t, check.Valid, res.Valid, "anomaly: %s", res.Register.Anomaly)
	assert.Positive(t, res.Register.Checked)
}

// The log's hardest nemeses in one 30 s scenario: a member cut off until the
// log is compacted past it, then caught up by a snapshot held in flight
// (with --snapshot-every 128); granters killed and restarted within
// milliseconds; log messages held for seconds, duplicated and reordered.
// Snapshot-install goes first: its script takes the longest.
func TestJepsenSnapshotBounceDelay(t *testing.T) {
	res := scenario(t, Options{Workload: "register", Nemeses: []string{"snapshot-install", "bounce", "delay"}})
	require.NotNil(t, res.Register)
	assert.Equal(t, check.Valid, res.Valid, "anomaly: %s", res.Register.Anomaly)
	assert.Positive(t, res.Register.Checked)
	require.NotNil(t, res.Snapshots)
	assert.Positive(t, res.Snapshots.Installed, "a snapshot was installed: %+v", res.Snapshots)
	events := 0
	for _, e := range res.Nemesis {
		if e.F == "event" {
			events++
		}
	}
	assert.Positive(t, events, "the scripted nemeses recorded their steps")
}

// The gray failures in one 30 s scenario: slow fsyncs (and
// the kernel's I/O throttle where netns mode offers it), a writer beside
// the nodes on their disk, CPU starvation in SIGSTOP bursts. Safe, a
// leader within the bound after each, every member ready after the final
// heal; each fault's stop says what it cost the leader.
func TestJepsenGrayFailures(t *testing.T) {
	res := scenario(t, Options{Workload: "register", Nemeses: []string{"slow-disk", "disk-hog", "cpu-starve"}})
	require.NotNil(t, res.Register)
	assert.Equal(t, check.Valid, res.Valid, "anomaly: %s", res.Register.Anomaly)
	assert.Positive(t, res.Register.Checked)
	stopped := map[string]int{}
	for _, e := range res.Nemesis {
		if e.F == "stop" {
			assert.NotContains(t, e.Detail, "stop failed", "%s healed", e.Nemesis)
			assert.Contains(t, e.Detail, "during the fault, on the members: leases lost", e.Nemesis)
			stopped[e.Nemesis]++
			t.Logf("%s stopped: %s", e.Nemesis, e.Detail)
		}
	}
	for _, name := range []string{"slow-disk", "disk-hog", "cpu-starve"} {
		assert.Positive(t, stopped[name], "%s ran and stopped", name)
	}
}

// Killing nodes loses no acknowledged add.
func TestJepsenSetUnderKills(t *testing.T) {
	res := scenario(t, Options{Workload: "set", Nemeses: []string{"kill"}})
	require.NotNil(t, res.Set)
	assert.Equal(t, check.Valid, res.Valid)
	assert.Empty(t, res.Set.Lost)
	assert.Positive(t, res.Set.Acknowledged)
	assert.Equal(t, res.Nodes, res.Set.FinalReads)
}

// Under Fetzer and Cristian's election, a minority partition gets a local
// leader that edictkv reports as not authoritative (Nerio §10.3), and a
// stale read there says it was served in a minority partition; the
// majority's local leader is authoritative.
func TestMinorityPartitionLocalLeader(t *testing.T) {
	c, err := cluster.Start(context.Background(), cluster.Config{N: 5, Binary: edictkv(t), Dir: t.TempDir(),
		Mode: cluster.Mode(mode(t)), ExtraArgs: []string{"--detector", "fetzer"}})
	require.NoError(t, err)
	defer c.Close()
	call := func(method string, id int, path, body string) (*http.Response, []byte) {
		req, err := http.NewRequest(method, c.Node(id).URL()+path, strings.NewReader(body))
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp, b
	}
	require.Eventually(t, func() bool {
		resp, _ := call(http.MethodPut, 1, "/v1/kv/k", "v")
		return resp.StatusCode == http.StatusOK
	}, 20*time.Second, 100*time.Millisecond)
	require.Eventually(t, func() bool {
		resp, _ := call(http.MethodGet, 2, "/v1/kv/k?consistency=stale", "")
		return resp.StatusCode == http.StatusOK
	}, 20*time.Second, 50*time.Millisecond, "node 2 applies k")

	require.NoError(t, c.Partition([][]int{{1, 2}, {3, 4, 5}}))
	// The harness is a black-box client of edictkv's HTTP API: it reads
	// the answers into the API's public types (kvjson).
	headerPartition := kvjson.HeaderPartition
	status := func(id int) *kvjson.LocalLeaderJSON {
		_, b := call(http.MethodGet, id, "/v1/status", "")
		var st kvjson.StatusJSON
		require.NoError(t, json.Unmarshal(b, &st))
		return st.LocalLeader
	}
	require.Eventually(t, func() bool {
		minority, majority := status(2), status(3)
		return minority != nil && !minority.Authoritative && majority != nil && majority.Authoritative
	}, 20*time.Second, 100*time.Millisecond, "local leaders: minority %+v, majority %+v", status(2), status(3))
	assert.Subset(t, []uint64{1, 2}, status(2).Support, "the minority's leader has only the minority's support")

	resp, b := call(http.MethodGet, 2, "/v1/kv/k?consistency=stale", "")
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
	assert.Equal(t, "minority", resp.Header.Get(headerPartition))
	var g kvjson.GetResponse
	require.NoError(t, json.Unmarshal(b, &g))
	require.NotNil(t, g.LocalLeader)
	assert.False(t, g.LocalLeader.Authoritative)
	resp, _ = call(http.MethodGet, 3, "/v1/kv/k?consistency=stale", "")
	assert.Empty(t, resp.Header.Get(headerPartition), "the majority's reads are not marked")
}
