package jepsen

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edictlog/edictlog/jepsen/check"
	"github.com/edictlog/edictlog/jepsen/cluster"
)

// binary is edictkv with the fault hooks, built once for the scenarios.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "jepsen-bin-")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "edictkv")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	err = cluster.Build(ctx, "..", binary)
	cancel()
	if err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
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
	o.Binary, o.Mode, o.Out = binary, mode(t), t.TempDir()
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
	return res
}

// Register histories under partitions, kills, pauses and clock drift
// within ρ are linearizable at the lease level.
func TestJepsenRegister(t *testing.T) {
	res := scenario(t, Options{Workload: "register", Nemeses: []string{"partition", "kill", "pause", "clock"}})
	require.NotNil(t, res.Register)
	assert.Equal(t, check.Valid, res.Valid, "anomaly: %s", res.Register.Anomaly)
	assert.Positive(t, res.Register.Checked)
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
