package mvcc

import (
	"bytes"
	"encoding/binary"
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
	tree *btree.BTreeG[indexItem]
	// last bounds every key in the tree from above (nil: the tree is
	// empty): a put of a key after it, as keys that grow in order are
	// (time-ordered names, etcd's benchmark), inserts without searching
	// first. Deletions leave it, still a bound. Under the write lock.
	last []byte
	// probe holds the key a writer searches for, under the write lock:
	// a search needs a keyIndex, and a writer's needs no allocation.
	probe keyIndex
}

// indexItem is one key of the index: its history, and the key's first 8
// bytes beside it, so that a search compares 8-byte prefixes in the node it
// reads and loads a key's bytes only when they tie.
type indexItem struct {
	prefix uint64
	ki     *keyIndex
}

// keyPrefix is the first 8 bytes of key, big-endian, zero-padded: when two
// keys' prefixes differ, they order the keys.
func keyPrefix(key []byte) uint64 {
	if len(key) >= 8 {
		return binary.BigEndian.Uint64(key)
	}
	var b [8]byte
	copy(b[:], key)
	return binary.BigEndian.Uint64(b[:])
}

func item(ki *keyIndex) indexItem { return indexItem{prefix: keyPrefix(ki.key), ki: ki} }

func indexLess(a, b indexItem) bool {
	if a.prefix != b.prefix {
		return a.prefix < b.prefix
	}
	return bytes.Compare(a.ki.key, b.ki.key) < 0
}

// indexDegree is the B-tree's degree, etcd's: nodes of 31 to 63 keys.
const indexDegree = 32

func newTreeIndex() *treeIndex {
	return &treeIndex{tree: btree.NewG(indexDegree, indexLess)}
}

// lookup returns key's index, or nil, for a caller that holds the write
// lock or has the index to itself.
func (ti *treeIndex) lookup(key []byte) *keyIndex {
	ti.probe.key = key
	it, _ := ti.tree.Get(item(&ti.probe))
	ti.probe.key = nil
	return it.ki
}

// search returns key's index, or nil, for a caller that holds the read
// lock.
func (ti *treeIndex) search(key []byte) *keyIndex {
	it, _ := ti.tree.Get(item(&keyIndex{key: key}))
	return it.ki
}

// insert adds ki, whose key the index does not hold, under the write
// lock.
func (ti *treeIndex) insert(ki *keyIndex) {
	ti.tree.ReplaceOrInsert(item(ki))
	if ti.last == nil || bytes.Compare(ki.key, ti.last) > 0 {
		ti.last = ki.key
	}
}

// get returns key's revision, creation and version at atRev.
func (ti *treeIndex) get(key []byte, atRev int64) (modified, created Revision, ver int64, err error) {
	ti.mu.RLock()
	defer ti.mu.RUnlock()
	ki := ti.search(key)
	if ki == nil {
		return Revision{}, Revision{}, 0, errRevisionNotFound
	}
	return ki.get(atRev)
}

// put records a put of key at rev, which must be above every revision in
// the index, once encode, given the key's create_revision and version as
// the put makes them, has succeeded; it returns encode's result, and
// encode's error as it is. On error nothing changed. The key is copied if
// new to the index. One lookup serves both the put and what it reads, and
// none is needed for a key after every key in the index.
func (ti *treeIndex) put(key []byte, rev Revision, encode func(created, ver int64) ([]byte, error)) ([]byte, error) {
	ti.mu.Lock()
	defer ti.mu.Unlock()
	var ki *keyIndex
	if ti.last != nil && bytes.Compare(key, ti.last) <= 0 {
		ki = ti.lookup(key)
	}
	if ki == nil {
		data, err := encode(rev.Main, 1)
		if err != nil {
			return nil, err
		}
		ki, err := newKeyIndex(key, rev)
		if err != nil {
			return nil, fmt.Errorf("mvcc: %w", err)
		}
		ti.insert(ki)
		return data, nil
	}
	data, err := encode(ki.nextPut(rev.Main))
	if err != nil {
		return nil, err
	}
	if err := ki.put(rev); err != nil {
		return nil, fmt.Errorf("mvcc: %w", err)
	}
	return data, nil
}

// tombstone records the deletion of key at rev.
func (ti *treeIndex) tombstone(key []byte, rev Revision) error {
	ti.mu.Lock()
	defer ti.mu.Unlock()
	ki := ti.lookup(key)
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
		if ki := ti.search(key); ki != nil {
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
	from := &keyIndex{key: key} // where the next chunk starts
	for {
		n, stop := 0, false
		var last []byte
		ti.mu.RLock()
		ti.tree.AscendGreaterOrEqual(item(from), func(it indexItem) bool {
			if len(end) > 0 && bytes.Compare(it.ki.key, end) >= 0 {
				stop = true
				return false
			}
			if n == visitChunk {
				return false
			}
			n++
			last = it.ki.key
			if mod, created, ver, err := it.ki.get(atRev); err == nil {
				if !fn(indexEntry{key: it.ki.key, mod: mod, created: created.Main, ver: ver}) {
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
		from.key = append(slices.Clip(last), 0)
	}
}

// compact compacts every key at rev, drops the keys left empty, and returns
// the revisions at or below rev that the backend must keep.
func (ti *treeIndex) compact(rev int64) map[Revision]struct{} {
	available := make(map[Revision]struct{})
	ti.mu.Lock()
	defer ti.mu.Unlock()
	var empty []indexItem
	ti.tree.Ascend(func(it indexItem) bool {
		it.ki.compact(rev, available)
		if it.ki.isEmpty() {
			empty = append(empty, it)
		}
		return true
	})
	for _, it := range empty {
		ti.tree.Delete(it)
	}
	return available
}

// keep returns what compact(rev) would keep, without compacting.
func (ti *treeIndex) keep(rev int64) map[Revision]struct{} {
	available := make(map[Revision]struct{})
	ti.mu.RLock()
	defer ti.mu.RUnlock()
	ti.tree.Ascend(func(it indexItem) bool {
		it.ki.keep(rev, available)
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
