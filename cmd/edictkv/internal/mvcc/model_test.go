package mvcc

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/edictlog/edictlog/cmd/edictkv/internal/mvcc/backend"
)

var (
	flagSeed     = flag.Uint64("mvcc.seed", 0, "run the model test with this seed only")
	flagSeeds    = flag.Int("mvcc.seeds", 0, "number of seeds per backend for the model test (default 24 memory, 8 bolt; 4 and 2 with -short)")
	flagOps      = flag.Int("mvcc.ops", 400, "operations per seed in the model test")
	flagParanoid = flag.Bool("mvcc.paranoid", false, "check every key at every revision after every operation of the model test")
)

// mkv is a key's state in the model.
type mkv struct {
	value                   string
	create, mod, ver, lease int64
}

type checkpoint struct {
	index      uint64
	rev        int64
	compactRev int64
}

// model is the store's specification: the whole state at every revision,
// and the applied entries, so that a crash can be undone to any of them.
type model struct {
	states      []map[string]mkv // states[r]: the state at revision r; states[0] unused
	revIndex    map[int64]uint64
	compactRev  int64
	index       uint64
	checkpoints []checkpoint
}

func newModel() *model {
	return &model{
		states:      []map[string]mkv{nil, {}},
		revIndex:    map[int64]uint64{},
		compactRev:  -1,
		checkpoints: []checkpoint{{index: 0, rev: 1, compactRev: -1}},
	}
}

func (m *model) rev() int64 { return int64(len(m.states) - 1) }

func (m *model) applied(index uint64) {
	m.index = index
	m.checkpoints = append(m.checkpoints, checkpoint{index: index, rev: m.rev(), compactRev: m.compactRev})
}

// crashTo undoes every entry after index.
func (m *model) crashTo(index uint64) error {
	i := slices.IndexFunc(m.checkpoints, func(c checkpoint) bool { return c.index == index })
	if i < 0 {
		return fmt.Errorf("durable index %d is no entry boundary of the model", index)
	}
	c := m.checkpoints[i]
	m.checkpoints = m.checkpoints[:i+1]
	m.states = m.states[:c.rev+1]
	m.compactRev = c.compactRev
	m.index = c.index
	for r := range m.revIndex {
		if r > c.rev {
			delete(m.revIndex, r)
		}
	}
	return nil
}

// inRange is the API's key/end convention.
func inRange(k, key, end string) bool {
	switch {
	case end == "":
		return k == key
	case end == "\x00":
		return k >= key
	}
	return k >= key && k < end
}

func (m *model) kv(k string, s mkv) *mvccpb.KeyValue {
	return &mvccpb.KeyValue{Key: []byte(k), Value: []byte(s.value), CreateRevision: s.create, ModRevision: s.mod, Version: s.ver, Lease: s.lease}
}

