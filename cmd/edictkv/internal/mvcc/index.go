package mvcc

import (
	"bytes"
	"fmt"
	"slices"
	"sync"

	"github.com/google/btree"
)

// visitChunk is how many keys a range walks under one hold of the index's
// read lock: a long range lets writers in between chunks. A walk at a
// revision stays consistent across chunks because writers only add newer
// revisions and compaction waits for readers (Store.compactMu).
const visitChunk = 512

// treeIndex is the in-memory key index: a B-tree of keyIndex by key.
// Methods lock it; keyIndex values are only read or changed under its lock.
type treeIndex struct {
	mu   sync.RWMutex
	tree *btree.BTreeG[*keyIndex]
	// probe is the search key of lookups under the write lock, which
	// would otherwise allocate one each.
	probe keyIndex
}

func newTreeIndex() *treeIndex {
	return &treeIndex{tree: btree.NewG(32, (*keyIndex).less)}
}

func (ti *treeIndex) lookup(key []byte) *keyIndex {
	ki, _ := ti.tree.Get(&keyIndex{key: key})
	return ki
}

// get returns key's revision, creation and version at atRev.
func (ti *treeIndex) get(key []byte, atRev int64) (modified, created Revision, ver int64, err error) {
	ti.mu.RLock()
	defer ti.mu.RUnlock()
	ki := ti.lookup(key)
	if ki == nil {
		return Revision{}, Revision{}, 0, errRevisionNotFound
	}
	return ki.get(atRev)
}

// lookupLocked is lookup under the write lock.
func (ti *treeIndex) lookupLocked(key []byte) *keyIndex {
	ti.probe.key = key
	ki, _ := ti.tree.Get(&ti.probe)
	ti.probe.key = nil
	return ki
}

// put records a put of key at rev, which must be above every revision in
// the index, once encode, given the key's create_revision and version as
// the put makes them, has succeeded; it returns encode's result, and
// encode's error as it is. On error nothing changed. The key is copied if
// new to the index. One lookup serves both the put and what it reads.
func (ti *treeIndex) put(key []byte, rev Revision, encode func(created, ver int64) ([]byte, error)) ([]byte, error) {
	ti.mu.Lock()
	defer ti.mu.Unlock()
	created, ver := rev.Main, int64(0)
	ki := ti.lookupLocked(key)
	if ki != nil {
		if _, c, v, err := ki.get(rev.Main); err == nil {
			created, ver = c.Main, v
		}
	}
	data, err := encode(created, ver+1)
	if err != nil {
		return nil, err
	}
	isNew := ki == nil
	if isNew {
		ki = &keyIndex{key: slices.Clone(key)}
	}
	if err := ki.put(rev); err != nil {
		return nil, fmt.Errorf("mvcc: %w", err)
	}
	if isNew {
		ti.tree.ReplaceOrInsert(ki)
	}
	return data, nil
}

// tombstone records the deletion of key at rev.
func (ti *treeIndex) tombstone(key []byte, rev Revision) error {
	ti.mu.Lock()
	defer ti.mu.Unlock()
	ki := ti.lookupLocked(key)
	if ki == nil {
		return errRevisionNotFound
	}
	return ki.tombstone(rev)
}

// indexEntry is what the index knows of a key at a revision: enough to
// filter and sort a range without reading values.
type indexEntry struct {
	key     []byte
	mod     Revision
	created int64
	ver     int64
}

// visit calls fn, in key order, for each key in [key, end) that exists at
// atRev; end nil means key alone, end empty means every key from key on.
// fn runs under the index's read lock: it must not block or touch the
// index. It stops when fn returns false.
func (ti *treeIndex) visit(key, end []byte, atRev int64, fn func(e indexEntry) bool) {
	if end == nil {
		ti.mu.RLock()
		var e indexEntry
		ok := false
		if ki := ti.lookup(key); ki != nil {
			if mod, created, ver, err := ki.get(atRev); err == nil {
				e, ok = indexEntry{key: ki.key, mod: mod, created: created.Main, ver: ver}, true
			}
		}
		ti.mu.RUnlock()
		if ok {
			fn(e)
		}
		return
	}
	from := key
	for {
		n, stop := 0, false
		var last []byte
		ti.mu.RLock()
		ti.tree.AscendGreaterOrEqual(&keyIndex{key: from}, func(ki *keyIndex) bool {
			if len(end) > 0 && bytes.Compare(ki.key, end) >= 0 {
				stop = true
				return false
			}
			if n == visitChunk {
				return false
			}
			n++
			last = ki.key
			if mod, created, ver, err := ki.get(atRev); err == nil {
				if !fn(indexEntry{key: ki.key, mod: mod, created: created.Main, ver: ver}) {
					stop = true
					return false
				}
			}
			return true
		})
		ti.mu.RUnlock()
		if stop || n < visitChunk {
			return
		}
		from = append(slices.Clip(last), 0)
	}
}

// compact compacts every key at rev, drops the keys left empty, and returns
// the revisions at or below rev that the backend must keep.
func (ti *treeIndex) compact(rev int64) map[Revision]struct{} {
	available := make(map[Revision]struct{})
	ti.mu.Lock()
	defer ti.mu.Unlock()
	var empty []*keyIndex
	ti.tree.Ascend(func(ki *keyIndex) bool {
		ki.compact(rev, available)
		if ki.isEmpty() {
			empty = append(empty, ki)
		}
		return true
	})
	for _, ki := range empty {
		ti.tree.Delete(ki)
	}
	return available
}

// keep returns what compact(rev) would keep, without compacting.
func (ti *treeIndex) keep(rev int64) map[Revision]struct{} {
	available := make(map[Revision]struct{})
	ti.mu.RLock()
	defer ti.mu.RUnlock()
	ti.tree.Ascend(func(ki *keyIndex) bool {
		ki.keep(rev, available)
		return true
	})
	return available
}

// len is the number of keys in the index, deleted ones not yet compacted
// away included.
func (ti *treeIndex) len() int {
	ti.mu.RLock()
	defer ti.mu.RUnlock()
	return ti.tree.Len()
}
