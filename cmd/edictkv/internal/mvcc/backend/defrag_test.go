package backend

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// Defrag gives back what deletes freed and keeps every byte of the
// committed state: views begun before read the old database to their
// end, commits after it land in the new one, and the file reopens with
// both.
func TestDefrag(t *testing.T) {
	for name, open := range kinds(t) {
		t.Run(name, func(t *testing.T) {
			be := open()
			defer be.Close()
			value := make([]byte, 1024)
			b := &Batch{}
			b.CreateBucket(bA)
			b.CreateBucket(bB)
			for i := range 2000 {
				b.Put(bA, fmt.Appendf(nil, "k%05d", i), value)
			}
			b.Put(bB, []byte("x"), []byte("y"))
			mustCommit(t, be, b)
			b = &Batch{}
			for i := range 1990 {
				b.Delete(bA, fmt.Appendf(nil, "k%05d", i))
			}
			mustCommit(t, be, b)
			// bbolt reuses the pages a commit freed from the next one on:
			// only then does it count them free.
			b = &Batch{}
			b.Put(bB, []byte("x"), []byte("y"))
			mustCommit(t, be, b)
			before, inUse := be.Size(), be.SizeInUse()
			if inUse >= before/2 {
				t.Fatalf("the deletes freed too little to test with: size %d, in use %d", before, inUse)
			}
			old, err := be.Begin()
			if err != nil {
				t.Fatal(err)
			}
			want := dump(t, old, bA) + dump(t, old, bB)

			if err := be.(Defragmenter).Defrag(); err != nil {
				t.Fatal(err)
			}
			if after := be.Size(); after >= before/2 || after < be.SizeInUse() {
				t.Fatalf("size %d after defragmenting (%d before, %d in use then, %d now)", after, before, inUse, be.SizeInUse())
			}
			if got := dump(t, old, bA) + dump(t, old, bB); got != want {
				t.Fatalf("a view begun before changed: %q, want %q", got, want)
			}
			old.Release()
			now, err := be.Begin()
			if err != nil {
				t.Fatal(err)
			}
			if got := dump(t, now, bA) + dump(t, now, bB); got != want {
				t.Fatalf("after defragmenting: %q, want %q", got, want)
			}
			now.Release()
			b = &Batch{}
			b.Put(bB, []byte("z"), []byte("after"))
			mustCommit(t, be, b)

			bolt, ok := be.(*Bolt)
			if !ok {
				return
			}
			if err := be.Close(); err != nil {
				t.Fatal(err)
			}
			matches, _ := filepath.Glob(bolt.Path() + ".defrag-*")
			if len(matches) != 0 {
				t.Fatalf("left behind: %v", matches)
			}
			re, err := OpenBolt(bolt.Path(), BoltOptions{InitialMmapSize: 1 << 20, NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			defer re.Close()
			tx, err := re.Begin()
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Release()
			if got := dump(t, tx, bA) + dump(t, tx, bB); got != want+"z=after " {
				t.Fatalf("reopened: %q, want %q", got, want+"z=after ")
			}
		})
	}
}

// A closed backend refuses to defragment and leaves no file behind.
func TestDefragClosed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	be, err := OpenBolt(path, BoltOptions{InitialMmapSize: 1 << 20, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	be.Close()
	if err := be.Defrag(); err != ErrClosed {
		t.Fatalf("Defrag of a closed backend: %v", err)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Fatalf("files: %v", entries)
	}
	m := NewMemory()
	m.Close()
	if err := m.Defrag(); err != ErrClosed {
		t.Fatalf("Defrag of a closed memory: %v", err)
	}
}

func mustCommit(t *testing.T, be Backend, b *Batch) {
	t.Helper()
	if err := be.Commit(b); err != nil {
		t.Fatal(err)
	}
}

// Commits and views running beside Defrag lose nothing: every commit that
// returned is in the database after it, and every view reads a whole
// committed state.
func TestDefragConcurrent(t *testing.T) {
	be, err := OpenBolt(filepath.Join(t.TempDir(), "db"), BoltOptions{InitialMmapSize: 1 << 20, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	b := &Batch{}
	b.CreateBucket(bA)
	mustCommit(t, be, b)
	const writes = 200
	done := make(chan error, 2)
	go func() {
		for i := range writes {
			b := &Batch{}
			b.Put(bA, fmt.Appendf(nil, "k%05d", i), []byte("v"))
			b.Put(bA, fmt.Appendf(nil, "n%05d", i), []byte("v"))
			if err := be.Commit(b); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	go func() {
		for range writes {
			tx, err := be.Begin()
			if err != nil {
				done <- err
				return
			}
			k, n := 0, 0
			tx.Ascend(bA, nil, nil, func(key, _ []byte) bool {
				if key[0] == 'k' {
					k++
				} else {
					n++
				}
				return true
			})
			tx.Release()
			if k != n {
				done <- fmt.Errorf("a view saw half a commit: %d k keys, %d n keys", k, n)
				return
			}
		}
		done <- nil
	}()
	for range 5 {
		if err := be.Defrag(); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	tx, err := be.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Release()
	n := 0
	tx.Ascend(bA, nil, nil, func([]byte, []byte) bool { n++; return true })
	if n != 2*writes {
		t.Fatalf("%d keys after the commits, want %d", n, 2*writes)
	}
}
