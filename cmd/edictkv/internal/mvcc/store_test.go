package mvcc

import (
	"context"
	"errors"
	"fmt"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// TestRevisionRules pins etcd's revision, version and generation rules on
// one history, read back at every revision.
func TestRevisionRules(t *testing.T) {
	s, _ := newMemStore(t, Options{})
	if s.Rev() != 1 || s.CompactRev() != -1 || s.ConsistentIndex() != 0 {
		t.Fatalf("empty store at rev %d, compacted %d, index %d", s.Rev(), s.CompactRev(), s.ConsistentIndex())
	}
	steps := []struct {
		do      func(index uint64) int64
		wantRev int64
	}{
		{func(i uint64) int64 { return put(t, s, i, "a", "1") }, 2},
		{func(i uint64) int64 { return put(t, s, i, "a", "2") }, 3},
		// A transaction that changes nothing does not bump the revision.
		{func(i uint64) int64 { return txn(t, s, i, func(*TxnWrite) {}) }, 3},
		{func(i uint64) int64 { return del(t, s, i, "zz", "") }, 3},
		{func(i uint64) int64 { return del(t, s, i, "a", "") }, 4},
		{func(i uint64) int64 { return put(t, s, i, "a", "3") }, 5},
		// Two puts of one key in one transaction: one revision, two
		// versions.
		{func(i uint64) int64 {
			return txn(t, s, i, func(tw *TxnWrite) {
				tw.Put([]byte("b"), []byte("x"), 7, PutOptions{})
				tw.Put([]byte("b"), []byte("y"), 0, PutOptions{})
			})
		}, 6},
	}
	for i, st := range steps {
		if got := st.do(uint64(10 + i)); got != st.wantRev {
			t.Fatalf("step %d: revision %d, want %d", i, got, st.wantRev)
		}
		if s.ConsistentIndex() != uint64(10+i) {
			t.Fatalf("step %d: consistent index %d", i, s.ConsistentIndex())
		}
	}
	type want struct {
		value           string
		create, mod, ve int64
	}
	cases := []struct {
		key  string
		rev  int64
		want *want
	}{
		{"a", 1, nil},
		{"a", 2, &want{"1", 2, 2, 1}},
		{"a", 3, &want{"2", 2, 3, 2}},
		{"a", 4, nil},
		{"a", 5, &want{"3", 5, 5, 1}},
		{"a", 0, &want{"3", 5, 5, 1}},
		{"b", 6, &want{"y", 6, 6, 2}},
		{"b", 5, nil},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s@%d", c.key, c.rev), func(t *testing.T) {
			kv := get(t, s, c.key, c.rev)
			switch {
			case c.want == nil && kv != nil:
				t.Fatalf("got %v, want none", kv)
			case c.want != nil && (kv == nil || string(kv.Value) != c.want.value || kv.CreateRevision != c.want.create || kv.ModRevision != c.want.mod || kv.Version != c.want.ve):
				t.Fatalf("got %v, want %+v", kv, *c.want)
			}
		})
	}
	if _, err := s.Range(context.Background(), []byte("a"), nil, RangeOptions{Rev: 7}); !errors.Is(err, ErrFutureRev) {
		t.Fatalf("future read: %v", err)
	}
	for rev, idx := range map[int64]uint64{1: 0, 2: 10, 3: 11, 4: 14, 5: 15, 6: 16} {
		if got, err := s.RevisionIndex(rev); err != nil || got != idx {
			t.Fatalf("revision %d made by %d (%v), want %d", rev, got, err, idx)
		}
	}
}

func TestIndexMustAdvance(t *testing.T) {
	s, _ := newMemStore(t, Options{})
	put(t, s, 5, "a", "1")
	for _, f := range []func() error{
		func() error { _, err := s.Write(5); return err },
		func() error { _, err := s.Write(4); return err },
		func() error { return s.SetConsistentIndex(5) },
		func() error { _, err := s.Compact(3, 1); return err },
	} {
		if err := f(); !errors.Is(err, ErrIndexApplied) {
			t.Fatalf("got %v, want ErrIndexApplied", err)
		}
	}
	if err := s.SetConsistentIndex(9); err != nil || s.ConsistentIndex() != 9 || s.Rev() != 2 {
		t.Fatalf("no-op entry: %v, index %d, rev %d", err, s.ConsistentIndex(), s.Rev())
	}
}

