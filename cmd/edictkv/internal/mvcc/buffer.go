package mvcc

import (
	"bytes"
	"slices"

	"github.com/google/btree"

	"github.com/edictlog/edictlog/cmd/edictkv/internal/mvcc/backend"
)

type bucketID int

const (
	bucketKey  bucketID = iota // revision key → mvccpb.KeyValue, as etcd's "key"
	bucketMeta                 // consistent index, compaction marks, format
	bucketRev                  // main revision → log index
	numBuckets
)

var bucketNames = [numBuckets][]byte{[]byte("key"), []byte("meta"), []byte("revision")}

// layerItem is one pending change: a put, or a delete when deleted.
type layerItem struct {
	key, value []byte
	deleted    bool
}

func layerLess(a, b layerItem) bool { return bytes.Compare(a.key, b.key) < 0 }

func cmpItemKey(it layerItem, key []byte) int { return bytes.Compare(it.key, key) }

// changes are a layer's changes to one bucket, the newest of each key.
// The store's buckets mostly grow at their end (the key and revision
// buckets by revision, the stamp records by revision), so a change whose
// key sorts after every key in run is appended to it, at no cost beyond
// the append; any other change (an overwrite, a deletion by compaction, a
// record) goes to over, which holds only keys at or before run's last one
// (that key only grows) and so is newer than run for each key the two
// share.
type changes struct {
	run  []layerItem // ascending keys
	over *btree.BTreeG[layerItem]
}

func (c *changes) add(it layerItem) {
	if n := len(c.run); n == 0 || bytes.Compare(it.key, c.run[n-1].key) > 0 {
		c.run = append(c.run, it)
		return
	}
	if c.over == nil {
		c.over = btree.NewG(16, layerLess)
	}
	c.over.ReplaceOrInsert(it)
}

func (c *changes) get(key []byte) (layerItem, bool) {
	if c.over != nil {
		if it, ok := c.over.Get(layerItem{key: key}); ok {
			return it, true
		}
	}
	if i, ok := slices.BinarySearchFunc(c.run, key, cmpItemKey); ok {
		return c.run[i], true
	}
	return layerItem{}, false
}

// appendRange appends the changes to keys in [from, to) (to nil: no
// bound) to out, in key order, one per key.
func (c *changes) appendRange(out []layerItem, from, to []byte) []layerItem {
	lo, _ := slices.BinarySearchFunc(c.run, from, cmpItemKey)
	hi := len(c.run)
	if to != nil {
		hi, _ = slices.BinarySearchFunc(c.run, to, cmpItemKey)
		hi = max(hi, lo)
	}
	run := c.run[lo:hi]
	if c.over == nil || c.over.Len() == 0 {
		return append(out, run...)
	}
	var over []layerItem
	iter := func(it layerItem) bool { over = append(over, it); return true }
	if to == nil {
		c.over.AscendGreaterOrEqual(layerItem{key: from}, iter)
	} else {
		c.over.AscendRange(layerItem{key: from}, layerItem{key: to}, iter)
	}
	return mergeChanges(out, run, over)
}

// mergeChanges appends to out the union of two key-ordered lists of
// changes, in key order, newer's change where both have a key.
func mergeChanges(out, older, newer []layerItem) []layerItem {
	i, j := 0, 0
	for i < len(older) && j < len(newer) {
		switch c := bytes.Compare(older[i].key, newer[j].key); {
		case c < 0:
			out = append(out, older[i])
			i++
		case c > 0:
			out = append(out, newer[j])
			j++
		default:
			out = append(out, newer[j])
			i++
			j++
		}
	}
	out = append(out, older[i:]...)
	return append(out, newer[j:]...)
}

// layer holds changes not yet committed to the backend, per bucket, the
// newest change of each key. The store writes into one open layer; a commit
// seals it (no change after that) and writes it to the backend in one
// batch, and readers look through the layers before the backend, so they
// see every change from the moment it is made.
type layer struct {
	buckets [numBuckets]changes
	ops     int
	// applied is the log index of the last entry applied into the layer
	// (0: none). It counts as one change per entry, but is written to
	// the meta bucket once, at commit: nothing reads it through a view.
	applied uint64
	// index is the consistent index of the state the layer completes,
	// set when it is sealed.
	index uint64
}

func newLayer() *layer { return &layer{} }

// nextLayer is the layer that follows l: its runs start with l's lengths
// as their capacity, so that a steady load fills them without regrowing.
func nextLayer(l *layer) *layer {
	n := &layer{}
	for b := range n.buckets {
		if c := len(l.buckets[b].run); c > 0 {
			n.buckets[b].run = make([]layerItem, 0, c)
		}
	}
	return n
}

