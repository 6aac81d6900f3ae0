package kvfsm

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/edictlog/edictlog/fsm"
	"github.com/stretchr/testify/require"
)

// model is a deliberately naive KV: a map scanned in sorted order. The
// randomized test checks KV (a B-tree with copy-on-write snapshots) against
// it, result by result.
type model struct {
	kvs map[string]KeyValue
	rev uint64
}

func (m *model) selected(key, end string) []string {
	var ks []string
	for k := range m.kvs {
		if (end == "" && k == key) || (end == "\x00" && k >= key) || (end != "" && end != "\x00" && k >= key && k < end) {
			ks = append(ks, k)
		}
	}
	slices.Sort(ks)
	return ks
}

func (m *model) rangeOf(r *Range) *RangeResult {
	res := &RangeResult{}
	for _, k := range m.selected(r.Key, r.RangeEnd) {
		res.Count++
		if r.CountOnly {
			continue
		}
		if r.Limit > 0 && uint64(len(res.KVs)) == r.Limit {
			res.More = true
			continue
		}
		kv := m.kvs[k]
		if r.KeysOnly {
			kv.Value = ""
		}
		res.KVs = append(res.KVs, kv)
	}
	return res
}

func (m *model) put(p *Put, idx uint64) *PutResult {
	old, ok := m.kvs[p.Key]
	res := &PutResult{}
	nv := KeyValue{Key: p.Key, Value: p.Value, CreateRevision: idx, ModRevision: idx, Version: 1, Stamp: stampAt(idx)}
	if ok {
		nv.CreateRevision, nv.Version = old.CreateRevision, old.Version+1
		if p.PrevKV {
			res.PrevKV = &old
		}
	}
	m.kvs[p.Key] = nv
	return res
}

func (m *model) delete(d *Delete) *DeleteResult {
	res := &DeleteResult{}
	for _, k := range m.selected(d.Key, d.RangeEnd) {
		res.Deleted++
		if d.PrevKV {
			res.PrevKVs = append(res.PrevKVs, m.kvs[k])
		}
		delete(m.kvs, k)
	}
	return res
}

func (m *model) holds(c Compare) bool {
	kv, ok := m.kvs[c.Key]
	var a, b int
	switch c.Target {
	case TargetValue:
		if !ok {
			return false
		}
		a = strings.Compare(kv.Value, c.Value)
	case TargetVersion:
		a, b = int(kv.Version), int(c.Number)
	case TargetCreateRevision:
		a, b = int(kv.CreateRevision), int(c.Number)
	case TargetModRevision:
		a, b = int(kv.ModRevision), int(c.Number)
	}
	return map[CompareOp]bool{Equal: a == b, NotEqual: a != b, Less: a < b, Greater: a > b}[c.Op]
}

func (m *model) apply(c *Command, idx uint64) *Result {
	m.rev = idx
	res := &Result{Revision: idx}
	switch {
	case c.Put != nil:
		res.Put = m.put(c.Put, idx)
	case c.Delete != nil:
		res.Delete = m.delete(c.Delete)
	case c.Range != nil:
		res.Range = m.rangeOf(c.Range)
	default:
		ok := true
		for _, cmp := range c.Txn.Compares {
			ok = ok && m.holds(cmp)
		}
		ops := c.Txn.Success
		if !ok {
			ops = c.Txn.Failure
		}
		res.Txn = &TxnResult{Succeeded: ok}
		for _, op := range ops {
			var r OpResult
			switch {
			case op.Put != nil:
				r.Put = m.put(op.Put, idx)
			case op.Delete != nil:
				r.Delete = m.delete(op.Delete)
			default:
				r.Range = m.rangeOf(op.Range)
			}
			res.Txn.Responses = append(res.Txn.Responses, r)
		}
	}
	return res
}

// gen makes random commands over a small key space, so that keys collide,
// ranges overlap and compares sometimes hold.
type gen struct{ r *rand.Rand }

var genKeys = []string{"a", "a\x00", "a\xff", "ab", "abc", "b", "ba", "c", "\xff", "\xff\xff"}

func (g gen) key() string { return genKeys[g.r.IntN(len(genKeys))] }
func (g gen) val() string { return []string{"", "x", "y", "xyz"}[g.r.IntN(4)] }

func (g gen) end(key string) string {
	switch g.r.IntN(5) {
	case 0, 1:
		return ""
	case 2:
		return "\x00"
	case 3:
		return PrefixEnd(key)
	}
	return g.key()
}

func (g gen) rangeReq() *Range {
	k := g.key()
	return &Range{Key: k, RangeEnd: g.end(k), Limit: uint64(g.r.IntN(4)), CountOnly: g.r.IntN(8) == 0, KeysOnly: g.r.IntN(4) == 0}
}

func (g gen) op() Op {
	switch g.r.IntN(3) {
	case 0:
		return Op{Put: &Put{Key: g.key(), Value: g.val(), PrevKV: g.r.IntN(2) == 0}}
	case 1:
		k := g.key()
		return Op{Delete: &Delete{Key: k, RangeEnd: g.end(k), PrevKV: g.r.IntN(2) == 0}}
	}
	return Op{Range: g.rangeReq()}
}

func (g gen) command() Command {
	if g.r.IntN(3) > 0 {
		op := g.op()
		return Command{Put: op.Put, Delete: op.Delete, Range: op.Range}
	}
	t := &Txn{}
	for range g.r.IntN(3) {
		c := Compare{Key: g.key(), Op: CompareOp(1 + g.r.IntN(4)), Target: CompareTarget(1 + g.r.IntN(4))}
		if c.Target == TargetValue {
			c.Value = g.val()
		} else {
			c.Number = uint64(g.r.IntN(6))
		}
		t.Compares = append(t.Compares, c)
	}
	for range g.r.IntN(4) {
		t.Success = append(t.Success, g.op())
	}
	for range g.r.IntN(3) {
		t.Failure = append(t.Failure, g.op())
	}
	return Command{Txn: t}
}

func TestKVMatchesModel(t *testing.T) {
	for seed := range uint64(8) {
		g := gen{rand.New(rand.NewPCG(seed, 42))}
		m := &model{kvs: map[string]KeyValue{}}
		kv := NewKV()
		refused := 0
		for idx := uint64(1); idx <= 1500; idx++ {
			c := g.command()
			b, err := EncodeCommand(c)
			if err != nil {
				// A branch writing a key twice: refused on both sides of the
				// wire, and still an index in the log.
				require.ErrorIs(t, err, ErrInvalid)
				refused++
				b = mustEncode(t, &c)
				res := kv.Apply(fsm.Entry{Index: idx, Stamp: stampAt(idx), Data: b})
				require.ErrorIs(t, res.(error), ErrInvalid)
				m.rev = idx
				continue
			}
			want := m.apply(&c, idx)
			got := kv.Apply(fsm.Entry{Index: idx, Stamp: stampAt(idx), Data: b})
			require.Equal(t, want, got, "seed %d index %d command %+v", seed, idx, c)

			r := g.rangeReq()
			res, err := kv.Range(*r)
			require.NoError(t, err)
			require.Equal(t, Result{Revision: m.rev, Range: m.rangeOf(r)}, res, "seed %d index %d read %+v", seed, idx, r)

			// Now and then, continue on a KV restored from a snapshot.
			if idx%300 == 0 {
				next := NewKV()
				require.NoError(t, next.Restore(bytes.NewReader(persist(t, kv))))
				kv = next
			}
		}
		require.NotZero(t, refused, "the generator exercises refused transactions")
	}
}