func TestPutOptions(t *testing.T) {
	s, _ := newMemStore(t, Options{})
	txn(t, s, 1, func(tw *TxnWrite) {
		if _, err := tw.Put([]byte("a"), []byte("v"), 0, PutOptions{IgnoreValue: true}); !errors.Is(err, ErrKeyNotFound) {
			t.Fatalf("ignore_value on a missing key: %v", err)
		}
		if _, err := tw.Put(nil, []byte("v"), 0, PutOptions{}); !errors.Is(err, ErrEmptyKey) {
			t.Fatalf("empty key: %v", err)
		}
		if _, err := tw.Put([]byte("a"), []byte("v1"), 42, PutOptions{}); err != nil {
			t.Fatal(err)
		}
	})
	txn(t, s, 2, func(tw *TxnWrite) {
		r, err := tw.Put([]byte("a"), []byte("ignored"), 0, PutOptions{IgnoreValue: true, IgnoreLease: true, PrevKV: true})
		if err != nil || r.Rev != 3 || r.PrevKV == nil || string(r.PrevKV.Value) != "v1" || r.PrevKV.Lease != 42 {
			t.Fatalf("put: %+v, %v", r, err)
		}
		// The transaction reads its own write.
		rr, err := tw.Range(context.Background(), []byte("a"), nil, RangeOptions{})
		if err != nil || rr.Rev != 3 || len(rr.KVs) != 1 || string(rr.KVs[0].Value) != "v1" || rr.KVs[0].Lease != 42 || rr.KVs[0].Version != 2 {
			t.Fatalf("range in txn: %+v, %v", rr, err)
		}
	})
	// Before End, a reader sees the previous revision only.
	tw, err := s.Write(3)
	if err != nil {
		t.Fatal(err)
	}
	tw.Put([]byte("b"), []byte("new"), 0, PutOptions{})
	rr, err := s.Range(context.Background(), []byte("a"), []byte("\x00"), RangeOptions{})
	if err != nil || rr.Rev != 3 || rr.Count != 1 {
		t.Fatalf("read during a txn: %+v, %v", rr, err)
	}
	tw.End()
	rr, _ = s.Range(context.Background(), []byte("a"), []byte("\x00"), RangeOptions{})
	if rr.Rev != 4 || rr.Count != 2 {
		t.Fatalf("read after the txn: %+v", rr)
	}
}

// TestRangeOptions pins etcd's answers to option combinations on a fixed
// state: keys a..f put in the order f, e, d, c, b, a (so mod revision
// order is the reverse of key order), then c put again.
func TestRangeOptions(t *testing.T) {
	s, _ := newMemStore(t, Options{})
	idx := uint64(0)
	for _, k := range []string{"f", "e", "d", "c", "b", "a"} {
		idx++
		put(t, s, idx, k, "v"+k)
	}
	idx++
	put(t, s, idx, "c", "v0") // c: version 2, mod 8, create 5
	keys := func(rr *RangeResult) string {
		out := ""
		for _, kv := range rr.KVs {
			out += string(kv.Key)
		}
		return out
	}
	cases := []struct {
		name      string
		key, end  string
		o         RangeOptions
		wantKeys  string
		wantCount int64
		wantMore  bool
	}{
		{"all", "a", "\x00", RangeOptions{}, "abcdef", 6, false},
		{"range", "b", "e", RangeOptions{}, "bcd", 3, false},
		{"single", "c", "", RangeOptions{}, "c", 1, false},
		{"limit", "a", "\x00", RangeOptions{Limit: 2}, "ab", 6, true},
		{"limit exact", "a", "\x00", RangeOptions{Limit: 6}, "abcdef", 6, false},
		{"negative limit", "a", "\x00", RangeOptions{Limit: -1}, "abcdef", 6, false},
		{"count only", "a", "\x00", RangeOptions{CountOnly: true, Limit: 1}, "", 6, false},
		{"key desc limit", "a", "\x00", RangeOptions{SortOrder: pb.RangeRequest_DESCEND, Limit: 2}, "fe", 6, true},
		{"mod asc", "a", "\x00", RangeOptions{SortOrder: pb.RangeRequest_ASCEND, SortTarget: pb.RangeRequest_MOD}, "fedbac", 6, false},
		{"mod desc limit", "a", "\x00", RangeOptions{SortOrder: pb.RangeRequest_DESCEND, SortTarget: pb.RangeRequest_MOD, Limit: 2}, "ca", 6, true},
		{"create asc limit", "a", "\x00", RangeOptions{SortOrder: pb.RangeRequest_ASCEND, SortTarget: pb.RangeRequest_CREATE, Limit: 3}, "fed", 6, true},
		{"version desc, ties by key", "a", "\x00", RangeOptions{SortOrder: pb.RangeRequest_DESCEND, SortTarget: pb.RangeRequest_VERSION, Limit: 2}, "cf", 6, true},
		{"value asc", "a", "\x00", RangeOptions{SortOrder: pb.RangeRequest_ASCEND, SortTarget: pb.RangeRequest_VALUE, Limit: 2}, "ca", 6, true},
		// etcd: order NONE with a non-key target reads Limit+1 keys in key
		// order, sorts those ascending by the target, then cuts.
		{"none with mod target", "a", "\x00", RangeOptions{SortTarget: pb.RangeRequest_MOD, Limit: 2}, "ba", 6, true},
		// Filters drop keys from the result, not from the count; More
		// counts what passed.
		{"min mod", "a", "\x00", RangeOptions{MinModRevision: 6}, "abc", 6, false},
		{"max mod limit", "a", "\x00", RangeOptions{MaxModRevision: 5, Limit: 2}, "de", 6, true},
		{"create window", "a", "\x00", RangeOptions{MinCreateRevision: 4, MaxCreateRevision: 5}, "cd", 6, false},
		{"filter to none", "a", "\x00", RangeOptions{MinCreateRevision: 100, Limit: 1}, "", 6, false},
		{"old revision", "a", "\x00", RangeOptions{Rev: 4}, "def", 3, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rr, err := s.Range(context.Background(), []byte(c.key), bytesOrNil(c.end), c.o)
			if err != nil {
				t.Fatal(err)
			}
			if got := keys(rr); got != c.wantKeys || rr.Count != c.wantCount || rr.More != c.wantMore || rr.Rev != 8 {
				t.Fatalf("keys %q count %d more %v rev %d, want %q %d %v 8", got, rr.Count, rr.More, rr.Rev, c.wantKeys, c.wantCount, c.wantMore)
			}
		})
	}
	rr, _ := s.Range(context.Background(), []byte("a"), []byte("c"), RangeOptions{KeysOnly: true})
	if len(rr.KVs) != 2 || rr.KVs[0].Value != nil || rr.KVs[0].ModRevision != 7 {
		t.Fatalf("keys only: %v", rr.KVs)
	}
	if _, err := s.Range(context.Background(), []byte("a"), nil, RangeOptions{SortTarget: 9}); err == nil {
		t.Fatal("unknown sort target accepted")
	}
}