// modelRange is etcd's executeRange over a state, word for word, with
// ties in sorts broken by key (ascending order; reversed for DESCEND).
func (m *model) modelRange(state map[string]mkv, key, end string, curRev int64, o RangeOptions) *RangeResult {
	var all []*mvccpb.KeyValue
	for _, k := range slices.Sorted(maps.Keys(state)) {
		if inRange(k, key, end) {
			all = append(all, m.kv(k, state[k]))
		}
	}
	res := &RangeResult{Rev: curRev, Count: int64(len(all))}
	if o.CountOnly {
		return res
	}
	limit := o.Limit
	if o.SortOrder != pb.RangeRequest_NONE || o.MinModRevision != 0 || o.MaxModRevision != 0 || o.MinCreateRevision != 0 || o.MaxCreateRevision != 0 {
		limit = 0
	}
	if limit > 0 {
		limit++
	}
	kvs := all
	if limit > 0 && int64(len(kvs)) > limit {
		kvs = kvs[:limit]
	}
	kvs = slices.DeleteFunc(slices.Clone(kvs), func(kv *mvccpb.KeyValue) bool {
		return (o.MaxModRevision != 0 && kv.ModRevision > o.MaxModRevision) ||
			(o.MinModRevision != 0 && kv.ModRevision < o.MinModRevision) ||
			(o.MaxCreateRevision != 0 && kv.CreateRevision > o.MaxCreateRevision) ||
			(o.MinCreateRevision != 0 && kv.CreateRevision < o.MinCreateRevision)
	})
	sortOrder := o.SortOrder
	if o.SortTarget != pb.RangeRequest_KEY && sortOrder == pb.RangeRequest_NONE {
		sortOrder = pb.RangeRequest_ASCEND
	} else if o.SortTarget == pb.RangeRequest_KEY && sortOrder == pb.RangeRequest_ASCEND {
		sortOrder = pb.RangeRequest_NONE
	}
	if sortOrder != pb.RangeRequest_NONE {
		by := func(a, b *mvccpb.KeyValue) int {
			var c int
			switch o.SortTarget {
			case pb.RangeRequest_VERSION:
				c = cmp.Compare(a.Version, b.Version)
			case pb.RangeRequest_CREATE:
				c = cmp.Compare(a.CreateRevision, b.CreateRevision)
			case pb.RangeRequest_MOD:
				c = cmp.Compare(a.ModRevision, b.ModRevision)
			case pb.RangeRequest_VALUE:
				c = bytes.Compare(a.Value, b.Value)
			}
			if c == 0 {
				c = bytes.Compare(a.Key, b.Key)
			}
			if sortOrder == pb.RangeRequest_DESCEND {
				c = -c
			}
			return c
		}
		slices.SortFunc(kvs, by)
	}
	if o.Limit > 0 && int64(len(kvs)) > o.Limit {
		kvs = kvs[:o.Limit]
		res.More = true
	}
	for _, kv := range kvs {
		if o.KeysOnly {
			kv.Value = nil
		}
	}
	res.KVs = kvs
	return res
}

// expectRange is what the model says a range at o.Rev gives, or its error.
func (m *model) expectRange(state func(rev int64) map[string]mkv, key, end string, curRev int64, o RangeOptions) (*RangeResult, error) {
	rev := o.Rev
	if rev > curRev {
		return nil, ErrFutureRev
	}
	if rev <= 0 {
		rev = curRev
	}
	if rev < m.compactRev {
		return nil, ErrCompacted
	}
	return m.modelRange(state(rev), key, end, curRev, o), nil
}

func sameResult(got, want *RangeResult) error {
	if got.Count != want.Count || got.More != want.More || got.Rev != want.Rev || len(got.KVs) != len(want.KVs) {
		return fmt.Errorf("count %d more %v rev %d with %d kvs, want count %d more %v rev %d with %d kvs\ngot  %v\nwant %v",
			got.Count, got.More, got.Rev, len(got.KVs), want.Count, want.More, want.Rev, len(want.KVs), got.KVs, want.KVs)
	}
	for i := range got.KVs {
		if !kvEqual(got.KVs[i], want.KVs[i]) {
			return fmt.Errorf("kv %d is %v, want %v", i, got.KVs[i], want.KVs[i])
		}
	}
	return nil
}

func kvEqual(a, b *mvccpb.KeyValue) bool {
	return bytes.Equal(a.Key, b.Key) && bytes.Equal(a.Value, b.Value) && a.CreateRevision == b.CreateRevision &&
		a.ModRevision == b.ModRevision && a.Version == b.Version && a.Lease == b.Lease
}

// modelRun drives one store and its model with one seed.
type modelRun struct {
	t    *testing.T
	rng  *rand.Rand
	seed uint64
	kind string // "memory" or "bolt"
	opts Options
	mem  *backend.Memory
	path string
	s    *Store
	m    *model
	step int
	// trace is the last operations, for failure messages.
	trace []string
	// tw is the write transaction in progress: a failure inside one ends
	// it before the store is closed, since Close waits for it.
	tw *TxnWrite
}

func (r *modelRun) note(format string, args ...any) {
	r.trace = append(r.trace, fmt.Sprintf("%d: ", r.step)+fmt.Sprintf(format, args...))
	if len(r.trace) > 12 {
		r.trace = r.trace[1:]
	}
}

var modelKeys = func() []string {
	var ks []string
	for i := range 16 {
		ks = append(ks, fmt.Sprintf("k%02d", i))
	}
	return append(ks, "a", "k", "k05/x", "z\xff")
}()

