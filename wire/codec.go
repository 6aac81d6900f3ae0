package wire

import (
	"errors"
	"fmt"
	"sync"

	"github.com/edictlog/edictlog/edict"
	"github.com/hashicorp/go-msgpack/v2/codec"
)

func newHandle() *codec.MsgpackHandle {
	h := &codec.MsgpackHandle{WriteExt: true} // WriteExt: []byte as bin, not str
	h.ErrorIfNoField = true
	// A declared container length allocates at most this many elements
	// up front; the rest grows as elements actually decode, so a frame
	// that claims a huge array costs nothing before it runs out of bytes.
	h.MaxInitLen = 256
	return h
}

var handle = newHandle()

// Encoders and decoders are pooled: constructing one per message is a
// measurable share of a small message's cost.
var (
	encoders = sync.Pool{New: func() any { return codec.NewEncoderBytes(nil, handle) }}
	decoders = sync.Pool{New: func() any { return codec.NewDecoderBytes(nil, handle) }}
	scratch  = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}
)

// AppendMessage validates m and appends its encoding (msgpack of the
// array-form structs in msgpack.go) to dst: the body of a transport frame.
func AppendMessage(dst []byte, m Message) ([]byte, error) {
	w, err := messageToWire(m)
	if err != nil {
		return dst, err
	}
	return appendBody(dst, m.Kind().String()+" message", w)
}

// DecodeMessage decodes and validates one message encoded by AppendMessage:
// exactly one value, no trailing bytes, every structural rule of Validate.
// Whether a stamp covers a quorum of its epoch needs the epoch table and is
// left to the log (edict.Stamp.Validate).
func DecodeMessage(body []byte) (Message, error) {
	var w wMessage
	if err := decodeBody("message", body, &w); err != nil {
		return Message{}, err
	}
	m, err := messageFromWire(&w)
	if err != nil {
		return Message{}, fmt.Errorf("wire: decode message: %w", err)
	}
	if err := m.Validate(); err != nil {
		return Message{}, fmt.Errorf("wire: decode message: %w", err)
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
		return dst, fmt.Errorf("wire: encode %s: %w", what, err)
	}
	dst = append(dst, *bp...)
	if cap(*bp) > 1<<20 {
		// Do not let one huge append pin a megabyte buffer in the pool.
		*bp = make([]byte, 0, 4096)
	}
	return dst, nil
}

// decodeBody decodes exactly one msgpack value from body into v and
// refuses trailing bytes: a frame holds one value, and bytes after it are a
// bug or an attack, not padding.
func decodeBody(what string, body []byte, v any) error {
	if len(body) == 0 {
		return fmt.Errorf("wire: decode %s: empty body", what)
	}
	dec := decoders.Get().(*codec.Decoder)
	defer decoders.Put(dec)
	dec.ResetBytes(body)
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("wire: decode %s: %w", what, err)
	}
	if n := dec.NumBytesRead(); n != len(body) {
		return fmt.Errorf("wire: decode %s: %d trailing bytes", what, len(body)-n)
	}
	return nil
}

