package mvcc

import (
	"bytes"
	"cmp"
	"container/heap"
	"context"
	"fmt"
	"slices"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// RangeOptions are etcd's RangeRequest options, with its meaning.
type RangeOptions struct {
	// Rev is the revision to read at; 0 (or less) is the current one.
	Rev int64
	// Limit bounds the number of keys returned; 0 (or less) is no bound.
	Limit int64
	// CountOnly returns the count alone.
	CountOnly bool
	// KeysOnly leaves values out (leases and revisions stay).
	KeysOnly bool
	// SortOrder and SortTarget sort the result, as etcd: NONE with target
	// KEY is key order; NONE with another target is ASCEND.
	SortOrder  pb.RangeRequest_SortOrder
	SortTarget pb.RangeRequest_SortTarget
	// Filters; 0 is no filter. They drop keys from the result but not
	// from Count, as etcd's.
	MinModRevision, MaxModRevision       int64
	MinCreateRevision, MaxCreateRevision int64
}

// RangeResult is etcd's RangeResponse content.
type RangeResult struct {
	// KVs are the keys, sorted and limited.
	KVs []*mvccpb.KeyValue
	// Count is the number of keys in the range at the revision read, before
	// filters and limit (etcd's count).
	Count int64
	// More is set when the limit cut the result: more keys (after filters)
	// than Limit.
	More bool
	// Rev is the revision of the store when the read was served (the
	// response header's revision), not the revision read at.
	Rev int64
}

// normalizeRange turns the API's end convention (nil or empty: key alone;
// "\x00": from key on) into the index's (nil: key alone; empty: no bound).
func normalizeRange(key, end []byte) ([]byte, []byte) {
	switch {
	case len(end) == 0:
		return key, nil
	case len(end) == 1 && end[0] == 0:
		return key, []byte{}
	}
	return key, end
}

// candidate is a key selected for a range result, with what sorting
// needs; kv is read when the value is needed for sorting, else at the end.
type candidate struct {
	indexEntry
	kv *mvccpb.KeyValue
}

// order compares candidates in result order: by target, then by key so
// that the order is total (etcd leaves ties unspecified), all reversed for
// DESCEND.
func order(target pb.RangeRequest_SortTarget, desc bool) func(a, b *candidate) int {
	var by func(a, b *candidate) int
	switch target {
	case pb.RangeRequest_VERSION:
		by = func(a, b *candidate) int { return cmp.Compare(a.ver, b.ver) }
	case pb.RangeRequest_CREATE:
		by = func(a, b *candidate) int { return cmp.Compare(a.created, b.created) }
	case pb.RangeRequest_MOD:
		by = func(a, b *candidate) int { return cmp.Compare(a.mod.Main, b.mod.Main) }
	case pb.RangeRequest_VALUE:
		by = func(a, b *candidate) int { return bytes.Compare(a.kv.Value, b.kv.Value) }
	default:
		by = func(a, b *candidate) int { return 0 }
	}
	return func(a, b *candidate) int {
		c := by(a, b)
		if c == 0 {
			c = bytes.Compare(a.key, b.key)
		}
		if desc {
			return -c
		}
		return c
	}
}

// topK keeps the k first candidates in an order: a heap with the last of
// them on top.
type topK struct {
	k    int
	cmp  func(a, b *candidate) int
	heap []*candidate
}

func (t *topK) Len() int           { return len(t.heap) }
func (t *topK) Less(i, j int) bool { return t.cmp(t.heap[i], t.heap[j]) > 0 }
func (t *topK) Swap(i, j int)      { t.heap[i], t.heap[j] = t.heap[j], t.heap[i] }
func (t *topK) Push(x any)         { t.heap = append(t.heap, x.(*candidate)) }
func (t *topK) Pop() any {
	x := t.heap[len(t.heap)-1]
	t.heap = t.heap[:len(t.heap)-1]
	return x
}

func (t *topK) add(c *candidate) {
	if len(t.heap) < t.k {
		heap.Push(t, c)
		return
	}
	if t.cmp(c, t.heap[0]) < 0 {
		t.heap[0] = c
		heap.Fix(t, 0)
	}
}

// sorted returns the kept candidates in order.
func (t *topK) sorted() []*candidate {
	out := t.heap
	slices.SortFunc(out, t.cmp)
	return out
}

// ctxCheckEvery is how many keys a range walks between context checks.
const ctxCheckEvery = 1024

// rangeKeys is etcd's Range with its apply layer's options (executeRange),
// computed while walking the index:
//
//   - Count is the number of keys in the range at rev, from the index alone.
//   - Without sort order or filters, etcd reads Limit+1 keys in key order
//     (then, for a target other than KEY, sorts them ascending): the walk
//     keeps as many and only counts the rest.
//   - With a sort order or filters, etcd reads every key, filters, sorts
//     and cuts at Limit: the walk filters from the index, and keeps the
//     Limit first in the sort order in a bounded heap (sort targets key,
//     version, create and mod come from the index), so only the returned
//     keys' values are read. Sorting by value is the one case that reads
//     the value of every key that passes the filters; with a limit it
//     still keeps only Limit of them in memory.
//
// key and end follow the API convention (see Store.Range).
func (s *Store) rangeKeys(ctx context.Context, v *view, key, end []byte, curRev, compactRev int64, o RangeOptions) (*RangeResult, error) {
	rev := o.Rev
	if rev > curRev {
		return &RangeResult{Rev: curRev}, ErrFutureRev
	}
	if rev <= 0 {
		rev = curRev
	}
	if rev < compactRev {
		return &RangeResult{Rev: curRev}, ErrCompacted
	}
	if _, ok := pb.RangeRequest_SortOrder_name[int32(o.SortOrder)]; !ok {
		return nil, fmt.Errorf("mvcc: unknown sort order %d", o.SortOrder)
	}
	if _, ok := pb.RangeRequest_SortTarget_name[int32(o.SortTarget)]; !ok {
		return nil, fmt.Errorf("mvcc: unknown sort target %d", o.SortTarget)
	}
	key, end = normalizeRange(key, end)
	res := &RangeResult{Rev: curRev}

	var err error
	walked := 0
	checkCtx := func() bool {
		walked++
		if walked%ctxCheckEvery == 0 {
			if cerr := ctx.Err(); cerr != nil {
				err = fmt.Errorf("mvcc: range: %w", cerr)
				return false
			}
		}
		return true
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("mvcc: range: %w", err)
	}

	if o.CountOnly {
		s.ix.visit(key, end, rev, func(indexEntry) bool {
			res.Count++
			return checkCtx()
		})
		if err != nil {
			return nil, err
		}
		return res, nil
	}

	limit := max(o.Limit, 0)
	filtered := o.MinModRevision != 0 || o.MaxModRevision != 0 || o.MinCreateRevision != 0 || o.MaxCreateRevision != 0
	fetchAll := o.SortOrder != pb.RangeRequest_NONE || filtered
	sortOrder := o.SortOrder
	switch {
	case o.SortTarget != pb.RangeRequest_KEY && sortOrder == pb.RangeRequest_NONE:
		sortOrder = pb.RangeRequest_ASCEND
	case o.SortTarget == pb.RangeRequest_KEY && sortOrder == pb.RangeRequest_ASCEND:
		sortOrder = pb.RangeRequest_NONE
	}
	target := o.SortTarget
	if sortOrder == pb.RangeRequest_NONE {
		target = pb.RangeRequest_KEY
	}
	byValue := target == pb.RangeRequest_VALUE
	less := order(target, sortOrder == pb.RangeRequest_DESCEND)

	pass := func(e *indexEntry) bool {
		return (o.MaxModRevision == 0 || e.mod.Main <= o.MaxModRevision) &&
			(o.MinModRevision == 0 || e.mod.Main >= o.MinModRevision) &&
			(o.MaxCreateRevision == 0 || e.created <= o.MaxCreateRevision) &&
			(o.MinCreateRevision == 0 || e.created >= o.MinCreateRevision)
	}

	var cands []*candidate
	var passed int64
	switch {
	case !fetchAll:
		// etcd reads Limit+1 keys in key order, then may sort them.
		take := int64(-1)
		if limit > 0 {
			take = limit + 1
		}
		s.ix.visit(key, end, rev, func(e indexEntry) bool {
			res.Count++
			if take < 0 || int64(len(cands)) < take {
				cands = append(cands, &candidate{indexEntry: e})
			}
			return checkCtx()
		})
		passed = int64(len(cands))
		if err != nil {
			return nil, err
		}
		if sortOrder != pb.RangeRequest_NONE {
			if byValue {
				if err := s.loadValues(ctx, v, cands); err != nil {
					return nil, err
				}
			}
			slices.SortFunc(cands, less)
		}
	case byValue:
		// Every value that passes the filters must be read; the index
		// walk only selects them, the reads happen outside its lock.
		s.ix.visit(key, end, rev, func(e indexEntry) bool {
			res.Count++
			if pass(&e) {
				cands = append(cands, &candidate{indexEntry: e})
			}
			return checkCtx()
		})
		if err != nil {
			return nil, err
		}
		passed = int64(len(cands))
		if limit > 0 && passed > limit {
			top := &topK{k: int(limit), cmp: less}
			for i, c := range cands {
				if err := s.loadValues(ctx, v, cands[i:i+1]); err != nil {
					return nil, err
				}
				top.add(c)
				cands[i] = nil
			}
			cands = top.sorted()
		} else {
			if err := s.loadValues(ctx, v, cands); err != nil {
				return nil, err
			}
			slices.SortFunc(cands, less)
		}
	default:
		var top *topK
		if limit > 0 {
			top = &topK{k: int(limit), cmp: less}
		}
		s.ix.visit(key, end, rev, func(e indexEntry) bool {
			res.Count++
			if pass(&e) {
				passed++
				c := &candidate{indexEntry: e}
				if top != nil {
					top.add(c)
				} else {
					cands = append(cands, c)
				}
			}
			return checkCtx()
		})
		if err != nil {
			return nil, err
		}
		if top != nil {
			cands = top.sorted()
		} else {
			slices.SortFunc(cands, less)
		}
	}
	if limit > 0 && passed > limit {
		res.More = true
		cands = cands[:min(int64(len(cands)), limit)]
	}
	if err := s.loadValues(ctx, v, cands); err != nil {
		return nil, err
	}
	res.KVs = make([]*mvccpb.KeyValue, len(cands))
	for i, c := range cands {
		if o.KeysOnly {
			c.kv.Value = nil
		}
		res.KVs[i] = c.kv
	}
	return res, nil
}

// loadValues reads the stored KeyValue of each candidate not read yet.
func (s *Store) loadValues(ctx context.Context, v *view, cands []*candidate) error {
	for i, c := range cands {
		if c.kv != nil {
			continue
		}
		if i%ctxCheckEvery == ctxCheckEvery-1 {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("mvcc: range: %w", err)
			}
		}
		kv, err := s.readKV(v, c.key, c.mod)
		if err != nil {
			return err
		}
		c.kv = kv
	}
	return nil
}

// readKV reads the KeyValue that the index says key has at rev.
func (s *Store) readKV(v *view, key []byte, rev Revision) (*mvccpb.KeyValue, error) {
	data := v.get(bucketKey, revKey(rev, false))
	if data == nil {
		return nil, fmt.Errorf("%w: key %q: revision %d.%d is in the index but not in the key bucket", ErrCorrupt, key, rev.Main, rev.Sub)
	}
	kv, err := decodeValue(rev, false, data)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if !bytes.Equal(kv.Key, key) {
		return nil, fmt.Errorf("%w: revision %d.%d holds key %q, the index says %q", ErrCorrupt, rev.Main, rev.Sub, kv.Key, key)
	}
	return kv, nil
}

// getKV returns key's KeyValue at rev, or nil if it does not exist then.
func (s *Store) getKV(v *view, key []byte, rev int64) (*mvccpb.KeyValue, error) {
	mod, _, _, err := s.ix.get(key, rev)
	if err != nil {
		return nil, nil
	}
	return s.readKV(v, key, mod)
}
