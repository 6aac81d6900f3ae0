package jepsen

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edictlog/edictlog/jepsen/check"
	"github.com/edictlog/edictlog/jepsen/cluster"
	"github.com/edictlog/edictlog/jepsen/history"
)

// A node that cannot start again after a kill is the product's failure:
// the harness records it (no error of its own), the checker finds it, and
// the run is invalid — exit 1, not the 2 of a test that could not run —
// with the node and what its log said last in results.json. A crash of a
// process that had been serving counts the same. No cluster is needed:
// the exits are what cluster.Config.OnExit reports.
func TestNodeThatCannotStartIsInvalid(t *testing.T) {
	rec := history.NewRecorder(nil)
	tc := newTestCluster(nil)
	tc.members = []int{1, 2, 3}
	tc.record(rec)
	w := history.Int(1)
	rec.Add(history.Op{Process: 0, Type: history.Invoke, F: history.FWrite, Key: "k", Value: w})
	rec.Add(history.Op{Process: 0, Type: history.OK, F: history.FWrite, Key: "k", Value: w})
	rec.Add(history.Op{Process: history.NemesisProcess, Type: history.Info, F: history.FStart, Nemesis: "kill", Detail: "kill [3]"})
	tc.exited(cluster.Exit{ID: 3, Err: "exit status 1", Uptime: 80 * time.Millisecond,
		Tail: `edictkv serve: open snapshot: snap-000128: no such file or directory`})
	rec.Add(history.Op{Process: history.NemesisProcess, Type: history.Info, F: history.FStop, Nemesis: "kill"})
	assert.True(t, tc.down[3], "down: the final heal tries it again")
	assert.NotEmpty(t, tc.failed[3], "failed: not live, not retried before the final heal")

	o := Options{Workload: "register", Out: t.TempDir(), CheckTimeout: 10 * time.Second}
	require.NoError(t, o.defaults())
	res, err := o.check(rec.Ops(), nil)
	require.NoError(t, err)
	assert.Equal(t, check.Valid, res.Valid, "safe as far as the register checker sees")
	assert.Equal(t, check.Invalid, res.Processes.Valid)
	assert.Equal(t, VerdictInvalid, res.Verdict)
	assert.Equal(t, 1, ExitCode(res.Verdict))
	require.Len(t, res.Processes.Failures, 1)
	f := res.Processes.Failures[0]
	assert.Equal(t, 3, f.Node)
	assert.Equal(t, history.FNotStarted, f.Kind)
	assert.Contains(t, f.String(), "node 3 could not start")
	assert.Contains(t, f.String(), "during kill (kill [3])")
	assert.Contains(t, f.String(), "exit status 1")
	assert.Contains(t, f.String(), "snap-000128: no such file or directory", "the log's last words")

	b, err := os.ReadFile(filepath.Join(o.Out, "results.json"))
	require.NoError(t, err)
	var onDisk struct {
		Verdict   string              `json:"verdict"`
		Processes check.ProcessResult `json:"processes"`
	}
	require.NoError(t, json.Unmarshal(b, &onDisk))
	assert.Equal(t, VerdictInvalid, onDisk.Verdict)
	require.Len(t, onDisk.Processes.Failures, 1)
	assert.Equal(t, "not-started", onDisk.Processes.Failures[0].Kind)

	// A process that answered and then died on its own crashed.
	tc.exited(cluster.Exit{ID: 2, Err: "signal: aborted", Uptime: 12 * time.Second, Answered: true, Tail: "panic: wedge of unknown epoch"})
	assert.Empty(t, tc.failed[2], "a crashed process is restarted with the next heal")
	res, err = o.check(rec.Ops(), nil)
	require.NoError(t, err)
	require.Len(t, res.Processes.Failures, 2)
	assert.Equal(t, history.FCrashed, res.Processes.Failures[1].Kind)
	assert.Contains(t, res.Processes.Failures[1].String(), "node 2 crashed")
	assert.Equal(t, 1, ExitCode(res.Verdict))
}

// The verdicts and their exit statuses: a failed start beats an
// undecided safety check, a broken availability bound does not.
func TestVerdicts(t *testing.T) {
	V, I, U := check.Valid, check.Invalid, check.Unknown
	for _, c := range []struct {
		safety, processes, availability check.Validity
		want                            string
		exit                            int
	}{
		{V, V, V, VerdictValid, 0},
		{I, V, V, VerdictInvalid, 1},
		{V, I, V, VerdictInvalid, 1},
		{U, I, V, VerdictInvalid, 1},
		{V, I, I, VerdictInvalid, 1},
		{V, V, I, VerdictUnavailable, 1},
		{U, V, V, VerdictUnknown, 2},
		{V, V, U, VerdictUnknown, 2},
	} {
		got := verdict(c.safety, c.processes, c.availability)
		assert.Equal(t, c.want, got, "%+v", c)
		assert.Equal(t, c.exit, ExitCode(got), "%+v", c)
	}
}
