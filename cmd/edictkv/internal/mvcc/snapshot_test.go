package mvcc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/edictlog/edictlog/cmd/edictkv/internal/mvcc/backend"
)

// history writes n entries of puts and deletes and a compaction, leaving
// some changes uncommitted.
func history(t *testing.T, s *Store, n int) {
	t.Helper()
	idx := s.ConsistentIndex()
	for i := range n {
		idx++
		if i%7 == 6 {
			del(t, s, idx, fmt.Sprintf("k%02d", i%11), "")
		} else {
			put(t, s, idx, fmt.Sprintf("k%02d", i%11), fmt.Sprintf("v%d", i))
		}
		if i == n/2 {
			idx++
			if _, err := s.Compact(idx, s.Rev()-3); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// sameStore compares two stores at every revision the first can read.
func sameStore(t *testing.T, a, b *Store) {
	t.Helper()
	if a.Rev() != b.Rev() || a.CompactRev() != b.CompactRev() || a.ConsistentIndex() != b.ConsistentIndex() {
		t.Fatalf("rev %d/%d, compacted %d/%d, index %d/%d", a.Rev(), b.Rev(), a.CompactRev(), b.CompactRev(), a.ConsistentIndex(), b.ConsistentIndex())
	}
	for rev := max(a.CompactRev(), 1); rev <= a.Rev(); rev++ {
		ra, err1 := a.Range(context.Background(), []byte{0}, []byte{0}, RangeOptions{Rev: rev})
		rb, err2 := b.Range(context.Background(), []byte{0}, []byte{0}, RangeOptions{Rev: rev})
		if err1 != nil || err2 != nil {
			t.Fatalf("at %d: %v, %v", rev, err1, err2)
		}
		if err := sameResult(ra, rb); err != nil {
			t.Fatalf("at %d: %v", rev, err)
		}
	}
}

func snapshotBytes(t *testing.T, s *Store) ([]byte, *Snapshot) {
	t.Helper()
	sn, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer sn.Close()
	var buf bytes.Buffer
	n, err := sn.WriteTo(&buf)
	if err != nil || n != int64(buf.Len()) || n != sn.Size() {
		t.Fatalf("wrote %d of %d bytes (buffer %d): %v", n, sn.Size(), buf.Len(), err)
	}
	return buf.Bytes(), sn
}

func openKind(t *testing.T, kind string) *Store {
	if kind == "memory" {
		s, _ := newMemStore(t, Options{})
		return s
	}
	s, _ := newBoltStore(t, Options{})
	return s
}

func TestSnapshotRestore(t *testing.T) {
	for _, kind := range []string{"memory", "bolt"} {
		t.Run(kind, func(t *testing.T) {
			src := openKind(t, kind)
			history(t, src, 60)
			data, sn := snapshotBytes(t, src)
			if sn.Index() != src.ConsistentIndex() || sn.Rev() != src.Rev() {
				t.Fatalf("snapshot at index %d rev %d, store at %d %d", sn.Index(), sn.Rev(), src.ConsistentIndex(), src.Rev())
			}
			// The destination has its own history, pending changes and a
			// pending compaction: all replaced.
			dst := openKind(t, kind)
			history(t, dst, 25)
			if err := dst.Restore(bytes.NewReader(data)); err != nil {
				t.Fatal(err)
			}
			sameStore(t, src, dst)
			if dst.DurableIndex() != sn.Index() {
				t.Fatalf("durable index %d after restore, snapshot %d", dst.DurableIndex(), sn.Index())
			}
			// Writes go on from the snapshot's state.
			put(t, dst, dst.ConsistentIndex()+1, "after", "x")
			if dst.Rev() != src.Rev()+1 {
				t.Fatalf("rev %d after a write", dst.Rev())
			}
		})
	}
}

// TestSnapshotDoesNotBlockWrites writes while a snapshot is being
// streamed, and checks the stream holds the state of the Snapshot call.
func TestSnapshotDoesNotBlockWrites(t *testing.T) {
	for _, kind := range []string{"memory", "bolt"} {
		t.Run(kind, func(t *testing.T) {
			s := openKind(t, kind)
			history(t, s, 30)
			sn, err := s.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			defer sn.Close()
			var buf bytes.Buffer
			w := &hookWriter{w: &buf, hook: func() {
				put(t, s, s.ConsistentIndex()+1, "during", "x")
				if _, err := s.Commit(); err != nil {
					t.Error(err)
				}
			}}
			if _, err := sn.WriteTo(w); err != nil {
				t.Fatal(err)
			}
			dst := openKind(t, kind)
			if err := dst.Restore(&buf); err != nil {
				t.Fatal(err)
			}
			if dst.Rev() != sn.Rev() || get(t, dst, "during", 0) != nil || get(t, s, "during", 0) == nil {
				t.Fatalf("restored rev %d, snapshot %d", dst.Rev(), sn.Rev())
			}
		})
	}
}

type hookWriter struct {
	w    *bytes.Buffer
	hook func()
	done bool
}

func (h *hookWriter) Write(p []byte) (int, error) {
	if !h.done {
		h.done = true
		h.hook()
	}
	return h.w.Write(p)
}

// TestRestoreRefusesBadStreams: every damaged stream is refused with an
// error, and the store keeps its state, its pending changes, its file,
// and no temporary file.
func TestRestoreRefusesBadStreams(t *testing.T) {
	for _, kind := range []string{"memory", "bolt"} {
		t.Run(kind, func(t *testing.T) {
			src := openKind(t, kind)
			history(t, src, 40)
			good, _ := snapshotBytes(t, src)
			flip := func(i int) []byte {
				b := bytes.Clone(good)
				b[i] ^= 0x5a
				return b
			}
			cases := map[string][]byte{
				"empty":          nil,
				"garbage":        bytes.Repeat([]byte("not a database "), 1000),
				"truncated head": good[:len(good)/10],
				"truncated half": good[:len(good)/2],
				"one byte short": good[:len(good)-1],
				"flipped early":  flip(20),
				"flipped middle": flip(len(good) / 2),
			}
			cases["trailing byte"] = append(bytes.Clone(good), 0)
			for name, data := range cases {
				t.Run(name, func(t *testing.T) {
					dst, path := newKindWithPath(t, kind)
					history(t, dst, 20)
					before, _ := snapshotBytes(t, dst)
					put(t, dst, dst.ConsistentIndex()+1, "pending", "x")
					rev, idx := dst.Rev(), dst.ConsistentIndex()
					err := dst.Restore(bytes.NewReader(data))
					if err == nil {
						t.Fatal("restored a damaged stream")
					}
					t.Logf("refused: %v", err)
					if dst.Rev() != rev || dst.ConsistentIndex() != idx || get(t, dst, "pending", 0) == nil {
						t.Fatalf("state changed: rev %d/%d index %d/%d", dst.Rev(), rev, dst.ConsistentIndex(), idx)
					}
					put(t, dst, dst.ConsistentIndex()+1, "still", "writable")
					if path != "" {
						if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
							t.Fatalf("files left: %v", entries)
						}
					}
					ref := openKind(t, kind)
					if err := ref.Restore(bytes.NewReader(before)); err != nil {
						t.Fatal(err)
					}
					if kv := get(t, ref, "k01", 0); kv == nil {
						t.Fatal("reference lost k01")
					}
				})
			}
		})
	}
}

func newKindWithPath(t *testing.T, kind string) (*Store, string) {
	if kind == "memory" {
		s, _ := newMemStore(t, Options{})
		return s, ""
	}
	return newBoltStore(t, Options{})
}

// TestRestoreRefusesForeignDatabase: a whole, well-formed database stream
// that does not hold a store is refused clearly.
func TestRestoreRefusesForeignDatabase(t *testing.T) {
	other, err := backend.OpenBolt(filepath.Join(t.TempDir(), "other.db"), testBoltOptions)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	b := &backend.Batch{}
	b.CreateBucket([]byte("key"))
	b.Put([]byte("key"), []byte("x"), []byte("y"))
	if err := other.Commit(b); err != nil {
		t.Fatal(err)
	}
	tx, err := other.Begin()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := tx.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	tx.Release()
	s, _ := newBoltStore(t, Options{})
	put(t, s, 1, "a", "1")
	err = s.Restore(&buf)
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("foreign database: %v", err)
	}
	t.Logf("refused: %v", err)
	if get(t, s, "a", 0) == nil {
		t.Fatal("state lost")
	}
}

// TestRestoreSurvivesReopen: the restored file is the store's file.
func TestRestoreSurvivesReopen(t *testing.T) {
	src, _ := newBoltStore(t, Options{})
	history(t, src, 30)
	data, _ := snapshotBytes(t, src)
	dst, path := newBoltStore(t, Options{})
	history(t, dst, 5)
	if err := dst.Restore(bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	re, err := OpenFile(path, testBoltOptions, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer re.Close()
	sameStore(t, src, re)
}

// TestRestoreEveryFlip flips one byte at a time across a snapshot: each
// damaged stream is refused (the trailer's checksum sees what structure
// checks cannot: a byte of a value), and the state stays. Nothing panics.
func TestRestoreEveryFlip(t *testing.T) {
	for _, kind := range []string{"memory", "bolt"} {
		t.Run(kind, func(t *testing.T) {
			src := openKind(t, kind)
			history(t, src, 40)
			good, _ := snapshotBytes(t, src)
			dst := openKind(t, kind)
			put(t, dst, 1, "mine", "x")
			stride := max(len(good)/150, 1)
			refused := 0
			for i := 0; i < len(good); i += stride {
				b := bytes.Clone(good)
				b[i] ^= 0xff
				if err := dst.Restore(bytes.NewReader(b)); err != nil {
					refused++
					if get(t, dst, "mine", 0) == nil {
						t.Fatalf("flip at %d: refused but the state changed", i)
					}
					continue
				}
				t.Fatalf("flip at %d of %d restored", i, len(good))
			}
			t.Logf("%d of %d flips refused", refused, (len(good)+stride-1)/stride)
		})
	}
}
