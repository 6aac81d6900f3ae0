package transport

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/hashicorp/go-msgpack/v2/codec"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
)

// appendMessage validates m and appends its encoding (msgpack of the
// array-form structs in msgpack.go) to dst: the body of a transport frame.
func appendMessage(dst []byte, m wire.Message) ([]byte, error) {
	w, err := messageToWire(m)
	if err != nil {
		return dst, err
	}
	return appendBody(dst, m.Kind().String()+" message", w)
}

// decodeMessage decodes and validates one message encoded by appendMessage:
// exactly one value, no trailing bytes, every structural rule of Validate.
// Whether a stamp covers a quorum of its epoch needs the epoch table and is
// left to the log (edict.Stamp.Validate).
func decodeMessage(body []byte) (wire.Message, error) {
	var w wMessage
	if err := decodeBody("message", body, &w); err != nil {
		return wire.Message{}, err
	}
	m, err := messageFromWire(&w)
	if err != nil {
		return wire.Message{}, fmt.Errorf("transport: decode message: %w", err)
	}
	if err := m.Validate(); err != nil {
		return wire.Message{}, fmt.Errorf("transport: decode message: %w", err)
	}
	return m, nil
}

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

func messageToWire(m wire.Message) (*wMessage, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	var t qtTable
	w := &wMessage{Kind: uint8(m.Kind()), From: uint64(m.From), To: uint64(m.To)}
	switch m.Kind() {
	case wire.KindLease:
		w.Lease = leaseToWire(m.Lease, &t)
	case wire.KindAppend:
		a := m.Append
		w.Append = &wAppend{Epoch: a.Epoch, Reign: t.stamp(a.Reign), Commit: a.LeaderCommit, PrevIndex: a.PrevIndex, PrevStamp: t.stamp(a.PrevStamp),
			Entries: entriesToWire(a.Entries, &t)}
	case wire.KindAppendReply:
		r := m.AppendReply
		w.AppendReply = &wAppendReply{Epoch: r.Epoch, Reign: t.stamp(r.Reign), Accepted: t.stamp(r.Accepted), Success: r.Success, Refused: r.Refused, LastIndex: r.LastIndex, HintIndex: r.HintIndex, HintStamp: t.stamp(r.HintStamp)}
	case wire.KindReadIndex:
		w.ReadIndex = &wReadIndex{Epoch: m.ReadIndex.Epoch, ID: m.ReadIndex.ID, Sent: timeToWire(m.ReadIndex.Sent)}
	case wire.KindReadIndexReply:
		r := m.ReadIndexReply
		w.ReadIndexReply = &wReadIndexReply{Epoch: r.Epoch, ID: r.ID, Sent: timeToWire(r.Sent), Reign: t.stamp(r.Reign), OK: r.OK, Index: r.Index, Leader: uint64(r.Leader)}
	case wire.KindTimeoutNow:
		w.TimeoutNow = &wTimeoutNow{Epoch: m.TimeoutNow.Epoch, Reign: t.stamp(m.TimeoutNow.Reign)}
	case wire.KindFetch:
		f := m.Fetch
		w.Fetch = &wFetch{Epoch: f.Epoch, ID: f.ID, Attempt: timeToWire(f.Attempt), PrevIndex: f.PrevIndex, PrevStamp: t.stamp(f.PrevStamp), Max: f.Max,
			Committed: f.Committed, UpToIndex: f.UpToIndex, UpToStamp: t.stamp(f.UpToStamp)}
	case wire.KindFetchReply:
		r := m.FetchReply
		wr := &wFetchReply{Epoch: r.Epoch, ID: r.ID, Attempt: timeToWire(r.Attempt), LastIndex: r.LastIndex, LastStamp: t.stamp(r.LastStamp), Compacted: r.Compacted, OK: r.OK,
			Entries: entriesToWire(r.Entries, &t), Committed: r.Committed, Commit: r.Commit}
		if len(r.Entries) > 0 {
			wr.First = r.Entries[0].Index
		}
		w.FetchReply = wr
	}
	w.QTs = t.wire
	return w, nil
}

// maxQTs bounds a message's QT table: two stamps per entry and a few for
// the message itself is the most an encoder produces.
func maxQTs(entries int) int { return 2*entries + 4 }

