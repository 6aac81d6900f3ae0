package check

import (
	"sort"

	"github.com/edictlog/edictlog/jepsen/history"
)

// builder writes small histories by hand: each call adds one operation's
// invocation at start and, unless its outcome is "", its completion at end.
type builder struct{ ops []history.Op }

func v(x int64) *int64 { return history.Int(x) }

func (b *builder) add(start, end int64, outcome history.Type, inv, done history.Op) {
	inv.Type, inv.Time = history.Invoke, start
	b.ops = append(b.ops, inv)
	if outcome != "" {
		done.Type, done.Time = outcome, end
		b.ops = append(b.ops, done)
	}
}

func (b *builder) write(p int, key string, val int64, start, end int64, outcome history.Type) {
	op := history.Op{Process: p, F: history.FWrite, Key: key, Value: v(val)}
	b.add(start, end, outcome, op, op)
}

func (b *builder) cas(p int, key string, prev, val int64, start, end int64, outcome history.Type) {
	op := history.Op{Process: p, F: history.FCAS, Key: key, Prev: v(prev), Value: v(val)}
	b.add(start, end, outcome, op, op)
}

// read completes OK with got (nil: the key is missing).
func (b *builder) read(p int, key string, level string, got *int64, start, end int64) {
	op := history.Op{Process: p, F: history.FRead, Key: key, Level: level}
	done := op
	done.Value = got
	b.add(start, end, history.OK, op, done)
}

func (b *builder) addValue(p int, val int64, start, end int64, outcome history.Type) {
	op := history.Op{Process: p, F: history.FAdd, Value: v(val)}
	b.add(start, end, outcome, op, op)
}

func (b *builder) finalRead(p, node int, values []int64, start, end int64) {
	op := history.Op{Process: p, F: history.FFinalRead, Node: node}
	done := op
	done.Values = values
	b.add(start, end, history.OK, op, done)
}

// fault adds a nemesis fault over [start, end]; end < 0 leaves it open.
func (b *builder) fault(name, detail string, start, end int64) {
	b.ops = append(b.ops, history.Op{Process: history.NemesisProcess, Type: history.Info, F: history.FStart,
		Nemesis: name, Detail: detail, Time: start})
	if end >= 0 {
		b.ops = append(b.ops, history.Op{Process: history.NemesisProcess, Type: history.Info, F: history.FStop,
			Nemesis: name, Time: end})
	}
}

// history orders the events by time and numbers them.
func (b *builder) history() []history.Op {
	ops := append([]history.Op(nil), b.ops...)
	sort.SliceStable(ops, func(i, j int) bool { return ops[i].Time < ops[j].Time })
	for i := range ops {
		ops[i].Index = i
	}
	return ops
}