func (r *modelRun) fatalf(format string, args ...any) {
	r.t.Helper()
	r.t.Fatalf("seed %d (%s), step %d: %s\nlast operations:\n  %s\nreplay: go test ./cmd/edictkv/internal/mvcc/ -run TestModel -mvcc.seed=%d -mvcc.ops=%d",
		r.seed, r.kind, r.step, fmt.Sprintf(format, args...), strings.Join(r.trace, "\n  "), r.seed, *flagOps)
}

func (r *modelRun) open() {
	r.s = nil
	var err error
	if r.kind == "memory" {
		r.s, err = Open(r.mem, r.opts)
	} else {
		r.s, err = OpenFile(r.path, testBoltOptions, r.opts)
	}
	if err != nil {
		r.fatalf("open: %v", err)
	}
}

func (r *modelRun) key() string { return modelKeys[r.rng.IntN(len(modelKeys))] }

// keyRange picks a key and an end: a single key, a range, from-key, or an
// empty range.
func (r *modelRun) keyRange() (string, string) {
	k := r.key()
	switch r.rng.IntN(5) {
	case 0, 1:
		return k, ""
	case 2:
		return k, "\x00"
	default:
		e := r.key()
		if e == k {
			e = k + "\x00"
		}
		return k, e
	}
}

func bytesOrNil(s string) []byte {
	if s == "" {
		return nil
	}
	return []byte(s)
}

func (r *modelRun) nextIndex() uint64 { return r.m.index + 1 + uint64(r.rng.IntN(3)) }

func (r *modelRun) rangeOptions(curRev int64) RangeOptions {
	o := RangeOptions{}
	switch r.rng.IntN(4) {
	case 0:
		o.Rev = r.rng.Int64N(curRev+3) - 1
	case 1:
		o.Rev = max(r.m.compactRev, 1) + r.rng.Int64N(max(curRev-r.m.compactRev, 1)+1)
	}
	if r.rng.IntN(2) == 0 {
		o.Limit = r.rng.Int64N(5) - 1
	}
	o.CountOnly = r.rng.IntN(8) == 0
	o.KeysOnly = r.rng.IntN(4) == 0
	if r.rng.IntN(2) == 0 {
		o.SortOrder = pb.RangeRequest_SortOrder(r.rng.IntN(3))
		o.SortTarget = pb.RangeRequest_SortTarget(r.rng.IntN(5))
	}
	filter := func() int64 {
		if r.rng.IntN(4) == 0 {
			return r.rng.Int64N(curRev + 2)
		}
		return 0
	}
	o.MinModRevision, o.MaxModRevision = filter(), filter()
	o.MinCreateRevision, o.MaxCreateRevision = filter(), filter()
	return o
}

// checkRange compares one random range with the model.
func (r *modelRun) checkRange() {
	key, end := r.keyRange()
	cur := r.m.rev()
	o := r.rangeOptions(cur)
	r.compare(key, end, cur, o, func(rev int64) map[string]mkv { return r.m.states[rev] }, func() (*RangeResult, error) {
		return r.s.Range(context.Background(), []byte(key), bytesOrNil(end), o)
	})
}

func (r *modelRun) compare(key, end string, cur int64, o RangeOptions, state func(int64) map[string]mkv, do func() (*RangeResult, error)) {
	r.t.Helper()
	want, werr := r.m.expectRange(state, key, end, cur, o)
	got, err := do()
	if werr != nil || err != nil {
		if !errors.Is(err, werr) || werr == nil {
			r.fatalf("range %q-%q %+v: error %v, want %v", key, end, o, err, werr)
		}
		return
	}
	if err := sameResult(got, want); err != nil {
		r.fatalf("range %q-%q %+v: %v", key, end, o, err)
	}
}