func messageToWire(m Message) (*wMessage, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	var t qtTable
	w := &wMessage{Kind: uint8(m.Kind()), From: uint64(m.From), To: uint64(m.To)}
	switch m.Kind() {
	case KindLease:
		w.Lease = leaseToWire(m.Lease, &t)
	case KindAppend:
		a := m.Append
		w.Append = &wAppend{Epoch: a.Epoch, Reign: t.stamp(a.Reign), Commit: a.LeaderCommit, PrevIndex: a.PrevIndex, PrevStamp: t.stamp(a.PrevStamp),
			Entries: entriesToWire(a.Entries, &t)}
	case KindAppendReply:
		r := m.AppendReply
		w.AppendReply = &wAppendReply{Epoch: r.Epoch, Reign: t.stamp(r.Reign), Accepted: t.stamp(r.Accepted), Success: r.Success, Refused: r.Refused, LastIndex: r.LastIndex, HintIndex: r.HintIndex, HintStamp: t.stamp(r.HintStamp)}
	case KindReadIndex:
		w.ReadIndex = &wReadIndex{Epoch: m.ReadIndex.Epoch, ID: m.ReadIndex.ID, Sent: timeToWire(m.ReadIndex.Sent)}
	case KindReadIndexReply:
		r := m.ReadIndexReply
		w.ReadIndexReply = &wReadIndexReply{Epoch: r.Epoch, ID: r.ID, Sent: timeToWire(r.Sent), Reign: t.stamp(r.Reign), OK: r.OK, Index: r.Index, Leader: uint64(r.Leader)}
	case KindTimeoutNow:
		w.TimeoutNow = &wTimeoutNow{Epoch: m.TimeoutNow.Epoch, Reign: t.stamp(m.TimeoutNow.Reign)}
	case KindFetch:
		f := m.Fetch
		w.Fetch = &wFetch{Epoch: f.Epoch, ID: f.ID, Attempt: timeToWire(f.Attempt), PrevIndex: f.PrevIndex, PrevStamp: t.stamp(f.PrevStamp), Max: f.Max,
			Committed: f.Committed, UpToIndex: f.UpToIndex, UpToStamp: t.stamp(f.UpToStamp)}
	case KindFetchReply:
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

func messageFromWire(w *wMessage) (Message, error) {
	k := Kind(w.Kind)
	if !k.Valid() {
		return Message{}, fmt.Errorf("unknown message kind %d", w.Kind)
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
	if entries > MaxAppendEntries {
		return Message{}, fmt.Errorf("append of %d entries exceeds the limit of %d", entries, MaxAppendEntries)
	}
	q, err := decodeQTs(w.QTs, maxQTs(entries))
	if err != nil {
		return Message{}, err
	}
	m := Message{From: edict.ProcessID(w.From), To: edict.ProcessID(w.To)}
	var e stampErr
	switch k {
	case KindLease:
		if w.Lease != nil {
			m.Lease = leaseFromWire(w.Lease, q, &e)
		}
	case KindAppend:
		if wa := w.Append; wa != nil {
			m.Append = &Append{Epoch: wa.Epoch, Reign: e.get(q, wa.Reign), LeaderCommit: wa.Commit, PrevIndex: wa.PrevIndex, PrevStamp: e.get(q, wa.PrevStamp),
				Entries: entriesFromWire(wa.Entries, wa.PrevIndex+1, q, &e)}
		}
	case KindAppendReply:
		if r := w.AppendReply; r != nil {
			m.AppendReply = &AppendReply{Epoch: r.Epoch, Reign: e.get(q, r.Reign), Accepted: e.get(q, r.Accepted), Success: r.Success, Refused: r.Refused, LastIndex: r.LastIndex, HintIndex: r.HintIndex, HintStamp: e.get(q, r.HintStamp)}
		}
	case KindReadIndex:
		if r := w.ReadIndex; r != nil {
			m.ReadIndex = &ReadIndexRequest{Epoch: r.Epoch, ID: r.ID, Sent: timeFromWire(r.Sent)}
		}
	case KindReadIndexReply:
		if r := w.ReadIndexReply; r != nil {
			m.ReadIndexReply = &ReadIndexReply{Epoch: r.Epoch, ID: r.ID, Sent: timeFromWire(r.Sent), Reign: e.get(q, r.Reign), OK: r.OK, Index: r.Index, Leader: edict.ProcessID(r.Leader)}
		}
	case KindTimeoutNow:
		if r := w.TimeoutNow; r != nil {
			m.TimeoutNow = &TimeoutNow{Epoch: r.Epoch, Reign: e.get(q, r.Reign)}
		}
	case KindFetch:
		if f := w.Fetch; f != nil {
			m.Fetch = &Fetch{Epoch: f.Epoch, ID: f.ID, Attempt: timeFromWire(f.Attempt), PrevIndex: f.PrevIndex, PrevStamp: e.get(q, f.PrevStamp), Max: f.Max,
				Committed: f.Committed, UpToIndex: f.UpToIndex, UpToStamp: e.get(q, f.UpToStamp)}
		}
	case KindFetchReply:
		if r := w.FetchReply; r != nil {
			if len(r.Entries) == 0 && r.First != 0 {
				return Message{}, errors.New("fetch reply names a first index but has no entries")
			}
			m.FetchReply = &FetchReply{Epoch: r.Epoch, ID: r.ID, Attempt: timeFromWire(r.Attempt), LastIndex: r.LastIndex, LastStamp: e.get(q, r.LastStamp), Compacted: r.Compacted, OK: r.OK,
				Entries: entriesFromWire(r.Entries, r.First, q, &e), Committed: r.Committed, Commit: r.Commit}
		}
	}
	if present != 1 || m.Kind() != k {
		return Message{}, fmt.Errorf("%v message must carry exactly its own payload (%d payloads present)", k, present)
	}
	if e.err != nil {
		return Message{}, fmt.Errorf("%v message: %w", k, e.err)
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

// AppendSnapshotHeader validates h and appends its encoding to dst.
func AppendSnapshotHeader(dst []byte, h SnapshotHeader) ([]byte, error) {
	w, err := snapshotHeaderToWire(h)
	if err != nil {
		return dst, err
	}
	return appendBody(dst, "snapshot header", w)
}

func snapshotHeaderToWire(s SnapshotHeader) (*wSnapshotHeader, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	var t qtTable
	w := &wSnapshotHeader{Epoch: s.Epoch, Reign: t.stamp(s.Reign), LastIndex: s.LastIndex, LastStamp: t.stamp(s.LastStamp), Size: s.Size}
	w.Members, w.Learners = idsToWire(s.Members), idsToWire(s.Learners)
	w.QTs = t.wire
	return w, nil
}

// DecodeSnapshotHeader decodes and validates a header encoded by
// AppendSnapshotHeader.
func DecodeSnapshotHeader(body []byte) (SnapshotHeader, error) {
	var w wSnapshotHeader
	if err := decodeBody("snapshot header", body, &w); err != nil {
		return SnapshotHeader{}, err
	}
	if len(w.Members) > MaxMembers || len(w.Learners) > MaxMembers {
		return SnapshotHeader{}, fmt.Errorf("wire: decode snapshot header: %d members and %d learners, the limit is %d each", len(w.Members), len(w.Learners), MaxMembers)
	}
	q, err := decodeQTs(w.QTs, maxQTs(0))
	if err != nil {
		return SnapshotHeader{}, fmt.Errorf("wire: decode snapshot header: %w", err)
	}
	var e stampErr
	s := SnapshotHeader{Epoch: w.Epoch, Reign: e.get(q, w.Reign), LastIndex: w.LastIndex, LastStamp: e.get(q, w.LastStamp), Size: w.Size}
	if e.err != nil {
		return SnapshotHeader{}, fmt.Errorf("wire: decode snapshot header: %w", e.err)
	}
	s.Members, s.Learners = idsFromWire(w.Members), idsFromWire(w.Learners)
	if err := s.Validate(); err != nil {
		return SnapshotHeader{}, fmt.Errorf("wire: decode snapshot header: %w", err)
	}
	return s, nil
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
