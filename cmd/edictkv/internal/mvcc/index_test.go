package mvcc

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"
)

// TestIndexLess checks the index's order, by 8-byte prefix first, against
// bytes.Compare, on keys short and long with zero bytes among them (a
// short key's prefix is padded with zeros, as a longer key with zeros
// there reads).
func TestIndexLess(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	key := func() []byte {
		k := make([]byte, rng.IntN(12))
		for i := range k {
			k[i] = []byte{0, 1, 'a', 0xff}[rng.IntN(4)]
		}
		return k
	}
	for range 200_000 {
		a, b := key(), key()
		if got, want := indexLess(item(&keyIndex{key: a}), item(&keyIndex{key: b})), bytes.Compare(a, b) < 0; got != want {
			t.Fatalf("indexLess(%x, %x) = %v, want %v", a, b, got, want)
		}
	}
}

// TestKeyIndexForms runs random histories of one key — puts, deletions,
// several changes in one revision, compactions — on a keyIndex as the index
// keeps it (its creating put alone in modified, until a change) and on one
// held as a list of generations throughout, and checks that both answer
// every get, keep and compaction alike, and print alike.
func TestKeyIndexForms(t *testing.T) {
	for seed := range uint64(2000) {
		rng := rand.New(rand.NewPCG(seed, 3))
		rev := Revision{Main: 2 + rng.Int64N(3)}
		ki, err := newKeyIndex([]byte("k"), rev)
		if err != nil {
			t.Fatal(err)
		}
		ref, _ := newKeyIndex([]byte("k"), rev)
		ref.grow(1)
		alive, compacted := true, int64(0)
		var ops []string
		check := func() {
			t.Helper()
			if got, want := ki.String(), ref.String(); got != want {
				t.Fatalf("seed %d after %v: %s, the list of generations is %s", seed, ops, got, want)
			}
			if got, want := ki.isEmpty(), ref.isEmpty(); got != want {
				t.Fatalf("seed %d after %v: isEmpty %v, want %v", seed, ops, got, want)
			}
			for at := compacted; at <= rev.Main+1; at++ {
				m1, c1, v1, err1 := ki.get(at)
				m2, c2, v2, err2 := ref.get(at)
				if m1 != m2 || c1 != c2 || v1 != v2 || err1 != err2 {
					t.Fatalf("seed %d after %v: get(%d) = %v %v %d %v, want %v %v %d %v", seed, ops, at, m1, c1, v1, err1, m2, c2, v2, err2)
				}
				k1, k2 := map[Revision]struct{}{}, map[Revision]struct{}{}
				ki.keep(at, k1)
				ref.keep(at, k2)
				if !maps.Equal(k1, k2) {
					t.Fatalf("seed %d after %v: keep(%d) = %v, want %v", seed, ops, at, k1, k2)
				}
			}
		}
		for range 12 {
			check()
			if ki.isEmpty() {
				break
			}
			if rng.IntN(3) == 0 {
				rev.Sub++ // another change in the same revision
			} else {
				rev = Revision{Main: rev.Main + 1 + rng.Int64N(2)}
			}
			switch op := rng.IntN(6); {
			case op < 3 || !alive:
				ops = append(ops, fmt.Sprintf("put(%d.%d)", rev.Main, rev.Sub))
				if err := ki.put(rev); err != nil {
					t.Fatal(err)
				}
				if err := ref.put(rev); err != nil {
					t.Fatal(err)
				}
				alive = true
			case op < 5:
				ops = append(ops, fmt.Sprintf("tombstone(%d.%d)", rev.Main, rev.Sub))
				if err := ki.tombstone(rev); err != nil {
					t.Fatal(err)
				}
				if err := ref.tombstone(rev); err != nil {
					t.Fatal(err)
				}
				alive = false
			default:
				at := compacted + rng.Int64N(rev.Main-compacted+1)
				ops = append(ops, fmt.Sprintf("compact(%d)", at))
				a1, a2 := map[Revision]struct{}{}, map[Revision]struct{}{}
				ki.compact(at, a1)
				ref.compactGenerations(at, a2)
				if !maps.Equal(a1, a2) {
					t.Fatalf("seed %d after %v: compact kept %v, want %v", seed, ops, a1, a2)
				}
				compacted = at
			}
		}
		if err := ki.tombstone(Revision{Main: rev.Main + 1}); alive == (err != nil) {
			t.Fatalf("seed %d after %v: a deletion of the key, alive %v: %v", seed, ops, alive, err)
		}
		if err := ki.put(rev); err == nil {
			t.Fatalf("seed %d after %v: a put at %v, not after the last revision, succeeded", seed, ops, rev)
		}
	}
}

