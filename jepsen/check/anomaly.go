package check

import (
	"fmt"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/edictlog/edictlog/jepsen/history"
)

// describeViolation explains, from the longest linearizable prefix found,
// where key's history stops being linearizable.
func describeViolation(kr *KeyResult, ops []porcupine.Operation, info porcupine.LinearizationInfo) {
	var prefix []porcupine.Operation
	for _, part := range info.PartialLinearizationsOperations() {
		for _, p := range part {
			if len(p) > len(prefix) {
				prefix = p
			}
		}
	}
	kr.Linearized = len(prefix)
	done := map[int]bool{}
	state := interface{}(regState{})
	for i, op := range prefix {
		done[op.Metadata.(opMeta).invoke] = true
		_, state = registerStep(state, op.Input, op.Output)
		if i >= len(prefix)-5 {
			kr.Prefix = append(kr.Prefix, fmt.Sprintf("%s => %v", describe(op), state))
		}
	}
	// The operations that had to come next: those not linearized that were
	// invoked before the first of them returned.
	var rest []porcupine.Operation
	first := int64(-1)
	for _, op := range ops {
		if !done[op.Metadata.(opMeta).invoke] {
			rest = append(rest, op)
			if first < 0 || op.Return < first {
				first = op.Return
			}
		}
	}
	for _, op := range rest {
		if op.Call <= first {
			kr.Stuck = append(kr.Stuck, describe(op))
		}
	}

	var b strings.Builder
	fmt.Fprintf(&b, "key %q is not linearizable: ", kr.Key)
	if len(prefix) == 0 {
		fmt.Fprintf(&b, "no operation of its %d can come first (the key starts missing).", len(ops))
	} else {
		fmt.Fprintf(&b, "the longest linearizable prefix found holds %d of its %d operations and ends with\n", len(prefix), len(ops))
		for _, s := range kr.Prefix {
			fmt.Fprintf(&b, "  %s\n", s)
		}
		fmt.Fprintf(&b, "leaving the register %v.", state)
	}
	b.WriteString(" No operation that could come next is consistent with that:")
	for _, s := range kr.Stuck {
		fmt.Fprintf(&b, "\n  %s", s)
	}
	kr.Anomaly = b.String()
}

// describe names an operation, its interval and who ran it.
func describe(op porcupine.Operation) string {
	m := op.Metadata.(opMeta)
	end := "?"
	if m.outcome == history.OK {
		end = time.Duration(op.Return).String()
	}
	return fmt.Sprintf("%s [%v, %s] (%v)", describeOperation(op.Input, op.Output), time.Duration(op.Call), end, m)
}
