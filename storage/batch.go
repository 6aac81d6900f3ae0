package storage

import (
	"fmt"
	"math"
	"slices"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
)

// MaxKeySize bounds a stable key and MaxValueSize a stable value: stable
// records are small, and the bounds keep a bad caller from turning the stable
// bucket into a second log.
const (
	MaxKeySize   = 1024
	MaxValueSize = 1 << 20
)

// bounds describes the log a store holds: entries first..last, with
// first = last+1 when empty. base is the stamp of entry first-1 (compacted
// or reset away) and lastStamp that of entry last.
type bounds struct {
	first, last     uint64
	base, lastStamp edict.Stamp
}

func newBounds() bounds { return bounds{first: 1} }

// position is Last's answer, with a stamp the caller may keep and change.
func (b bounds) position() wire.Position {
	return wire.Position{Index: b.last, Stamp: cloneStamp(b.lastStamp)}
}

func cloneStamp(s edict.Stamp) edict.Stamp {
	s.QT = slices.Clone(s.QT)
	return s
}

func (b bounds) count() uint64 { return b.last + 1 - b.first }

// plan checks b against the log cur describes and returns the bounds the log
// will have after it, except lastStamp when a truncation leaves the last
// entry in place (the caller reads that entry's stamp). It is shared by every
// implementation so that they accept and refuse exactly the same batches.
func plan(cur bounds, b *wire.Batch) (next bounds, err error) {
	next = cur
	if b.Reset != nil {
		if b.TruncateFrom != 0 {
			return cur, fmt.Errorf("%w: batch both resets the log and truncates it", ErrInvalid)
		}
		if b.Reset.Index == math.MaxUint64 {
			return cur, fmt.Errorf("%w: reset to index %d leaves no room", ErrInvalid, b.Reset.Index)
		}
		if err := b.Reset.Stamp.WellFormed(); err != nil {
			return cur, fmt.Errorf("%w: reset stamp: %v", ErrInvalid, err)
		}
		st := cloneStamp(b.Reset.Stamp)
		next = bounds{first: b.Reset.Index + 1, last: b.Reset.Index, base: st, lastStamp: st}
	}
	if t := b.TruncateFrom; t != 0 {
		switch {
		case t < next.first:
			return cur, fmt.Errorf("%w: truncate from %d, below the first index %d", ErrCompacted, t, next.first)
		case t > next.last+1:
			return cur, fmt.Errorf("%w: truncate from %d, past the end of the log (last index %d)", ErrNotContiguous, t, next.last)
		}
		next.last = t - 1
		if next.last < next.first {
			next.lastStamp = next.base
		}
	}
	for i := range b.Entries {
		e := &b.Entries[i]
		if want := next.last + 1; e.Index != want {
			return cur, fmt.Errorf("%w: batch entry %d has index %d, want %d (last index %d)", ErrNotContiguous, i, e.Index, want, next.last)
		}
		if err := e.Check(); err != nil {
			return cur, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		next.last = e.Index
	}
	if n := len(b.Entries); n > 0 {
		// Copied: the caller may reuse its entries once the batch is stored.
		next.lastStamp = cloneStamp(b.Entries[n-1].Stamp)
	}
	for k, v := range b.Stable {
		if err := checkWritableKey(k); err != nil {
			return cur, err
		}
		if len(v) > MaxValueSize {
			return cur, fmt.Errorf("%w: value of stable key %q is %d bytes, over the limit of %d", ErrInvalid, k, len(v), MaxValueSize)
		}
	}
	for _, k := range b.Delete {
		if err := checkWritableKey(k); err != nil {
			return cur, err
		}
		if _, ok := b.Stable[k]; ok {
			return cur, fmt.Errorf("%w: batch both sets and deletes stable key %q", ErrInvalid, k)
		}
	}
	return next, nil
}

func checkKey(k string) error {
	if k == "" || len(k) > MaxKeySize {
		return fmt.Errorf("%w: stable key of %d bytes (want 1 to %d)", ErrInvalid, len(k), MaxKeySize)
	}
	return nil
}

func checkWritableKey(k string) error {
	if err := checkKey(k); err != nil {
		return err
	}
	if k == wire.KeyIncarnation {
		return fmt.Errorf("%w: %q only changes through BumpIncarnation", ErrReservedKey, k)
	}
	return nil
}

// checkCompact checks CompactPrefix(upTo) against the log cur describes.
func checkCompact(cur bounds, upTo uint64) error {
	if upTo > cur.last {
		return fmt.Errorf("%w: compact up to %d, past the last index %d", ErrUnavailable, upTo, cur.last)
	}
	return nil
}

// checkRange checks Entries(lo, hi) against the log cur describes.
func checkRange(cur bounds, lo, hi uint64) error {
	switch {
	case lo > hi:
		return fmt.Errorf("%w: entries range [%d, %d) is inverted", ErrInvalid, lo, hi)
	case lo < cur.first:
		return fmt.Errorf("%w: entry %d requested, first index is %d", ErrCompacted, lo, cur.first)
	case hi > cur.last+1:
		return fmt.Errorf("%w: entries up to %d requested, last index is %d", ErrUnavailable, hi-1, cur.last)
	}
	return nil
}
