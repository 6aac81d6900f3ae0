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

// layer holds changes not yet committed to the backend, per bucket, the
// newest change of each key. The store writes into one open layer; a commit
// seals it (no change after that) and writes it to the backend in one
// batch, and readers look through the layers before the backend, so they
// see every change from the moment it is made.
type layer struct {
	trees [numBuckets]*btree.BTreeG[layerItem]
	ops   int
	// index is the consistent index of the state the layer completes,
	// set when it is sealed.
	index uint64
}

func newLayer() *layer {
	l := &layer{}
	for i := range l.trees {
		l.trees[i] = btree.NewG(16, layerLess)
	}
	return l
}

func (l *layer) put(b bucketID, key, value []byte) {
	l.trees[b].ReplaceOrInsert(layerItem{key: key, value: value})
	l.ops++
}

func (l *layer) del(b bucketID, key []byte) {
	l.trees[b].ReplaceOrInsert(layerItem{key: key, deleted: true})
	l.ops++
}

func (l *layer) get(b bucketID, key []byte) (layerItem, bool) {
	return l.trees[b].Get(layerItem{key: key})
}

// batch is the layer as one backend batch, in key order per bucket.
func (l *layer) batch() *backend.Batch {
	bt := &backend.Batch{}
	for b, t := range l.trees {
		t.Ascend(func(it layerItem) bool {
			if it.deleted {
				bt.Delete(bucketNames[b], it.key)
			} else {
				bt.Put(bucketNames[b], it.key, it.value)
			}
			return true
		})
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
	var out []layerItem
	collect := func(l *layer) {
		iter := func(it layerItem) bool { out = append(out, it); return true }
		if to == nil {
			l.trees[b].AscendGreaterOrEqual(layerItem{key: from}, iter)
		} else {
			l.trees[b].AscendRange(layerItem{key: from}, layerItem{key: to}, iter)
		}
	}
	// Newest first, so that a stable sort and a dedupe keep the newest.
	v.s.bufMu.RLock()
	collect(v.open)
	v.s.bufMu.RUnlock()
	for i := len(v.sealed) - 1; i >= 0; i-- {
		collect(v.sealed[i])
	}
	slices.SortStableFunc(out, func(a, b layerItem) int { return bytes.Compare(a.key, b.key) })
	return slices.CompactFunc(out, func(a, b layerItem) bool { return bytes.Equal(a.key, b.key) })
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
