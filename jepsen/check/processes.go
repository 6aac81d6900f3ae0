package check

import (
	"fmt"

	"github.com/edictlog/edictlog/jepsen/history"
)

// Processes checks that every process of the cluster started whenever it
// was started, and exited only when the harness killed it: a node that
// cannot start again after a crash, or that dies on its own, is the
// product's failure however safe and available the others kept the
// cluster. It reads the monitor's history.FNotStarted and
// history.FCrashed records; any one of them makes the result Invalid, and
// the run "invalid".
func Processes(ops []history.Op) ProcessResult {
	res := ProcessResult{Valid: Valid, Failures: []ProcessFailure{}}
	faults := history.Intervals(ops)
	for _, op := range ops {
		if op.Process != history.MonitorProcess || (op.F != history.FNotStarted && op.F != history.FCrashed) {
			continue
		}
		f := ProcessFailure{Node: op.Node, At: secs(op.Time), Kind: op.F, Error: op.Error}
		if iv, ok := preceding(faults, op.Time); ok {
			f.After = iv.Nemesis
			if iv.Detail != "" {
				f.After += " (" + iv.Detail + ")"
			}
			if iv.End < op.Time {
				f.After = "after " + f.After
			} else {
				f.After = "during " + f.After
			}
		}
		res.Failures = append(res.Failures, f)
		res.Valid = Invalid
	}
	return res
}

// ProcessResult is the verdict of Processes.
type ProcessResult struct {
	// Valid is Invalid if a process could not start or crashed.
	Valid    Validity         `json:"valid"`
	Failures []ProcessFailure `json:"failures"`
}

// ProcessFailure is one process that could not start, or crashed.
type ProcessFailure struct {
	Node int `json:"node"`
	// At is when the harness saw it, in seconds since the test began.
	At float64 `json:"at_s"`
	// Kind is history.FNotStarted or history.FCrashed.
	Kind string `json:"kind"`
	// After is the fault in force then ("during kill (kill [3])") or
	// the last one before ("after ..."); empty if none had run.
	After string `json:"after,omitempty"`
	// Error says how, with the last lines of the process's log.
	Error string `json:"error"`
}

// String describes the failure in one line.
func (f ProcessFailure) String() string {
	what := "could not start"
	if f.Kind == history.FCrashed {
		what = "crashed"
	}
	s := fmt.Sprintf("node %d %s at t=%.1fs", f.Node, what, f.At)
	if f.After != "" {
		s += ", " + f.After
	}
	return s + ": " + f.Error
}

// Summary says in one line what the result is.
func (r ProcessResult) Summary() string {
	if len(r.Failures) == 0 {
		return "every process started when started, none exited on its own"
	}
	notStarted, crashed := 0, 0
	nodes := map[int]bool{}
	for _, f := range r.Failures {
		nodes[f.Node] = true
		if f.Kind == history.FCrashed {
			crashed++
		} else {
			notStarted++
		}
	}
	return fmt.Sprintf("INVALID: %d start(s) failed, %d process(es) crashed, of %d node(s) (below)", notStarted, crashed, len(nodes))
}
