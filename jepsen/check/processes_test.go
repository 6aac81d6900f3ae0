package check

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edictlog/edictlog/jepsen/history"
)

// A process that could not start, or crashed, makes the result invalid,
// names the fault it came during or after, and keeps the error; the
// monitor's other records and the nemesis's own failures do not count.
func TestProcessesFailures(t *testing.T) {
	s := int64(time.Second)
	b := &builder{}
	b.fault("kill", "kill [3]", 1*s, 3*s)
	monitor := func(at int64, f string, node int, err string) {
		b.ops = append(b.ops, history.Op{Process: history.MonitorProcess, Type: history.Fail, F: f, Node: node, Error: err, Time: at})
	}
	monitor(2*s, history.FNotStarted, 3, "exited (exit status 1)")
	monitor(5*s, history.FReady, 4, "not ready")
	b.ops = append(b.ops, history.Op{Process: history.NemesisProcess, Type: history.Info, F: history.FStart, Nemesis: "pause",
		Detail: "failed: node 3 is not running", Time: 6 * s})
	monitor(7*s, history.FCrashed, 2, "signal: aborted")
	r := Processes(b.history())
	assert.Equal(t, Invalid, r.Valid)
	require.Len(t, r.Failures, 2)
	assert.Equal(t, "node 3 could not start at t=2.0s, during kill (kill [3]): exited (exit status 1)", r.Failures[0].String())
	assert.Contains(t, r.Failures[1].String(), "node 2 crashed at t=7.0s, during pause")
	assert.Contains(t, r.Summary(), "INVALID: 1 start(s) failed, 1 process(es) crashed, of 2 node(s)")

	b = &builder{}
	b.fault("kill", "kill [3]", 1*s, 3*s)
	ok := Processes(b.history())
	assert.Equal(t, Valid, ok.Valid)
	assert.Empty(t, ok.Failures)
	assert.Contains(t, ok.Summary(), "every process started")
}
