package check

import (
	"fmt"

	"github.com/anishathalye/porcupine"
	"github.com/edictlog/edictlog/jepsen/history"
)

// regState is a register's value; the zero regState is a missing key,
// every key's initial state.
type regState struct {
	present bool
	value   int64
}

func (s regState) String() string {
	if !s.present {
		return "missing"
	}
	return fmt.Sprint(s.value)
}

func stateOf(v *int64) regState {
	if v == nil {
		return regState{}
	}
	return regState{present: true, value: *v}
}

// regInput is what an operation asked for.
type regInput struct {
	key   string
	f     string   // history.FRead, FWrite or FCAS (final reads are reads)
	value regState // write: the value; cas: the new value
	prev  regState // cas: the value expected
}

// regOutput is what an operation returned.
type regOutput struct {
	unknown bool     // write or cas with an unknown outcome
	read    regState // read: what it read
}

// opMeta describes an operation for the visualization and anomaly reports.
type opMeta struct {
	process, node int
	level         string
	invoke        int // history index of the invocation
	outcome       history.Type
}

func (m opMeta) String() string {
	s := fmt.Sprintf("process %d, event %d", m.process, m.invoke)
	if m.node != 0 {
		s += fmt.Sprintf(", node %d", m.node)
	}
	if m.level != "" {
		s += ", level " + m.level
	}
	if m.outcome != history.OK {
		s += ", outcome unknown"
	}
	return s
}

// registerStep is the register's sequential specification.
//
// A write or cas with an unknown outcome has an infinite return time, so
// the checker may place it anywhere after its invocation, including after
// every other operation, where it can affect nothing: that is the branch
// where it never happened. Placed anywhere else, it behaves like the real
// operation would have: a cas applies if and only if the register holds
// the value it expects. So a deterministic step covers both "it applied"
// and "it did not".
func registerStep(state, input, output interface{}) (bool, interface{}) {
	s, in, out := state.(regState), input.(regInput), output.(regOutput)
	switch in.f {
	case history.FRead, history.FFinalRead:
		return out.read == s, s
	case history.FWrite:
		return true, in.value
	case history.FCAS:
		if s == in.prev {
			return true, in.value
		}
		// An acknowledged cas must have found its expected value; one
		// with an unknown outcome may have run and found something
		// else, which changes nothing.
		return out.unknown, s
	}
	return false, s
}

func describeOperation(input, output interface{}) string {
	in, out := input.(regInput), output.(regOutput)
	var s string
	switch in.f {
	case history.FRead, history.FFinalRead:
		s = fmt.Sprintf("%s(%s) -> %v", in.f, in.key, out.read)
	case history.FWrite:
		s = fmt.Sprintf("write(%s, %v)", in.key, in.value)
	case history.FCAS:
		s = fmt.Sprintf("cas(%s, %v -> %v)", in.key, in.prev, in.value)
	default:
		s = fmt.Sprintf("%s(%s)", in.f, in.key)
	}
	if out.unknown {
		s += " ?"
	}
	return s
}

// registerModel is the porcupine model of a register; partitioned by key
// if partition is set.
func registerModel(partition bool) porcupine.Model {
	m := porcupine.Model{
		Init: func() interface{} { return regState{} },
		Step: registerStep,
		Hash: func(state interface{}) uint64 {
			s := state.(regState)
			if !s.present {
				return 0
			}
			return uint64(s.value)*0x9e3779b97f4a7c15 + 1
		},
		DescribeOperation:         describeOperation,
		DescribeState:             func(state interface{}) string { return state.(regState).String() },
		DescribeOperationMetadata: func(info interface{}) string { return info.(opMeta).String() },
	}
	if partition {
		m.Partition = partitionByKey
	}
	return m
}

func partitionByKey(ops []porcupine.Operation) [][]porcupine.Operation {
	index := map[string]int{}
	var out [][]porcupine.Operation
	for _, op := range ops {
		k := op.Input.(regInput).key
		i, ok := index[k]
		if !ok {
			i = len(out)
			index[k] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], op)
	}
	return out
}
