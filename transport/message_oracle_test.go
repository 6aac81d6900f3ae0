package transport

import (
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
)

// The message codec before message_wire.go: go-msgpack's reflective
// encoder and decoder of the array-form structs below, whose layout
// message_wire.go writes and reads by hand. It is the oracle the tests and
// fuzz targets hold the hand-written codec to: the same bytes for every
// message, the same message from every body both accept, and nothing
// accepted by the hand-written decoder that this one refuses.

// oracleAppendMessage validates m and appends the go-msgpack encoding of
// its array-form structs to dst.
func oracleAppendMessage(dst []byte, m wire.Message) ([]byte, error) {
	w, err := messageToWire(m)
	if err != nil {
		return dst, err
	}
	return appendBody(dst, m.Kind().String()+" message", w)
}

// oracleDecodeMessage decodes and validates one message with go-msgpack's
// reflective decoder.
func oracleDecodeMessage(body []byte) (wire.Message, error) {
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
	w.QTs = t.wireForm()
	return w, nil
}

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

type wLease struct {
	_struct   bool `codec:",toarray"`
	Type      uint8
	From      uint64
	To        uint64
	Epoch     uint64
	Start     wTime
	Delta     int64
	Wedge     bool
	T         wTime
	Grantee   uint64
	Remaining int64
	Wedged    bool
	LastIndex uint64
	LastStamp wStamp
	Payload   []byte
	// The sender's epoch news (wire.Lease.Newest…).
	Newest          uint64
	NewestMembers   []uint64
	NewestRan       bool
	NewestStopIndex uint64
	NewestStopStamp wStamp
}

type wEntry struct {
	_struct bool `codec:",toarray"`
	Reign   wStamp
	Stamp   wStamp
	Kind    uint8
	Data    wBytes
}

type wAppend struct {
	_struct   bool `codec:",toarray"`
	Epoch     uint64
	Reign     wStamp
	Commit    uint64
	PrevIndex uint64
	PrevStamp wStamp
	Entries   []wEntry
}

type wAppendReply struct {
	_struct   bool `codec:",toarray"`
	Epoch     uint64
	Reign     wStamp
	Accepted  wStamp
	Success   bool
	Refused   bool
	LastIndex uint64
	HintIndex uint64
	HintStamp wStamp
}

type wReadIndex struct {
	_struct bool `codec:",toarray"`
	Epoch   uint64
	ID      uint64
	Sent    wTime
}

type wReadIndexReply struct {
	_struct bool `codec:",toarray"`
	Epoch   uint64
	ID      uint64
	Sent    wTime
	Reign   wStamp
	OK      bool
	Index   uint64
	Leader  uint64
}

type wTimeoutNow struct {
	_struct bool `codec:",toarray"`
	Epoch   uint64
	Reign   wStamp
}

type wFetch struct {
	_struct   bool `codec:",toarray"`
	Epoch     uint64
	ID        uint64
	Attempt   wTime
	PrevIndex uint64
	PrevStamp wStamp
	Max       uint32
	Committed bool
	UpToIndex uint64
	UpToStamp wStamp
}

type wFetchReply struct {
	_struct   bool `codec:",toarray"`
	Epoch     uint64
	ID        uint64
	Attempt   wTime
	LastIndex uint64
	LastStamp wStamp
	Compacted bool
	OK        bool
	First     uint64 // index of Entries[0]; the rest follow contiguously
	Entries   []wEntry
	Committed bool
	Commit    uint64
}

// wMessage is the body of a message frame. Exactly the pointer that Kind
// names is non-nil.
type wMessage struct {
	_struct        bool `codec:",toarray"`
	Kind           uint8
	From           uint64
	To             uint64
	QTs            [][]wReading
	Lease          *wLease
	Append         *wAppend
	AppendReply    *wAppendReply
	ReadIndex      *wReadIndex
	ReadIndexReply *wReadIndexReply
	TimeoutNow     *wTimeoutNow
	Fetch          *wFetch
	FetchReply     *wFetchReply
}

// wBytes is entry data. It encodes as a msgpack bin. It decodes through
// codec.Raw because go-msgpack's own []byte decoding allocates by the
// declared length in steps of MaxInitLen (quadratic for large values, or a
// large allocation from a tiny hostile frame); Raw is bounded by the bytes
// actually present.
type wBytes []byte

// Both methods pass go-msgpack a pointer, which fits in an interface
// without an allocation: this runs once per entry.