func (l *layer) put(b bucketID, key, value []byte) {
	l.buckets[b].add(layerItem{key: key, value: value})
	l.ops++
}

func (l *layer) del(b bucketID, key []byte) {
	l.buckets[b].add(layerItem{key: key, deleted: true})
	l.ops++
}

// setApplied records that the entry at index is applied: the consistent
// index the layer's commit writes.
func (l *layer) setApplied(index uint64) {
	l.applied = index
	l.ops++
}

func (l *layer) get(b bucketID, key []byte) (layerItem, bool) {
	return l.buckets[b].get(key)
}

// batch is the layer as one backend batch, in key order per bucket, the
// consistent index last.
func (l *layer) batch() *backend.Batch {
	bt := backend.NewBatch(l.ops)
	var items []layerItem
	for b := range l.buckets {
		items = l.buckets[b].appendRange(items[:0], nil, nil)
		for _, it := range items {
			if it.deleted {
				bt.Delete(bucketNames[b], it.key)
			} else {
				bt.Put(bucketNames[b], it.key, it.value)
			}
		}
	}
	if l.applied != 0 {
		bt.Put(bucketNames[bucketMeta], metaConsistentIndex, encodeUint64(l.applied))
	}
	return bt
}

// view reads the store's state through its layers and a backend view. It
// captures the layers before it begins the backend view: a commit that ends
// in between leaves its layer both in the backend view and among the
// captured layers, which read the same, so nothing is missed. A view is
// for one goroutine.
type view struct {
	s      *Store
	open   *layer   // written under s.bufMu until sealed
	sealed []*layer // oldest first; immutable
	tx     backend.ReadTx
}

func (s *Store) newView() (*view, error) {
	s.bufMu.RLock()
	v := &view{s: s, open: s.open, sealed: slices.Clone(s.sealed)}
	s.bufMu.RUnlock()
	tx, err := s.be.Begin()
	if err != nil {
		return nil, err
	}
	v.tx = tx
	return v, nil
}

func (v *view) release() {
	if v != nil && v.tx != nil {
		v.tx.Release()
		v.tx = nil
	}
}

func (v *view) layerGet(b bucketID, key []byte) (layerItem, bool) {
	v.s.bufMu.RLock()
	it, ok := v.open.get(b, key)
	v.s.bufMu.RUnlock()
	for i := len(v.sealed) - 1; !ok && i >= 0; i-- {
		it, ok = v.sealed[i].get(b, key)
	}
	return it, ok
}

// get returns the value of key in bucket b, or nil.
func (v *view) get(b bucketID, key []byte) []byte {
	if it, ok := v.layerGet(b, key); ok {
		if it.deleted {
			return nil
		}
		return it.value
	}
	return v.tx.Get(bucketNames[b], key)
}

// layerRange returns the layers' changes to keys in [from, to) (to nil:
// no bound), newest change per key, in key order.
func (v *view) layerRange(b bucketID, from, to []byte) []layerItem {
	v.s.bufMu.RLock()
	out := v.open.buckets[b].appendRange(nil, from, to)
	v.s.bufMu.RUnlock()
	for i := len(v.sealed) - 1; i >= 0; i-- {
		older := v.sealed[i].buckets[b].appendRange(nil, from, to)
		switch {
		case len(older) == 0:
		case len(out) == 0:
			out = older
		default:
			out = mergeChanges(make([]layerItem, 0, len(out)+len(older)), older, out)
		}
	}
	return out
}

// ascend calls fn on each key of bucket b in [from, to) (to nil: no bound)
// as the store sees it, layers over backend, in key order, until fn
// returns false.
func (v *view) ascend(b bucketID, from, to []byte, fn func(k, val []byte) bool) {
	over := v.layerRange(b, from, to)
	i, stopped := 0, false
	v.tx.Ascend(bucketNames[b], from, to, func(k, val []byte) bool {
		for ; i < len(over) && bytes.Compare(over[i].key, k) < 0; i++ {
			if !over[i].deleted && !fn(over[i].key, over[i].value) {
				stopped = true
				return false
			}
		}
		if i < len(over) && bytes.Equal(over[i].key, k) {
			it := over[i]
			i++
			if it.deleted {
				return true
			}
			k, val = it.key, it.value
		}
		if !fn(k, val) {
			stopped = true
			return false
		}
		return true
	})
	if stopped {
		return
	}
	for ; i < len(over); i++ {
		if !over[i].deleted && !fn(over[i].key, over[i].value) {
			return
		}
	}
}
