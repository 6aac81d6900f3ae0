package backend

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

var (
	bA = []byte("a")
	bB = []byte("b")
)

func kinds(t *testing.T) map[string]func() Backend {
	return map[string]func() Backend{
		"memory": func() Backend { return NewMemory() },
		"bolt": func() Backend {
			b, err := OpenBolt(filepath.Join(t.TempDir(), "db"), BoltOptions{InitialMmapSize: 1 << 20, NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			return b
		},
	}
}

func dump(t *testing.T, tx ReadTx, bucket []byte) string {
	t.Helper()
	var out bytes.Buffer
	tx.Ascend(bucket, nil, nil, func(k, v []byte) bool {
		fmt.Fprintf(&out, "%s=%s ", k, v)
		return true
	})
	return out.String()
}

// TestBackends checks what package mvcc relies on, on both backends.
func TestBackends(t *testing.T) {
	for name, open := range kinds(t) {
		t.Run(name, func(t *testing.T) {
			be := open()
			defer be.Close()
			b := &Batch{}
			b.CreateBucket(bA)
			for i := range 5 {
				b.Put(bA, fmt.Appendf(nil, "k%d", i), fmt.Appendf(nil, "v%d", i))
			}
			if err := be.Commit(b); err != nil {
				t.Fatal(err)
			}
			view, err := be.Begin()
			if err != nil {
				t.Fatal(err)
			}
			// A batch that fails changes nothing.
			bad := &Batch{}
			bad.Put(bA, []byte("k9"), []byte("x"))
			bad.Delete(bA, []byte("k0"))
			bad.Put(bB, []byte("x"), []byte("y"))
			if err := be.Commit(bad); err == nil {
				t.Fatal("put into a missing bucket committed")
			}
			next := &Batch{}
			next.Delete(bA, []byte("k1"))
			next.Put(bA, []byte("k2"), []byte("new"))
			if err := be.Commit(next); err != nil {
				t.Fatal(err)
			}
			// The view kept its state.
			if got, want := dump(t, view, bA), "k0=v0 k1=v1 k2=v2 k3=v3 k4=v4 "; got != want {
				t.Fatalf("old view %q, want %q", got, want)
			}
			view.Release()
			view.Release()
			now, _ := be.Begin()
			defer now.Release()
			if got, want := dump(t, now, bA), "k0=v0 k2=new k3=v3 k4=v4 "; got != want {
				t.Fatalf("view %q, want %q", got, want)
			}
			var got []string
			now.Ascend(bA, []byte("k2"), []byte("k4"), func(k, v []byte) bool {
				got = append(got, string(k))
				return true
			})
			if fmt.Sprint(got) != "[k2 k3]" || !now.HasBucket(bA) || now.HasBucket(bB) || now.Get(bA, []byte("k1")) != nil {
				t.Fatalf("ascend %v", got)
			}
			if be.Size() <= 0 || be.SizeInUse() <= 0 || be.SizeInUse() > be.Size() {
				t.Fatalf("sizes %d, %d", be.Size(), be.SizeInUse())
			}

			// Snapshot round trip into a second backend, and the refusals.
			var snap bytes.Buffer
			n, err := now.WriteTo(&snap)
			if err != nil || n != int64(snap.Len()) || n != now.Size() {
				t.Fatalf("wrote %d bytes, size %d, buffer %d: %v", n, now.Size(), snap.Len(), err)
			}
			other := open()
			defer other.Close()
			for _, cut := range []int{0, 1, snap.Len() / 2, snap.Len() - 1} {
				if _, err := other.Restore(bytes.NewReader(snap.Bytes()[:cut])); err == nil {
					t.Fatalf("restored a stream cut at %d of %d", cut, snap.Len())
				}
			}
			rs, err := other.Restore(bytes.NewReader(snap.Bytes()))
			if err != nil {
				t.Fatal(err)
			}
			check, _ := rs.Begin()
			if got := dump(t, check, bA); got != "k0=v0 k2=new k3=v3 k4=v4 " {
				t.Fatalf("restored %q", got)
			}
			check.Release()
			before, _ := other.Begin()
			if err := rs.Install(); err != nil {
				t.Fatal(err)
			}
			if before.HasBucket(bA) {
				t.Fatal("a view begun before Install sees the new database")
			}
			before.Release()
			after, _ := other.Begin()
			if got := dump(t, after, bA); got != "k0=v0 k2=new k3=v3 k4=v4 " {
				t.Fatalf("installed %q", got)
			}
			after.Release()
			// A discarded restore leaves the backend as it was.
			rs2, err := other.Restore(bytes.NewReader(snap.Bytes()))
			if err != nil {
				t.Fatal(err)
			}
			rs2.Discard()
			rs2.Discard()
		})
	}
}

func TestMemoryCrash(t *testing.T) {
	m := NewMemory()
	b := &Batch{}
	b.CreateBucket(bA)
	b.Put(bA, []byte("x"), []byte("1"))
	if err := m.Commit(b); err != nil {
		t.Fatal(err)
	}
	m.SetCommitError(errors.New("disk full"))
	b2 := &Batch{}
	b2.Put(bA, []byte("y"), []byte("2"))
	if err := m.Commit(b2); err == nil {
		t.Fatal("commit despite the error")
	}
	m.SetCommitError(nil)
	n := m.Crash()
	if _, err := m.Begin(); !errors.Is(err, ErrClosed) {
		t.Fatalf("crashed backend: %v", err)
	}
	if err := m.Commit(b2); !errors.Is(err, ErrClosed) {
		t.Fatalf("crashed backend commit: %v", err)
	}
	v, _ := n.Begin()
	defer v.Release()
	if got := dump(t, v, bA); got != "x=1 " {
		t.Fatalf("after the crash %q", got)
	}
}

func FuzzMemorySnapshot(f *testing.F) {
	m := NewMemory()
	b := &Batch{}
	b.CreateBucket(bA)
	b.CreateBucket(bB)
	b.Put(bA, []byte("k"), []byte("v"))
	b.Put(bB, []byte(""), []byte(""))
	m.Commit(b)
	v, _ := m.Begin()
	var buf bytes.Buffer
	v.WriteTo(&buf)
	f.Add(buf.Bytes())
	f.Add([]byte(memMagic))
	f.Add([]byte(memMagic + "E\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		buckets, err := decodeMemorySnapshot(bytes.NewReader(data))
		if err != nil {
			return
		}
		// What decodes re-encodes to the same bytes.
		var out bytes.Buffer
		if _, err := newMemTx(buckets).WriteTo(&out); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out.Bytes(), data) {
			t.Fatalf("%x decodes and re-encodes to %x", data, out.Bytes())
		}
	})
}

// Views begun between two commits share one read transaction, and still
// each sees the state committed when it began: one begun after a commit
// returned sees it, while an older one, open meanwhile, keeps its own
// state. The transaction ends with its last view; and a commit never
// waits for the shared one: a file that outgrows its mapping is remapped
// while the backend holds a view's worth of nothing.
func TestBoltSharedReads(t *testing.T) {
	be, err := OpenBolt(filepath.Join(t.TempDir(), "db"), BoltOptions{InitialMmapSize: 64 << 10, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	put := func(k, v string) {
		t.Helper()
		b := &Batch{}
		b.CreateBucket(bA)
		b.Put(bA, []byte(k), []byte(v))
		if err := be.Commit(b); err != nil {
			t.Fatal(err)
		}
	}
	begin := func() *boltTx {
		t.Helper()
		v, err := be.Begin()
		if err != nil {
			t.Fatal(err)
		}
		return v.(*boltTx)
	}
	put("k", "1")
	first, second := begin(), begin()
	if first.r != second.r {
		t.Fatal("two views begun with no commit between them have transactions of their own")
	}
	put("k", "2")
	third := begin()
	if third.r == first.r {
		t.Fatal("a view begun after a commit shares the transaction of one begun before it")
	}
	if got := string(third.Get(bA, []byte("k"))); got != "2" {
		t.Fatalf("a view begun after a commit reads %q", got)
	}
	if got := string(first.Get(bA, []byte("k"))); got != "1" {
		t.Fatalf("a view begun before a commit reads %q", got)
	}
	old := first.r
	first.Release()
	second.Release()
	if n := old.refs.Load(); n != 0 {
		t.Fatalf("the replaced transaction keeps %d references after its last view", n)
	}
	third.Release()

	// A view shares the transaction of the backend's own reference; the
	// commits that follow grow the file far past its 64 KiB mapping, and
	// each remaps it. Had a commit waited for the shared transaction, the
	// first would not return.
	begin().Release()
	done := make(chan error, 1)
	go func() {
		value := bytes.Repeat([]byte("x"), 4<<10)
		for i := range 256 {
			b := &Batch{}
			b.Put(bA, fmt.Appendf(nil, "big%03d", i), value)
			if err := be.Commit(b); err != nil {
				done <- err
				return
			}
			begin().Release()
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("a commit that remaps the file waits for the shared read transaction")
	}
	if be.Size() < 1<<20 {
		t.Fatalf("the file grew to %d bytes only", be.Size())
	}
}
