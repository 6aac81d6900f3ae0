package mvcc

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/edictlog/edictlog/cmd/edictkv/internal/mvcc/backend"
)

// TestCrashKeepsCommitted: a crash loses exactly what was not committed,
// and the log entries after the durable index apply again.
func TestCrashKeepsCommitted(t *testing.T) {
	s, m := newMemStore(t, Options{})
	for i := uint64(1); i <= 10; i++ {
		put(t, s, i, fmt.Sprintf("k%d", i%3), fmt.Sprint(i))
	}
	if d, err := s.Commit(); err != nil || d != 10 {
		t.Fatalf("commit: %d, %v", d, err)
	}
	for i := uint64(11); i <= 15; i++ {
		put(t, s, i, "late", fmt.Sprint(i))
	}
	if s.DurableIndex() != 10 || s.ConsistentIndex() != 15 {
		t.Fatalf("durable %d, applied %d", s.DurableIndex(), s.ConsistentIndex())
	}
	s2, err := Open(m.Crash(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s2.ConsistentIndex() != 10 || s2.Rev() != 11 || get(t, s2, "late", 0) != nil {
		t.Fatalf("after the crash: index %d, rev %d", s2.ConsistentIndex(), s2.Rev())
	}
	if kv := get(t, s2, "k1", 0); kv == nil || string(kv.Value) != "10" || kv.Version != 4 {
		t.Fatalf("k1 after the crash: %v", kv)
	}
	for i := uint64(11); i <= 15; i++ {
		put(t, s2, i, "late", fmt.Sprint(i))
	}
	if kv := get(t, s2, "late", 0); kv == nil || kv.Version != 5 || kv.ModRevision != 16 {
		t.Fatalf("replayed: %v", kv)
	}
}

// TestBatchLimitCommits: the write that brings pending changes to
// BatchLimit commits them, and only at an entry boundary.
func TestBatchLimitCommits(t *testing.T) {
	s, m := newMemStore(t, Options{BatchLimit: 9})
	base := m.Commits()
	// Each single put is 3 changes: the key, the revision bucket, the
	// consistent index.
	for i := uint64(1); i <= 2; i++ {
		put(t, s, i, "a", "v")
	}
	if m.Commits() != base || s.DurableIndex() != 0 {
		t.Fatalf("committed early: %d commits, durable %d", m.Commits()-base, s.DurableIndex())
	}
	put(t, s, 3, "a", "v")
	if m.Commits() != base+1 || s.DurableIndex() != 3 {
		t.Fatalf("not committed at the limit: %d commits, durable %d", m.Commits()-base, s.DurableIndex())
	}
	if s.pendingOps() != 0 {
		t.Fatalf("%d changes still pending", s.pendingOps())
	}
}

// TestInterruptedCompaction stops a compaction after each of its steps,
// with and without a commit, on both backends; the reopened store resumes
// it and ends in the state an uninterrupted one reaches.
func TestInterruptedCompaction(t *testing.T) {
	build := func(t *testing.T, s *Store) {
		idx := uint64(0)
		for round := range 6 {
			for k := range 5 {
				idx++
				put(t, s, idx, fmt.Sprintf("k%d", k), fmt.Sprint(round))
			}
			idx++
			del(t, s, idx, fmt.Sprintf("k%d", round%5), "")
		}
	}
	ref, _ := newMemStore(t, Options{})
	build(t, ref)
	const at = 20
	if _, err := ref.Compact(100, at); err != nil {
		t.Fatal(err)
	}
	for more := true; more; {
		var err error
		if more, err = ref.CompactStep(); err != nil {
			t.Fatal(err)
		}
	}
	wantHash, _, _ := ref.HashByRev(0)

	for _, kind := range []string{"memory", "bolt"} {
		for _, steps := range []int{0, 1, 2, 5} {
			for _, commit := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/steps=%d/commit=%v", kind, steps, commit), func(t *testing.T) {
					o := Options{CompactionBatchLimit: 4}
					m := backend.NewMemory()
					path := filepath.Join(t.TempDir(), "db")
					open := func() *Store {
						var s *Store
						var err error
						if kind == "memory" {
							s, err = Open(m, o)
						} else {
							s, err = OpenFile(path, testBoltOptions, o)
						}
						if err != nil {
							t.Fatal(err)
						}
						return s
					}
					s := open()
					build(t, s)
					if _, err := s.Compact(100, at); err != nil {
						t.Fatal(err)
					}
					// The compaction entry itself is durable: only its
					// removal is interrupted.
					s.Commit()
					for range steps {
						if _, err := s.CompactStep(); err != nil {
							t.Fatal(err)
						}
					}
					if commit {
						s.Commit()
					}
					if kind == "memory" {
						m = m.Crash()
					} else {
						s.abandon()
					}
					s = open()
					defer func() { s.Close() }()
					if s.CompactRev() != at || s.ConsistentIndex() != 100 || s.Rev() != ref.Rev() {
						t.Fatalf("reopened at compaction %d, index %d, rev %d", s.CompactRev(), s.ConsistentIndex(), s.Rev())
					}
					for more := true; more; {
						var err error
						if more, err = s.CompactStep(); err != nil {
							t.Fatal(err)
						}
					}
					if h, _, _ := s.HashByRev(0); h != wantHash {
						t.Fatalf("hash %v, uninterrupted %v", h, wantHash)
					}
					for rev := int64(at); rev <= s.Rev(); rev++ {
						got, err1 := s.Range(context.Background(), []byte{0}, []byte{0}, RangeOptions{Rev: rev})
						want, err2 := ref.Range(context.Background(), []byte{0}, []byte{0}, RangeOptions{Rev: rev})
						if err1 != nil || err2 != nil {
							t.Fatal(err1, err2)
						}
						if err := sameResult(got, want); err != nil {
							t.Fatalf("at %d: %v", rev, err)
						}
					}
					// Finished and committed: a restart has nothing to resume.
					if kind == "memory" {
						m = m.Crash()
					} else {
						s.Close()
					}
					s = open()
					if more, _ := s.CompactStep(); more || s.job != nil {
						t.Fatal("a finished compaction resumed")
					}
				})
			}
		}
	}
}