// txnOps runs a random write transaction against the store and the model.
func (r *modelRun) txnOps() {
	index := r.nextIndex()
	tw, err := r.s.Write(index)
	if err != nil {
		r.fatalf("write: %v", err)
	}
	r.tw = tw
	begin := r.m.rev()
	if tw.Rev() != begin {
		r.fatalf("txn rev %d, model %d", tw.Rev(), begin)
	}
	rev := begin + 1
	work := maps.Clone(r.m.states[begin])
	changes := 0
	n := 1 + r.rng.IntN(4)
	if r.rng.IntN(10) == 0 {
		n = 0
	}
	for range n {
		switch r.rng.IntN(7) {
		case 0, 1, 2:
			k := r.key()
			val := fmt.Sprintf("v%d", r.rng.IntN(50))
			lease := int64(r.rng.IntN(3))
			o := PutOptions{PrevKV: r.rng.IntN(2) == 0, IgnoreValue: r.rng.IntN(6) == 0, IgnoreLease: r.rng.IntN(6) == 0}
			prev, had := work[k]
			res, err := tw.Put([]byte(k), []byte(val), lease, o)
			if (o.IgnoreValue || o.IgnoreLease) && !had {
				if !errors.Is(err, ErrKeyNotFound) {
					r.fatalf("put %q ignoring of a missing key: %v", k, err)
				}
				continue
			}
			if err != nil {
				r.fatalf("put: %v", err)
			}
			if o.IgnoreValue {
				val = prev.value
			}
			if o.IgnoreLease {
				lease = prev.lease
			}
			next := mkv{value: val, create: rev, mod: rev, ver: 1, lease: lease}
			if had {
				next.create, next.ver = prev.create, prev.ver+1
			}
			work[k] = next
			changes++
			if res.Rev != rev {
				r.fatalf("put rev %d, want %d", res.Rev, rev)
			}
			if o.PrevKV {
				switch {
				case had && (res.PrevKV == nil || !kvEqual(res.PrevKV, r.m.kv(k, prev))):
					r.fatalf("put prev %v, want %v", res.PrevKV, r.m.kv(k, prev))
				case !had && res.PrevKV != nil:
					r.fatalf("put prev %v of a missing key", res.PrevKV)
				}
			}
		case 3, 4:
			key, end := r.keyRange()
			prevKV := r.rng.IntN(2) == 0
			var want []*mvccpb.KeyValue
			for _, k := range slices.Sorted(maps.Keys(work)) {
				if inRange(k, key, end) {
					want = append(want, r.m.kv(k, work[k]))
					delete(work, k)
				}
			}
			res, err := tw.DeleteRange(context.Background(), []byte(key), bytesOrNil(end), prevKV)
			if err != nil {
				r.fatalf("delete: %v", err)
			}
			changes += len(want)
			wantRev := begin
			if changes > 0 {
				wantRev = rev
			}
			if res.Deleted != int64(len(want)) || res.Rev != wantRev {
				r.fatalf("delete %q-%q: deleted %d at %d, want %d at %d", key, end, res.Deleted, res.Rev, len(want), wantRev)
			}
			if prevKV {
				if err := sameResult(&RangeResult{KVs: res.PrevKVs}, &RangeResult{KVs: want}); err != nil {
					r.fatalf("delete prev kvs: %v", err)
				}
			}
		default:
			key, end := r.keyRange()
			cur := begin
			if changes > 0 {
				cur = rev
			}
			o := r.rangeOptions(cur)
			r.compare(key, end, cur, o, func(at int64) map[string]mkv {
				if at == rev {
					return work
				}
				return r.m.states[at]
			}, func() (*RangeResult, error) {
				return tw.Range(context.Background(), []byte(key), bytesOrNil(end), o)
			})
		}
	}
	r.note("txn at index %d: %d ops, %d changes", index, n, changes)
	got := tw.End()
	r.tw = nil
	if changes > 0 && got != rev || changes == 0 && got != begin {
		r.fatalf("end at %d after %d changes, begun at %d", got, changes, begin)
	}
	if changes > 0 {
		r.m.states = append(r.m.states, work)
		r.m.revIndex[rev] = index
	}
	r.m.applied(index)
}