func (b *wBytes) CodecEncodeSelf(e *codec.Encoder) { e.MustEncode((*[]byte)(b)) }

func (b *wBytes) CodecDecodeSelf(d *codec.Decoder) {
	d.MustDecode((*codec.Raw)(b))
	v, err := parseBin(*b)
	if err != nil {
		panic(err) // go-msgpack turns a panic inside a Selfer into a decode error
	}
	*b = v
}

// parseBin returns the payload of one msgpack bin (or nil) value.
func parseBin(raw []byte) ([]byte, error) {
	if len(raw) == 0 {
		return nil, errors.New("missing entry data")
	}
	var n, hdr int
	switch raw[0] {
	case 0xc0: // nil
		if len(raw) != 1 {
			return nil, errors.New("malformed nil entry data")
		}
		return nil, nil
	case 0xc4:
		hdr = 2
		if len(raw) >= hdr {
			n = int(raw[1])
		}
	case 0xc5:
		hdr = 3
		if len(raw) >= hdr {
			n = int(raw[1])<<8 | int(raw[2])
		}
	case 0xc6:
		hdr = 5
		if len(raw) >= hdr {
			n = int(raw[1])<<24 | int(raw[2])<<16 | int(raw[3])<<8 | int(raw[4])
		}
	default:
		return nil, fmt.Errorf("entry data of msgpack type 0x%02x, want bin", raw[0])
	}
	if len(raw) < hdr || len(raw)-hdr != n {
		return nil, fmt.Errorf("entry data declares %d bytes, has %d", n, max(len(raw)-hdr, 0))
	}
	return raw[hdr:len(raw):len(raw)], nil
}

func entriesToWire(es []wire.Entry, t *qtTable) []wEntry {
	if len(es) == 0 {
		return nil
	}
	w := make([]wEntry, len(es))
	for i := range es {
		e := &es[i]
		w[i] = wEntry{Reign: t.stamp(e.Reign), Stamp: t.stamp(e.Stamp), Kind: uint8(e.Kind), Data: e.Data}
	}
	return w
}

// entriesFromWire rebuilds entries whose first index is first.
func entriesFromWire(w []wEntry, first uint64, q qtRefs, e *stampErr) []wire.Entry {
	if len(w) == 0 {
		return nil
	}
	es := make([]wire.Entry, len(w))
	for i := range w {
		we := &w[i]
		es[i] = wire.Entry{Index: first + uint64(i), Reign: e.get(q, we.Reign), Stamp: e.get(q, we.Stamp), Kind: wire.EntryKind(we.Kind), Data: we.Data}
	}
	return es
}

// leaseToWire and leaseFromWire must name every field of wire.Lease;
// TestLeaseWireCoversEveryField fails when one is added there and not here.
func leaseToWire(m *wire.Lease, t *qtTable) *wLease {
	return &wLease{
		Type: uint8(m.Type), From: uint64(m.From), To: uint64(m.To), Epoch: m.Epoch,
		Start: timeToWire(m.Start), Delta: int64(m.Delta), Wedge: m.Wedge,
		T: timeToWire(m.T), Grantee: uint64(m.Grantee), Remaining: int64(m.Remaining), Wedged: m.Wedged,
		LastIndex: m.LastIndex, LastStamp: t.stamp(m.LastStamp), Payload: m.Payload,
		Newest: m.Newest, NewestMembers: idsToWire(m.NewestMembers), NewestRan: m.NewestRan,
		NewestStopIndex: m.NewestStopIndex, NewestStopStamp: t.stamp(m.NewestStopStamp),
	}
}

func leaseFromWire(w *wLease, q qtRefs, e *stampErr) *wire.Lease {
	return &wire.Lease{
		Type: wire.LeaseType(w.Type), From: edict.ProcessID(w.From), To: edict.ProcessID(w.To), Epoch: w.Epoch,
		Start: timeFromWire(w.Start), Delta: time.Duration(w.Delta), Wedge: w.Wedge,
		T: timeFromWire(w.T), Grantee: edict.ProcessID(w.Grantee), Remaining: time.Duration(w.Remaining), Wedged: w.Wedged,
		LastIndex: w.LastIndex, LastStamp: e.get(q, w.LastStamp), Payload: w.Payload,
		Newest: w.Newest, NewestMembers: idsFromWire(w.NewestMembers), NewestRan: w.NewestRan,
		NewestStopIndex: w.NewestStopIndex, NewestStopStamp: e.get(q, w.NewestStopStamp),
	}
}
