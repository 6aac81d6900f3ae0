package kvfsm

import (
	"errors"
	"fmt"
	"sync"

	"github.com/edictlog/edictlog/fsm"
	"github.com/google/btree"
)

// ErrOutOfOrder is returned (as Apply's response) for an entry whose index
// is not above the last applied one: applying it again or out of order
// would corrupt revisions, so KV refuses it and changes nothing. It means
// the caller broke the fsm.FSM contract; the log should treat it as fatal.
var ErrOutOfOrder = errors.New("fsm: entry applied out of order")

// item is what the tree holds: the key beside a pointer to the key's
// state, so that lookups build a probe without allocating. A *KeyValue in
// the tree is never modified: a write replaces it. That is what lets
// readers, snapshots and results share it.
type item struct {
	key string
	kv  *KeyValue
}

func itemLess(a, b item) bool { return a.key < b.key }

// btreeDegree is the B-tree's minimum degree: nodes hold 31–63 items,
// small enough that copy-on-write after a snapshot copies little, large
// enough that the tree stays shallow.
const btreeDegree = 32

func newTree() *btree.BTreeG[item] { return btree.NewG(btreeDegree, itemLess) }

// view is a read-only state: a clone of the tree that nothing writes, and
// the revision it reflects.
type view struct {
	tree *btree.BTreeG[item]
	rev  uint64
}

// KV is the etcd-like key-value state machine. It implements fsm.FSM,
// fsm.BatchFSM and fsm.Querier.
//
// Concurrency: Apply, ApplyBatch, fsm.Snapshot and Restore follow the fsm.FSM
// contract (one goroutine). Get, Range, Query and Revision are safe for
// concurrent use with all of them. Writers hold mu exclusively for a whole
// entry (or batch), so readers never see half a transaction. Point reads
// hold mu shared while they look up one key. Multi-key reads and snapshots
// do not hold mu while they iterate: they take a copy-on-write clone of the
// B-tree (O(1); google/btree then copies a node only when a later write
// touches it) and iterate that, so a long range or a snapshot being written
// never stalls Apply. The price is paid by the writer: after a clone, the
// first write through a shared node copies it (once per node per clone).
// The clone is cached until the next write, so a burst of range reads
// between two writes shares one clone.
type KV struct {
	mu   sync.RWMutex
	tree *btree.BTreeG[item]
	rev  uint64
	// frozen caches a clone of tree at rev; nil once anything is applied.
	frozen *view
}

// NewKV returns an empty KV at revision 0.
func NewKV() *KV { return &KV{tree: newTree()} }

// Revision returns the index of the last applied entry: every entry bumps
// it, including no-ops and refused commands (etcd bumps its revision only
// on writes; here revisions are log indexes).
func (kv *KV) Revision() uint64 {
	kv.mu.RLock()
	defer kv.mu.RUnlock()
	return kv.rev
}

// Len returns the number of keys.
func (kv *KV) Len() int {
	kv.mu.RLock()
	defer kv.mu.RUnlock()
	return kv.tree.Len()
}

// Apply applies one entry. It returns *Result for a KV command, nil for an
// entry with empty Data (a log-internal no-op), and an error for a command
// that does not decode or validate (wrapping ErrInvalid; nothing but the
// revision changes) or for an out-of-order index (ErrOutOfOrder; nothing
// changes).
func (kv *KV) Apply(e fsm.Entry) any {
	kv.mu.Lock()
	defer kv.mu.Unlock()
	return kv.applyLocked(e)
}

// ApplyBatch applies entries in order under one lock acquisition; readers
// see the state before or after the whole batch.
func (kv *KV) ApplyBatch(es []fsm.Entry) []any {
	out := make([]any, len(es))
	kv.mu.Lock()
	defer kv.mu.Unlock()
	for i := range es {
		out[i] = kv.applyLocked(es[i])
	}
	return out
}

func (kv *KV) applyLocked(e fsm.Entry) any {
	if e.Index <= kv.rev {
		return fmt.Errorf("%w: index %d after %d", ErrOutOfOrder, e.Index, kv.rev)
	}
	kv.rev = e.Index
	kv.frozen = nil
	if len(e.Data) == 0 {
		return nil
	}
	cmd, err := DecodeCommand(e.Data)
	if err != nil {
		return fmt.Errorf("fsm: apply entry %d: %w", e.Index, err)
	}
	// A stamp that Restore would refuse must not get into the state.
	if err := e.Stamp.WellFormed(); err != nil {
		return fmt.Errorf("fsm: apply entry %d: %w", e.Index, err)
	}
	w := writer{tree: kv.tree, index: e.Index, stamp: cloneStamp(e.Stamp)}
	return w.command(&cmd)
}

// Get returns key's state, if the key exists.
func (kv *KV) Get(key string) (KeyValue, bool) {
	kv.mu.RLock()
	defer kv.mu.RUnlock()
	it, ok := kv.tree.Get(item{key: key})
	if !ok {
		return KeyValue{}, false
	}
	return *it.kv, true
}

// Range answers r from the applied state. The error wraps ErrInvalid.
func (kv *KV) Range(r Range) (Result, error) {
	if err := r.validate(); err != nil {
		return Result{}, invalid("range", err)
	}
	return kv.read(&r), nil
}

func (kv *KV) read(r *Range) Result {
	if r.RangeEnd == "" {
		// One key: a lookup under the read lock is cheaper than a clone.
		kv.mu.RLock()
		defer kv.mu.RUnlock()
		return Result{Revision: kv.rev, Range: rangeTree(kv.tree, r)}
	}
	v := kv.view()
	return Result{Revision: v.rev, Range: rangeTree(v.tree, r)}
}

// Query answers an encoded Range (EncodeQuery) with an encoded Result
// (DecodeResult). It is safe for concurrent use with Apply.
func (kv *KV) Query(q []byte) ([]byte, error) {
	r, err := DecodeQuery(q)
	if err != nil {
		return nil, err
	}
	res := kv.read(&r)
	b, err := EncodeResult(&res)
	if err != nil {
		return nil, fmt.Errorf("fsm: query %q: %w", r.Key, err)
	}
	return b, nil
}

// view returns a read-only clone of the current state. Clone writes the
// original tree's copy-on-write context, so it needs mu exclusively; the
// cache makes that rare.
func (kv *KV) view() *view {
	kv.mu.RLock()
	v := kv.frozen
	kv.mu.RUnlock()
	if v != nil {
		return v
	}
	kv.mu.Lock()
	defer kv.mu.Unlock()
	if kv.frozen == nil {
		kv.frozen = &view{tree: kv.tree.Clone(), rev: kv.rev}
	}
	return kv.frozen
}
