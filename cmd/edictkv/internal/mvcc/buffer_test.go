package mvcc

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestChanges checks a bucket's pending changes against a map: every
// change of a key replaces the one before, whether it arrives in key order
// (appended to the run) or not (kept aside), and ranges list each key
// once, in order, with its newest change.
func TestChanges(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 0))
		var c changes
		model := map[string]layerItem{}
		// Mostly ascending keys, as the store's buckets grow, with
		// overwrites and deletions of earlier ones among them.
		next := 0
		key := func() []byte {
			switch rng.IntN(4) {
			case 0, 1:
				next += 1 + rng.IntN(3)
				return fmt.Appendf(nil, "k%04d", next)
			case 2:
				return fmt.Appendf(nil, "k%04d", rng.IntN(next+2))
			}
			return fmt.Appendf(nil, "k%04d", rng.IntN(next+2)/2*2+1)
		}
		for step := range 300 {
			it := layerItem{key: key(), value: fmt.Appendf(nil, "v%d", step)}
			if rng.IntN(5) == 0 {
				it.value, it.deleted = nil, true
			}
			c.add(it)
			model[string(it.key)] = it
			k := fmt.Appendf(nil, "k%04d", rng.IntN(next+3))
			got, ok := c.get(k)
			want, wok := model[string(k)]
			if ok != wok || !sameItem(got, want) {
				t.Fatalf("seed %d step %d: get %s = %v %v, want %v %v", seed, step, k, got, ok, want, wok)
			}
			from := fmt.Appendf(nil, "k%04d", rng.IntN(next+3))
			var to []byte
			if rng.IntN(3) > 0 {
				to = fmt.Appendf(nil, "k%04d", rng.IntN(next+3))
			}
			gotRange := c.appendRange(nil, from, to)
			var wantRange []layerItem
			for _, k := range slices.Sorted(maps.Keys(model)) {
				if k >= string(from) && (to == nil || k < string(to)) {
					wantRange = append(wantRange, model[k])
				}
			}
			if !slices.EqualFunc(gotRange, wantRange, sameItem) {
				t.Fatalf("seed %d step %d: range [%s, %s) = %v, want %v", seed, step, from, to, gotRange, wantRange)
			}
		}
	}
}

func sameItem(a, b layerItem) bool {
	return bytes.Equal(a.key, b.key) && bytes.Equal(a.value, b.value) && a.deleted == b.deleted
}