func TestCompactionRules(t *testing.T) {
	s, _ := newMemStore(t, Options{CompactionBatchLimit: 2})
	put(t, s, 1, "a", "1") // 2
	put(t, s, 2, "a", "2") // 3
	del(t, s, 3, "a", "")  // 4
	put(t, s, 4, "b", "1") // 5
	if _, err := s.Compact(5, 6); !errors.Is(err, ErrFutureRev) {
		t.Fatalf("future compaction: %v", err)
	}
	done, err := s.Compact(6, 3)
	if err != nil {
		t.Fatal(err)
	}
	if s.ConsistentIndex() != 6 || s.CompactRev() != 3 {
		t.Fatalf("index %d, compacted %d", s.ConsistentIndex(), s.CompactRev())
	}
	if _, err := s.Compact(7, 3); !errors.Is(err, ErrCompacted) || s.ConsistentIndex() != 7 {
		t.Fatalf("compaction again: %v, index %d", err, s.ConsistentIndex())
	}
	if _, err := s.Range(context.Background(), []byte("a"), nil, RangeOptions{Rev: 2}); !errors.Is(err, ErrCompacted) {
		t.Fatalf("read below: %v", err)
	}
	if kv := get(t, s, "a", 3); kv == nil || string(kv.Value) != "2" || kv.Version != 2 || kv.CreateRevision != 2 {
		t.Fatalf("read at the compaction: %v", kv)
	}
	select {
	case <-done:
		t.Fatal("physical compaction done before any step")
	default:
	}
	steps := 0
	for more := true; more; steps++ {
		if more, err = s.CompactStep(); err != nil {
			t.Fatal(err)
		}
	}
	<-done
	if steps < 2 {
		t.Fatalf("%d steps for 4 entries 2 at a time", steps)
	}
	// "a" at 2 is gone from the backend, "a" at 3 stays.
	v, _ := s.newView()
	defer v.release()
	if v.get(bucketKey, revKey(Revision{Main: 2}, false)) != nil || v.get(bucketKey, revKey(Revision{Main: 3}, false)) == nil {
		t.Fatal("the backend keeps the wrong revisions")
	}
	if _, err := s.RevisionIndex(2); !errors.Is(err, ErrCompacted) {
		t.Fatalf("revision index below the compaction: %v", err)
	}
	// Compacting past the deletion drops "a" from the index.
	if _, err := s.Compact(8, 5); err != nil {
		t.Fatal(err)
	}
	if s.KeyCount() != 1 {
		t.Fatalf("%d keys in the index, want 1", s.KeyCount())
	}
}
