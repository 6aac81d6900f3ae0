package mvcc

import (
	"bytes"
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
		if got, want := indexLess(item(a), item(b)), bytes.Compare(a, b) < 0; got != want {
			t.Fatalf("indexLess(%x, %x) = %v, want %v", a, b, got, want)
		}
	}
}