func messageFromWire(w *wMessage) (wire.Message, error) {
	k := wire.Kind(w.Kind)
	if !k.Valid() {
		return wire.Message{}, fmt.Errorf("unknown message kind %d", w.Kind)
	}
	present := 0
	for _, p := range []bool{w.Lease != nil, w.Append != nil, w.AppendReply != nil, w.ReadIndex != nil, w.ReadIndexReply != nil, w.TimeoutNow != nil, w.Fetch != nil, w.FetchReply != nil} {
		if p {
			present++
		}
	}
	entries := 0
	if w.Append != nil {
		entries = len(w.Append.Entries)
	}
	if w.FetchReply != nil {
		entries = max(entries, len(w.FetchReply.Entries))
	}
	if entries > wire.MaxAppendEntries {
		return wire.Message{}, fmt.Errorf("append of %d entries exceeds the limit of %d", entries, wire.MaxAppendEntries)
	}
	q, err := decodeQTs(w.QTs, maxQTs(entries))
	if err != nil {
		return wire.Message{}, err
	}
	m := wire.Message{From: edict.ProcessID(w.From), To: edict.ProcessID(w.To)}
	var e stampErr
	switch k {
	case wire.KindLease:
		if w.Lease != nil {
			m.Lease = leaseFromWire(w.Lease, q, &e)
		}
	case wire.KindAppend:
		if wa := w.Append; wa != nil {
			m.Append = &wire.Append{Epoch: wa.Epoch, Reign: e.get(q, wa.Reign), LeaderCommit: wa.Commit, PrevIndex: wa.PrevIndex, PrevStamp: e.get(q, wa.PrevStamp),
				Entries: entriesFromWire(wa.Entries, wa.PrevIndex+1, q, &e)}
		}
	case wire.KindAppendReply:
		if r := w.AppendReply; r != nil {
			m.AppendReply = &wire.AppendReply{Epoch: r.Epoch, Reign: e.get(q, r.Reign), Accepted: e.get(q, r.Accepted), Success: r.Success, Refused: r.Refused, LastIndex: r.LastIndex, HintIndex: r.HintIndex, HintStamp: e.get(q, r.HintStamp)}
		}
	case wire.KindReadIndex:
		if r := w.ReadIndex; r != nil {
			m.ReadIndex = &wire.ReadIndexRequest{Epoch: r.Epoch, ID: r.ID, Sent: timeFromWire(r.Sent)}
		}
	case wire.KindReadIndexReply:
		if r := w.ReadIndexReply; r != nil {
			m.ReadIndexReply = &wire.ReadIndexReply{Epoch: r.Epoch, ID: r.ID, Sent: timeFromWire(r.Sent), Reign: e.get(q, r.Reign), OK: r.OK, Index: r.Index, Leader: edict.ProcessID(r.Leader)}
		}
	case wire.KindTimeoutNow:
		if r := w.TimeoutNow; r != nil {
			m.TimeoutNow = &wire.TimeoutNow{Epoch: r.Epoch, Reign: e.get(q, r.Reign)}
		}
	case wire.KindFetch:
		if f := w.Fetch; f != nil {
			m.Fetch = &wire.Fetch{Epoch: f.Epoch, ID: f.ID, Attempt: timeFromWire(f.Attempt), PrevIndex: f.PrevIndex, PrevStamp: e.get(q, f.PrevStamp), Max: f.Max,
				Committed: f.Committed, UpToIndex: f.UpToIndex, UpToStamp: e.get(q, f.UpToStamp)}
		}
	case wire.KindFetchReply:
		if r := w.FetchReply; r != nil {
			if len(r.Entries) == 0 && r.First != 0 {
				return wire.Message{}, errors.New("fetch reply names a first index but has no entries")
			}
			m.FetchReply = &wire.FetchReply{Epoch: r.Epoch, ID: r.ID, Attempt: timeFromWire(r.Attempt), LastIndex: r.LastIndex, LastStamp: e.get(q, r.LastStamp), Compacted: r.Compacted, OK: r.OK,
				Entries: entriesFromWire(r.Entries, r.First, q, &e), Committed: r.Committed, Commit: r.Commit}
		}
	}
	if present != 1 || m.Kind() != k {
		return wire.Message{}, fmt.Errorf("%v message must carry exactly its own payload (%d payloads present)", k, present)
	}
	if e.err != nil {
		return wire.Message{}, fmt.Errorf("%v message: %w", k, e.err)
	}
	return m, nil
}

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
	w.QTs = t.wire
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
