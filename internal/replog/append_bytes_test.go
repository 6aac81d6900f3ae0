package replog

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/edictlog/edictlog/wire"
)

// Large entries proposed together still travel: an Append or FetchReply
// carries at most MaxAppendBytes of entry data beyond its first entry, so
// that no run of large entries makes a message the transport's frame
// limit refuses, which would be sent again and again and never commit.
func TestAppendsBoundedInBytes(t *testing.T) {
	c := newTCluster(t, 1, 2, 3)
	c.settle(50*time.Millisecond, nil)
	l := c.leader()
	require.NotZero(t, l)
	limit := c.cores[l].cfg.MaxAppendBytes
	var largest, appends int
	c.sent = func(m wire.Message) {
		if m.Append == nil || len(m.Append.Entries) == 0 {
			return
		}
		appends++
		n := 0
		for _, e := range m.Append.Entries[1:] {
			n += len(e.Data)
		}
		largest = max(largest, n)
	}
	const count, size = 24, 1 << 20
	var last wire.Entry
	for i := range count {
		e, err := c.cores[l].Propose(c.reading(l), wire.EntryCommand, bytes.Repeat([]byte{byte(i)}, size))
		require.NoError(t, err)
		last = e
	}
	c.cores[l].Flush(c.reading(l))
	c.collect(l)
	c.settle(200*time.Millisecond, nil)
	require.LessOrEqual(t, largest, limit, "an append's data beyond its first entry")
	require.GreaterOrEqual(t, appends, 2*count*size/(limit+size), "appends to two followers")
	for _, id := range c.ids() {
		applied := c.applied[id]
		require.NotEmpty(t, applied)
		require.Equal(t, last.Index, applied[len(applied)-1].Index, "p%d applied every entry", id)
	}
}