func (r *modelRun) compact() {
	index := r.nextIndex()
	cur := r.m.rev()
	rev := r.m.compactRev + r.rng.Int64N(cur-r.m.compactRev+2) - 1
	if r.rng.IntN(3) == 0 {
		rev = cur
	}
	_, err := r.s.Compact(index, rev)
	r.note("compact %d at index %d: %v", rev, index, err)
	var want error
	switch {
	case rev <= r.m.compactRev:
		want = ErrCompacted
	case rev > cur:
		want = ErrFutureRev
	default:
		r.m.compactRev = rev
	}
	if !errors.Is(err, want) || (want == nil) != (err == nil) {
		r.fatalf("compact %d (compacted %d, current %d): %v, want %v", rev, r.m.compactRev, cur, err, want)
	}
	r.m.applied(index)
}

func (r *modelRun) compactSteps() {
	for n := r.rng.IntN(4); n >= 0; n-- {
		more, err := r.s.CompactStep()
		r.note("compact step: more %v", more)
		if err != nil {
			r.fatalf("compact step: %v", err)
		}
	}
}

// restart reopens the store: cleanly (Close commits), or after a crash
// that loses what is not committed.
func (r *modelRun) restart() {
	durable := r.s.DurableIndex()
	r.note("restart (durable %d, applied %d)", durable, r.m.index)
	switch {
	case r.kind == "memory":
		r.mem = r.mem.Crash()
	case r.rng.IntN(2) == 0:
		r.s.abandon()
	default:
		if err := r.s.Close(); err != nil {
			r.fatalf("close: %v", err)
		}
		durable = r.m.index
	}
	if err := r.m.crashTo(durable); err != nil {
		r.fatalf("%v", err)
	}
	r.open()
	r.checkMeta()
}

func (r *modelRun) checkMeta() {
	if got, want := r.s.Rev(), r.m.rev(); got != want {
		r.fatalf("rev %d, want %d", got, want)
	}
	if got, want := r.s.CompactRev(), r.m.compactRev; got != want {
		r.fatalf("compact rev %d, want %d", got, want)
	}
	if got, want := r.s.ConsistentIndex(), r.m.index; got != want {
		r.fatalf("consistent index %d, want %d", got, want)
	}
}

// checkAll reads every key at every revision still readable, and the
// revision-to-index map.
func (r *modelRun) checkAll() {
	r.checkMeta()
	cur := r.m.rev()
	for rev := max(r.m.compactRev, 1); rev <= cur; rev++ {
		got, err := r.s.Range(context.Background(), []byte{0}, []byte{0}, RangeOptions{Rev: rev})
		if err != nil {
			r.fatalf("full range at %d: %v", rev, err)
		}
		if err := sameResult(got, r.m.modelRange(r.m.states[rev], "\x00", "\x00", cur, RangeOptions{})); err != nil {
			r.fatalf("full range at %d: %v", rev, err)
		}
		idx, err := r.s.RevisionIndex(rev)
		if err != nil || idx != r.m.revIndex[rev] {
			r.fatalf("revision index of %d: %d, %v; want %d", rev, idx, err, r.m.revIndex[rev])
		}
	}
	if r.m.compactRev > 1 {
		if _, err := r.s.RevisionIndex(r.m.compactRev - 1); !errors.Is(err, ErrCompacted) {
			r.fatalf("revision index below the compaction: %v", err)
		}
	}
}

