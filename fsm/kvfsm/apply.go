package kvfsm

import (
	"cmp"
	"slices"
	"strings"

	"github.com/edictlog/edictlog/edict"
	"github.com/google/btree"
)

// writer applies one validated command of the entry at index to tree. It
// must stay deterministic: results depend only on the tree, the command,
// the index and the stamp.
type writer struct {
	tree  *btree.BTreeG[item]
	index uint64
	stamp edict.Stamp
}

func (w *writer) command(c *Command) *Result {
	res := &Result{Revision: w.index}
	switch {
	case c.Put != nil:
		res.Put = w.put(c.Put)
	case c.Delete != nil:
		res.Delete = w.delete(c.Delete)
	case c.Range != nil:
		res.Range = rangeTree(w.tree, c.Range)
	default:
		res.Txn = w.txn(c.Txn)
	}
	return res
}

func (w *writer) put(p *Put) *PutResult {
	kv := &KeyValue{
		Key:            p.Key,
		Value:          p.Value,
		CreateRevision: w.index,
		ModRevision:    w.index,
		Version:        1,
		Stamp:          w.stamp,
	}
	res := &PutResult{}
	// One descent instead of Get then insert: kv is finished after it is
	// in the tree, which is safe because nobody else can see it yet (the
	// writer holds the KV's lock, and clones are taken under it).
	if old, ok := w.tree.ReplaceOrInsert(item{key: p.Key, kv: kv}); ok {
		kv.CreateRevision = old.kv.CreateRevision
		kv.Version = old.kv.Version + 1
		if p.PrevKV {
			prev := *old.kv
			res.PrevKV = &prev
		}
	}
	return res
}

func (w *writer) delete(d *Delete) *DeleteResult {
	var gone []*KeyValue
	ascend(w.tree, d.Key, d.RangeEnd, func(it item) bool {
		gone = append(gone, it.kv)
		return true
	})
	// Deleting while iterating is not allowed by btree, hence two passes.
	for _, kv := range gone {
		w.tree.Delete(item{key: kv.Key})
	}
	res := &DeleteResult{Deleted: uint64(len(gone))}
	if d.PrevKV && len(gone) > 0 {
		res.PrevKVs = make([]KeyValue, len(gone))
		for i, kv := range gone {
			res.PrevKVs[i] = *kv
		}
	}
	return res
}

func (w *writer) txn(t *Txn) *TxnResult {
	ok := true
	for i := range t.Compares {
		if !compare(w.tree, &t.Compares[i]) {
			ok = false
			break
		}
	}
	ops := t.Success
	if !ok {
		ops = t.Failure
	}
	res := &TxnResult{Succeeded: ok}
	if len(ops) > 0 {
		res.Responses = make([]OpResult, len(ops))
	}
	for i, op := range ops {
		switch {
		case op.Put != nil:
			res.Responses[i].Put = w.put(op.Put)
		case op.Delete != nil:
			res.Responses[i].Delete = w.delete(op.Delete)
		default:
			res.Responses[i].Range = rangeTree(w.tree, op.Range)
		}
	}
	return res
}

// compare evaluates c with etcd's semantics: a missing key's numeric
// properties are 0 and a value compare on a missing key is false.
func compare(t *btree.BTreeG[item], c *Compare) bool {
	it, ok := t.Get(item{key: c.Key})
	if c.Target == TargetValue {
		if !ok {
			return false
		}
		return holds(c.Op, cmp.Compare(it.kv.Value, c.Value))
	}
	var kv KeyValue
	if ok {
		kv = *it.kv
	}
	var v uint64
	switch c.Target {
	case TargetVersion:
		v = kv.Version
	case TargetCreateRevision:
		v = kv.CreateRevision
	case TargetModRevision:
		v = kv.ModRevision
	}
	return holds(c.Op, cmp.Compare(v, c.Number))
}

func holds(op CompareOp, c int) bool {
	switch op {
	case Equal:
		return c == 0
	case NotEqual:
		return c != 0
	case Less:
		return c < 0
	case Greater:
		return c > 0
	}
	return false // unreachable: validated
}

// rangeTree answers r from t. It counts every key in the range, as etcd
// does, so a small Limit on a large range still costs a full scan.
func rangeTree(t *btree.BTreeG[item], r *Range) *RangeResult {
	res := &RangeResult{}
	ascend(t, r.Key, r.RangeEnd, func(it item) bool {
		res.Count++
		switch {
		case r.CountOnly:
		case r.Limit != 0 && uint64(len(res.KVs)) >= r.Limit:
			res.More = true
		default:
			kv := *it.kv
			if r.KeysOnly {
				kv.Value = ""
			}
			res.KVs = append(res.KVs, kv)
		}
		return true
	})
	return res
}

// ascend calls f for each item in [key, end) under etcd's range
// conventions (see Range), in key order, leaving out the keys under
// SystemPrefix unless key is itself under it.
func ascend(t *btree.BTreeG[item], key, end string, f func(item) bool) {
	switch {
	case end == "":
		if it, ok := t.Get(item{key: key}); ok {
			f(it)
		}
	case strings.HasPrefix(key, SystemPrefix):
		ascendSpan(t, key, end, f)
	default:
		// The system keys are one contiguous span: go around it.
		more := true
		if key < SystemPrefix {
			lo := SystemPrefix
			if end != "\x00" && end < lo {
				lo = end
			}
			more = ascendSpan(t, key, lo, f)
		}
		if more {
			ascendSpan(t, max(key, systemEnd), end, f)
		}
	}
}

// systemEnd is the first key after every key under SystemPrefix.
var systemEnd = PrefixEnd(SystemPrefix)

// ascendSpan calls f for each item in [key, end) ("\x00": no end) while f
// returns true, and reports whether it always did.
func ascendSpan(t *btree.BTreeG[item], key, end string, f func(item) bool) bool {
	more := true
	g := func(it item) bool {
		more = f(it)
		return more
	}
	switch {
	case end == "\x00":
		t.AscendGreaterOrEqual(item{key: key}, g)
	case end > key:
		t.AscendRange(item{key: key}, item{key: end}, g)
	}
	return more
}

// cloneStamp copies the QT so that the state never shares memory with the
// caller's entry.
func cloneStamp(s edict.Stamp) edict.Stamp {
	s.QT = slices.Clone(s.QT)
	return s
}