// TestKeyIndexRestore checks the index a reopened store rebuilds from its
// key bucket, which tells a creation's main revision alone: a key whose
// oldest entry is the put that created it is held in that revision alone,
// as its put made it, and answers as the put's key does; one whose oldest
// entry is a later put (of a later transaction or of the same one) or a
// tombstone keeps its list of generations.
func TestKeyIndexRestore(t *testing.T) {
	type answer struct {
		mod          Revision
		created, ver int64
		err          error
	}
	get := func(ki *keyIndex, at int64) answer {
		m, c, v, err := ki.get(at)
		return answer{m, c.Main, v, err}
	}
	created := &keyIndex{key: []byte("k")}
	created.restore(Revision{Main: 5}, Revision{Main: 5, Sub: 3}, 1)
	if created.hist != nil {
		t.Fatalf("a key restored from the put that created it holds %v", created)
	}
	put, _ := newKeyIndex([]byte("k"), Revision{Main: 5, Sub: 3})
	later := &keyIndex{key: []byte("k")}
	later.restore(Revision{Main: 3}, Revision{Main: 5, Sub: 1}, 4)
	twice := &keyIndex{key: []byte("k")} // put twice by the transaction that created it
	twice.restore(Revision{Main: 5}, Revision{Main: 5, Sub: 1}, 2)
	deleted := &keyIndex{key: []byte("k")}
	deleted.restoreTombstone(Revision{Main: 6, Sub: 2})
	for _, c := range []struct {
		ki   *keyIndex
		want map[int64]answer
	}{
		{created, map[int64]answer{4: {err: errRevisionNotFound}, 5: {Revision{5, 3}, 5, 1, nil}, 9: {Revision{5, 3}, 5, 1, nil}}},
		{later, map[int64]answer{4: {err: errRevisionNotFound}, 5: {Revision{5, 1}, 3, 4, nil}}},
		{twice, map[int64]answer{4: {err: errRevisionNotFound}, 5: {Revision{5, 1}, 5, 2, nil}}},
		{deleted, map[int64]answer{6: {err: errRevisionNotFound}, 7: {err: errRevisionNotFound}}},
	} {
		for at, want := range c.want {
			if got := get(c.ki, at); got != want {
				t.Errorf("%v: get(%d) = %+v, want %+v", c.ki, at, got, want)
			}
			if c.ki == created {
				if got, want := get(c.ki, at), get(put, at); got != want {
					t.Errorf("%v: get(%d) = %+v, the put's key %+v", c.ki, at, got, want)
				}
			}
		}
	}
	if err := deleted.tombstone(Revision{Main: 7}); err == nil {
		t.Errorf("%v: deleted again", deleted)
	}
	if err := deleted.put(Revision{Main: 7}); err != nil {
		t.Fatal(err)
	}
	if got, want := get(deleted, 7), (answer{Revision{Main: 7}, 7, 1, nil}); got != want {
		t.Errorf("%v: get(7) = %+v, want %+v", deleted, got, want)
	}
	for _, c := range []struct {
		ki   *keyIndex
		at   int64
		keep map[Revision]struct{}
	}{
		{created, 5, map[Revision]struct{}{{5, 3}: {}}},
		{later, 9, map[Revision]struct{}{{5, 1}: {}}},
		{deleted, 6, map[Revision]struct{}{}},
	} {
		got := map[Revision]struct{}{}
		c.ki.keep(c.at, got)
		if !maps.Equal(got, c.keep) {
			t.Errorf("%v: keep(%d) = %v, want %v", c.ki, c.at, got, c.keep)
		}
	}
}