// checkPhysical finishes the pending compaction and checks what the
// backend kept at or below the compaction revision: per key, at most one
// entry, its state at that revision or a tombstone exactly there.
func (r *modelRun) checkPhysical() {
	before, _, err := r.s.HashByRev(0)
	if err != nil {
		r.fatalf("hash: %v", err)
	}
	for {
		more, err := r.s.CompactStep()
		if err != nil {
			r.fatalf("compact step: %v", err)
		}
		if !more {
			break
		}
	}
	after, _, err := r.s.HashByRev(0)
	if err != nil || after != before {
		r.fatalf("hash %v before the physical compaction, %v after (%v)", before, after, err)
	}
	c := r.m.compactRev
	if c < 2 {
		return
	}
	v, err := r.s.newView()
	if err != nil {
		r.fatalf("%v", err)
	}
	defer v.release()
	seen := map[string]bool{}
	v.ascend(bucketKey, nil, revKey(Revision{Main: c + 1}, false), func(k, val []byte) bool {
		rev, tomb, err := decodeRevKey(k)
		if err != nil {
			r.fatalf("%v", err)
		}
		kv, err := decodeValue(rev, tomb, val)
		if err != nil {
			r.fatalf("%v", err)
		}
		key := string(kv.Key)
		if rev.Main == c {
			// Every change of the compaction revision stays until the
			// next compaction, for watchers that start there: tombstones
			// and puts that a later change of the same transaction
			// replaced.
			if st, live := r.m.states[c][key]; !tomb && live && st.mod == c {
				seen[key] = true
			}
			return true
		}
		if tomb {
			r.fatalf("compaction at %d kept the tombstone of %q at %d", c, key, rev.Main)
		}
		if seen[key] {
			r.fatalf("compaction at %d kept two revisions of %q", c, key)
		}
		seen[key] = true
		st, live := r.m.states[c][key]
		switch {
		case !live || st.mod != rev.Main:
			r.fatalf("compaction at %d kept %q at %d, its state then is %v (live %v)", c, key, rev.Main, st, live)
		}
		return true
	})
	for k := range r.m.states[c] {
		if !seen[k] {
			r.fatalf("compaction at %d dropped %q, live then", c, k)
		}
	}
	v.ascend(bucketRev, nil, revIndexKey(c), func(k, _ []byte) bool {
		r.fatalf("revision bucket keeps %x below the compaction at %d", k, c)
		return false
	})
}

func (r *modelRun) run(ops int) {
	for r.step = 0; r.step < ops; r.step++ {
		switch x := r.rng.IntN(100); {
		case x < 45:
			r.txnOps()
		case x < 50:
			index := r.nextIndex()
			if err := r.s.SetConsistentIndex(index); err != nil {
				r.fatalf("set consistent index: %v", err)
			}
			r.m.applied(index)
		case x < 56:
			r.compact()
		case x < 66:
			r.compactSteps()
		case x < 70:
			r.note("commit")
			if _, err := r.s.Commit(); err != nil {
				r.fatalf("commit: %v", err)
			}
		case x < 73:
			r.restart()
		case x < 74:
			r.checkAll()
		default:
			r.checkRange()
		}
		if *flagParanoid {
			r.checkAll()
		}
	}
	r.checkAll()
	r.checkPhysical()
	r.restart()
	r.checkAll()
}

func modelSeeds(t *testing.T, kind string) []uint64 {
	if *flagSeed != 0 {
		return []uint64{*flagSeed}
	}
	n := *flagSeeds
	if n == 0 {
		n = map[string]int{"memory": 24, "bolt": 8}[kind]
		if testing.Short() {
			n = map[string]int{"memory": 4, "bolt": 2}[kind]
		}
	}
	seeds := make([]uint64, n)
	for i := range seeds {
		seeds[i] = uint64(i + 1)
	}
	return seeds
}

// TestModel runs random histories of puts, deletes, transactions (with
// ranges inside), no-op entries, compactions and their steps, commits,
// restarts and crashes against the model, and compares every read with
// it: random reads with every option at random revisions, and at
// checkpoints every key at every readable revision. Each seed is
// replayable (see the failure message).
func TestModel(t *testing.T) {
	for _, kind := range []string{"memory", "bolt"} {
		for _, seed := range modelSeeds(t, kind) {
			t.Run(fmt.Sprintf("%s/seed=%d", kind, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, seed^0x6d766363))
				r := &modelRun{t: t, rng: rng, seed: seed, kind: kind, m: newModel()}
				r.opts = Options{
					BatchLimit:           []int{3, 10, 50, 10000}[rng.IntN(4)],
					CompactionBatchLimit: []int{1, 2, 5, 1000}[rng.IntN(4)],
				}
				if kind == "memory" {
					r.mem = backend.NewMemory()
				} else {
					r.path = filepath.Join(t.TempDir(), "mvcc.db")
				}
				r.open()
				defer func() {
					if r.tw != nil {
						r.tw.End()
					}
					if kind == "bolt" && r.s != nil {
						r.s.Close()
					}
				}()
				r.run(*flagOps)
			})
		}
	}
}
