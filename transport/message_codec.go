package transport

import (
	"fmt"
	"maps"
	"slices"

	"github.com/hashicorp/go-msgpack/v2/codec"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
)

// appendBody appends the msgpack encoding of v to dst.
func appendBody(dst []byte, what string, v any) ([]byte, error) {
	bp := scratch.Get().(*[]byte)
	defer scratch.Put(bp)
	enc := encoders.Get().(*codec.Encoder)
	defer encoders.Put(enc)
	// ResetBytes writes from the start of the slice it is given, so the
	// body is encoded apart and appended.
	enc.ResetBytes(bp)
	if err := enc.Encode(v); err != nil {
		return dst, fmt.Errorf("transport: encode %s: %w", what, err)
	}
	dst = append(dst, *bp...)
	if cap(*bp) > 1<<20 {
		// Do not let one huge append pin a megabyte buffer in the pool.
		*bp = make([]byte, 0, 4096)
	}
	return dst, nil
}

// maxQTs bounds a message's QT table: two stamps per entry and a few for
// the message itself is the most an encoder produces.
func maxQTs(entries int) int { return 2*entries + 4 }

// stampErr collects the first error of a series of stamp lookups, so the
// conversions above read as field lists.
type stampErr struct{ err error }

func (e *stampErr) get(q qtRefs, w wStamp) edict.Stamp {
	s, err := q.stamp(w)
	if err != nil && e.err == nil {
		e.err = err
	}
	return s
}

// appendSnapshotHeader validates h and appends its encoding to dst.
func appendSnapshotHeader(dst []byte, h wire.SnapshotHeader) ([]byte, error) {
	w, err := snapshotHeaderToWire(h)
	if err != nil {
		return dst, err
	}
	return appendBody(dst, "snapshot header", w)
}

func snapshotHeaderToWire(s wire.SnapshotHeader) (*wSnapshotHeader, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	var t qtTable
	w := &wSnapshotHeader{Epoch: s.Epoch, Reign: t.stamp(s.Reign), LastIndex: s.LastIndex, LastStamp: t.stamp(s.LastStamp), Size: s.Size}
	w.Members, w.Learners = idsToWire(s.Members), idsToWire(s.Learners)
	w.Addrs = addrsToWire(s.Addrs)
	w.QTs = t.wireForm()
	return w, nil
}

// decodeSnapshotHeader decodes and validates a header encoded by
// appendSnapshotHeader.
func decodeSnapshotHeader(body []byte) (wire.SnapshotHeader, error) {
	var w wSnapshotHeader
	if err := decodeBody("snapshot header", body, &w); err != nil {
		return wire.SnapshotHeader{}, err
	}
	if len(w.Members) > wire.MaxMembers || len(w.Learners) > wire.MaxMembers {
		return wire.SnapshotHeader{}, fmt.Errorf("transport: decode snapshot header: %d members and %d learners, the limit is %d each", len(w.Members), len(w.Learners), wire.MaxMembers)
	}
	if len(w.Addrs) > len(w.Members)+len(w.Learners) {
		return wire.SnapshotHeader{}, fmt.Errorf("transport: decode snapshot header: %d addresses for %d members and learners", len(w.Addrs), len(w.Members)+len(w.Learners))
	}
	q, err := decodeQTs(w.QTs, maxQTs(0))
	if err != nil {
		return wire.SnapshotHeader{}, fmt.Errorf("transport: decode snapshot header: %w", err)
	}
	var e stampErr
	s := wire.SnapshotHeader{Epoch: w.Epoch, Reign: e.get(q, w.Reign), LastIndex: w.LastIndex, LastStamp: e.get(q, w.LastStamp), Size: w.Size}
	if e.err != nil {
		return wire.SnapshotHeader{}, fmt.Errorf("transport: decode snapshot header: %w", e.err)
	}
	s.Members, s.Learners = idsFromWire(w.Members), idsFromWire(w.Learners)
	if s.Addrs, err = addrsFromWire(w.Addrs); err != nil {
		return wire.SnapshotHeader{}, fmt.Errorf("transport: decode snapshot header: %w", err)
	}
	if err := s.Validate(); err != nil {
		return wire.SnapshotHeader{}, fmt.Errorf("transport: decode snapshot header: %w", err)
	}
	return s, nil
}

// addrsToWire lists addrs in process order, so that a header encodes the
// same whatever Go's map order.
func addrsToWire(addrs map[edict.ProcessID]string) []wAddr {
	if len(addrs) == 0 {
		return nil
	}
	out := make([]wAddr, 0, len(addrs))
	for _, p := range slices.Sorted(maps.Keys(addrs)) {
		out = append(out, wAddr{P: uint64(p), A: addrs[p]})
	}
	return out
}

// addrsFromWire refuses a process listed twice, which a map would
// silently collapse to one of its addresses.
func addrsFromWire(w []wAddr) (map[edict.ProcessID]string, error) {
	if len(w) == 0 {
		return nil, nil
	}
	addrs := make(map[edict.ProcessID]string, len(w))
	for _, a := range w {
		p := edict.ProcessID(a.P)
		if _, dup := addrs[p]; dup {
			return nil, fmt.Errorf("address of %v listed twice", p)
		}
		addrs[p] = a.A
	}
	return addrs, nil
}

func idsToWire(ids []edict.ProcessID) []uint64 {
	if len(ids) == 0 {
		return nil
	}
	out := make([]uint64, len(ids))
	for i, p := range ids {
		out[i] = uint64(p)
	}
	return out
}

func idsFromWire(ids []uint64) []edict.ProcessID {
	if len(ids) == 0 {
		return nil
	}
	out := make([]edict.ProcessID, len(ids))
	for i, p := range ids {
		out[i] = edict.ProcessID(p)
	}
	return out
}
