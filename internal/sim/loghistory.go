package sim

import (
	"fmt"
	"math"

	"github.com/anishathalye/porcupine"
	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/internal/replog"
)

// A client operation on a per-key register with compare-and-set.
type opKind uint8

const (
	opGet opKind = iota + 1
	opPut
	opCAS
	opModel // a Model's operation (clientOp.model), not in the register history
)

type regInput struct {
	kind   opKind
	key    string
	value  string // put, cas: the new value
	expect string // cas: the value compared with
	level  replog.ReadLevel
}

type regOutput struct {
	value   string // get
	ok      bool   // cas succeeded
	unknown bool   // write of unknown outcome
}

// clientOp is one operation in flight.
type clientOp struct {
	client int
	in     regInput
	call   int64
	proc   edict.ProcessID
	stamp  edict.Stamp // a write's edict stamp
	index  uint64      // a read's index
	lease  bool        // a read served under the server's lease
	readID uint64
	done   bool
	onDone func(regOutput)
	fired  bool
	model  *ModelOp // opModel's
}

// fire tells the client its operation ended.
func (op *clientOp) fire(out regOutput) {
	if op.fired {
		return
	}
	op.fired = true
	if op.onDone != nil {
		op.onDone(out)
	}
}

// history collects the operations of a run for the checkers.
type history struct {
	ops       []porcupine.Operation
	stale     []staleRead
	writes    map[string][]writeRecord // per key, every write ever invoked
	acked     int
	unknownN  int
	readsBy   map[replog.ReadLevel]int
	staleLin  bool // negative control: check stale reads with porcupine too
	completed int
}

type staleRead struct {
	key, value string
	ret        int64
}

type writeRecord struct {
	value string
	call  int64
}

func newHistory() *history {
	return &history{writes: map[string][]writeRecord{}, readsBy: map[replog.ReadLevel]int{}}
}

func (h *history) invokeWrite(op *clientOp) {
	h.writes[op.in.key] = append(h.writes[op.in.key], writeRecord{value: op.in.value, call: op.call})
}

func (h *history) finish(op *clientOp, out regOutput, ret int64) {
	if op.done {
		return
	}
	op.done = true
	h.completed++
	if op.in.kind == opGet && op.in.level == replog.ReadStale && !h.staleLin {
		h.stale = append(h.stale, staleRead{key: op.in.key, value: out.value, ret: ret})
	} else {
		h.ops = append(h.ops, porcupine.Operation{ClientId: op.client, Input: op.in, Call: op.call, Output: out, Return: ret})
	}
	switch {
	case op.in.kind == opGet:
		h.readsBy[op.in.level]++
	case out.unknown:
		h.unknownN++
	default:
		h.acked++
	}
}

// unknown records a write whose outcome the client cannot know: it may
// take effect at any time after its call, or never (porcupine may place it
// after everything, where it is invisible).
func (h *history) unknown(op *clientOp) {
	h.finish(op, regOutput{unknown: true}, math.MaxInt64)
}

// drop forgets an operation that certainly had no effect (a refused write,
// a read that got no answer).
func (h *history) drop(op *clientOp) {
	if op.done {
		return
	}
	op.done = true
}

func (h *history) count(res *LogResult) {
	res.Ops, res.Writes, res.Unknown = len(h.ops)+len(h.stale), h.acked, h.unknownN
	for l, n := range h.readsBy {
		res.Reads[l] = n
	}
}

// registerModel is a per-key register with CAS, partitioned by key.
var registerModel = porcupine.Model{
	Partition: func(ops []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range ops {
			k := op.Input.(regInput).key
			if _, ok := by[k]; !ok {
				keys = append(keys, k)
			}
			by[k] = append(by[k], op)
		}
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, by[k])
		}
		return out
	},
	Init: func() any { return "" },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(string), input.(regInput), output.(regOutput)
		switch in.kind {
		case opGet:
			return out.value == s, s
		case opPut:
			return true, in.value
		case opCAS:
			// A value compare on a missing key is false (etcd's rule, which
			// kvfsm.KV follows); "" is the missing key, as values are never
			// empty.
			match := s != "" && s == in.expect
			if out.unknown {
				if match {
					return true, in.value
				}
				return true, s
			}
			if out.ok {
				return match, in.value
			}
			return !match, s
		}
		return false, s
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(regInput), output.(regOutput)
		switch in.kind {
		case opGet:
			return fmt.Sprintf("get(%s)@%v → %q", in.key, in.level, out.value)
		case opPut:
			return fmt.Sprintf("put(%s, %q) unknown=%t", in.key, in.value, out.unknown)
		}
		return fmt.Sprintf("cas(%s, %q→%q) ok=%t unknown=%t", in.key, in.expect, in.value, out.ok, out.unknown)
	},
}

// check runs porcupine on the linearizable operations, and checks stale
// reads only for returning some value that was written before they
// returned (or the initial empty value).
func (h *history) check() string {
	for _, s := range h.stale {
		if s.value == "" {
			continue
		}
		found := false
		for _, w := range h.writes[s.key] {
			if w.value == s.value && w.call < s.ret {
				found = true
				break
			}
		}
		if !found {
			return fmt.Sprintf("stale read of %s returned %q, which no earlier write wrote", s.key, s.value)
		}
	}
	switch porcupine.CheckOperationsTimeout(registerModel, h.ops, logCheckBudget) {
	case porcupine.Illegal:
		return fmt.Sprintf("linearizability: porcupine found no linearization of %d operations", len(h.ops))
	case porcupine.Unknown:
		return fmt.Sprintf("linearizability: porcupine could not decide %d operations within %v", len(h.ops), logCheckBudget)
	}
	return ""
}
