package check

import (
	"fmt"

	"github.com/edictlog/edictlog/jepsen/history"
)

// operation is a client operation: its invocation and, if the test saw
// one, its completion.
type operation struct {
	invoke   history.Op
	complete *history.Op  // nil if the test ended before the operation completed
	outcome  history.Type // OK, Fail or Info (Info also when complete is nil)
	end      int64        // completion time; only meaningful if complete != nil
}

func (o operation) f() string { return o.invoke.F }

// pair matches every client invocation with the completion of the same
// process that follows it, in invocation order. The nemesis's and the
// monitor's events are skipped.
// It fails on a completion without an invocation, or on a second
// invocation while one is in flight on the same process.
func pair(ops []history.Op) ([]operation, error) {
	var out []operation
	pending := map[int]int{} // process → index into out
	for _, op := range ops {
		if !op.Client() {
			continue
		}
		switch op.Type {
		case history.Invoke:
			if i, ok := pending[op.Process]; ok {
				return nil, fmt.Errorf("check: event %d: process %d invokes %s while event %d is in flight",
					op.Index, op.Process, op.F, out[i].invoke.Index)
			}
			pending[op.Process] = len(out)
			out = append(out, operation{invoke: op, outcome: history.Info})
		case history.OK, history.Fail, history.Info:
			i, ok := pending[op.Process]
			if !ok {
				return nil, fmt.Errorf("check: event %d: process %d completes %s without an invocation",
					op.Index, op.Process, op.F)
			}
			if out[i].invoke.F != op.F {
				return nil, fmt.Errorf("check: event %d: process %d completes %s, but invoked %s (event %d)",
					op.Index, op.Process, op.F, out[i].invoke.F, out[i].invoke.Index)
			}
			delete(pending, op.Process)
			c := op
			out[i].complete = &c
			out[i].outcome = op.Type
			out[i].end = op.Time
		default:
			return nil, fmt.Errorf("check: event %d: unknown type %q", op.Index, op.Type)
		}
	}
	return out, nil
}
