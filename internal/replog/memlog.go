package replog

import (
	"fmt"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
)

// memLog is the log as the core sees it: the entries after the last
// snapshot, in memory. The runtime writes the same entries to the
// LogStore; the core never reads the store. Snapshots bound its size.
type memLog struct {
	snap    wire.Position // the last entry a snapshot covers (Index 0: none)
	entries []wire.Entry  // entries[i].Index == snap.Index+1+i
}

func (l *memLog) first() uint64     { return l.snap.Index + 1 }
func (l *memLog) lastIndex() uint64 { return l.snap.Index + uint64(len(l.entries)) }

func (l *memLog) last() wire.Position {
	if len(l.entries) == 0 {
		return l.snap
	}
	e := &l.entries[len(l.entries)-1]
	return wire.Position{Index: e.Index, Stamp: e.Stamp}
}

// stampAt returns the stamp at index i, where i may be the snapshot's last
// index; ok is false for a compacted or missing index.
func (l *memLog) stampAt(i uint64) (edict.Stamp, bool) {
	switch {
	case i == l.snap.Index:
		return l.snap.Stamp, true
	case i < l.snap.Index || i > l.lastIndex():
		return edict.Stamp{}, false
	}
	return l.entries[i-l.first()].Stamp, true
}

// matches reports whether the log holds (i, s): log matching (Raft §5.3).
func (l *memLog) matches(i uint64, s edict.Stamp) bool {
	st, ok := l.stampAt(i)
	return ok && st.Equal(s)
}

func (l *memLog) entry(i uint64) *wire.Entry {
	if i < l.first() || i > l.lastIndex() {
		return nil
	}
	return &l.entries[i-l.first()]
}

// slice returns entries [lo, hi) capped at max; the slice aliases the log,
// so callers copy before handing it to another goroutine.
func (l *memLog) slice(lo, hi uint64, max int) []wire.Entry {
	if lo < l.first() || lo > hi || hi > l.lastIndex()+1 {
		panic(fmt.Sprintf("edictlog: slice [%d, %d) outside [%d, %d]", lo, hi, l.first(), l.lastIndex()+1))
	}
	if max > 0 && hi-lo > uint64(max) {
		hi = lo + uint64(max)
	}
	return l.entries[lo-l.first() : hi-l.first()]
}

// sliceBytes is the longest prefix of slice(lo, hi, max) whose entries'
// data stays within maxBytes, and at least one entry if the range holds
// one.
func (l *memLog) sliceBytes(lo, hi uint64, max, maxBytes int) []wire.Entry {
	es := l.slice(lo, hi, max)
	total := 0
	for i, e := range es {
		if i > 0 && total+len(e.Data) > maxBytes {
			return es[:i]
		}
		total += len(e.Data)
	}
	return es
}

// holdsBytes reports whether the entries from index lo on hold maxBytes
// of data or more: enough for a full append (sliceBytes).
func (l *memLog) holdsBytes(lo uint64, maxBytes int) bool {
	if lo < l.first() || lo > l.lastIndex() {
		return false
	}
	total := 0
	for _, e := range l.entries[lo-l.first():] {
		if total += len(e.Data); total >= maxBytes {
			return true
		}
	}
	return false
}

// truncate removes entries from index i on.
func (l *memLog) truncate(i uint64) {
	if i <= l.snap.Index {
		panic(fmt.Sprintf("edictlog: truncate at %d inside the snapshot ending at %d", i, l.snap.Index))
	}
	if i <= l.lastIndex() {
		clear(l.entries[i-l.first():])
		l.entries = l.entries[:i-l.first()]
	}
}

func (l *memLog) append(es ...wire.Entry) {
	for _, e := range es {
		if e.Index != l.lastIndex()+1 {
			panic(fmt.Sprintf("edictlog: append of index %d after %d", e.Index, l.lastIndex()))
		}
		l.entries = append(l.entries, e)
	}
}

// compact drops entries up to and including upTo (a snapshot covers them).
func (l *memLog) compact(upTo uint64) {
	if upTo <= l.snap.Index {
		return
	}
	if upTo > l.lastIndex() {
		panic(fmt.Sprintf("edictlog: compact to %d beyond the last index %d", upTo, l.lastIndex()))
	}
	st, _ := l.stampAt(upTo)
	n := upTo - l.snap.Index
	rest := make([]wire.Entry, len(l.entries)-int(n))
	copy(rest, l.entries[n:])
	l.entries = rest
	l.snap = wire.Position{Index: upTo, Stamp: st}
}

// reset empties the log after installing a snapshot that ends at pos.
func (l *memLog) reset(pos wire.Position) {
	l.entries = nil
	l.snap = pos
}
