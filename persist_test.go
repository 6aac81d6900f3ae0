package edictlog

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/edictlog/edictlog/wire"
)

// Batches written together have the effect of writing them one after the
// other: entries in order, and each key's last change wins.
func TestMergeWritesBatchesAsOne(t *testing.T) {
	es := func(from, to uint64) []wire.Entry {
		var out []wire.Entry
		for i := from; i <= to; i++ {
			out = append(out, wire.Entry{Index: i, Kind: wire.EntryCommand})
		}
		return out
	}
	jobs := []persistJob{
		{batch: wire.Batch{TruncateFrom: 1, Entries: es(1, 2), Stable: map[string][]byte{"a": {1}, "c": {1}}, Delete: []string{"d"}}},
		{batch: wire.Batch{Entries: es(3, 3), Stable: map[string][]byte{"b": {2}}, Delete: []string{"a"}}},
		{batch: wire.Batch{Entries: es(4, 5), Stable: map[string][]byte{"a": {3}}, Delete: []string{"c"}}},
	}
	b := merge(jobs)
	require.Equal(t, es(1, 5), b.Entries)
	require.Equal(t, uint64(1), b.TruncateFrom, "the first batch's truncation is the transaction's")
	require.Equal(t, map[string][]byte{"a": {3}, "b": {2}}, b.Stable)
	require.ElementsMatch(t, []string{"d", "c"}, b.Delete)
	require.Equal(t, map[string][]byte{"a": {1}, "c": {1}}, jobs[0].batch.Stable, "the batches themselves are left as they were")
	require.Len(t, jobs[0].batch.Entries, 2)

	plain := merge([]persistJob{{batch: wire.Batch{Entries: es(1, 1)}}, {batch: wire.Batch{Entries: es(2, 3)}}})
	require.Equal(t, es(1, 3), plain.Entries)
	require.Nil(t, plain.Stable)
	require.False(t, (&wire.Batch{TruncateFrom: 4}).AppendsOnly())
	require.False(t, (&wire.Batch{Reset: &wire.Position{Index: 9}}).AppendsOnly())
}
