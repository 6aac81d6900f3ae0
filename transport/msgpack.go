package transport

import (
	"errors"
	"fmt"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect"
	"github.com/edictlog/edictlog/wire"
	"github.com/hashicorp/go-msgpack/v2/codec"
)

// The wire forms below are what msgpack encodes, rather than the public
// types themselves:
//
//   - The layout is defined here, once, and versioned by this package's
//     frame version byte; a field added to elect.Message or edict.Stamp
//     does not silently change the wire format.
//   - Structs travel as msgpack arrays (toarray), not maps with field
//     names: an Append of 64 small entries is mostly payload.
//   - Quorum timestamps are interned in a per-message table (qts): the
//     entries of one Append share one or two QTs, and a 3-process QT is
//     ~40 bytes, more than many payloads.
//
// Changing any of these types changes the wire format: bump FrameVersion.

type wTime struct {
	_struct bool `codec:",toarray"` // msgpack array, not map
	I       uint64
	N       int64
}

type wReading struct {
	_struct bool `codec:",toarray"`
	P       uint64
	T       wTime
}

// wStamp is an edict.Stamp whose QT is a 1-based reference into the
// message's QT table; 0 means no QT (only the zero stamp has none).
type wStamp struct {
	_struct bool `codec:",toarray"`
	E       uint64
	Q       uint32
	C       uint64
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
	// The sender's epoch news (elect.Message.Newest…).
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

type wSnapshotHeader struct {
	_struct   bool `codec:",toarray"`
	Epoch     uint64
	QTs       [][]wReading
	Reign     wStamp
	LastIndex uint64
	LastStamp wStamp
	Members   []uint64
	Learners  []uint64
	Size      int64
	// Addrs is last, so that a body that ends before it decodes with
	// none. In increasing process order.
	Addrs []wAddr
}

// wAddr is one process's transport address.
type wAddr struct {
	_struct bool `codec:",toarray"`
	P       uint64
	A       string
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

func timeToWire(t edict.Time) wTime   { return wTime{I: t.Incarnation, N: t.Nanos} }
func timeFromWire(w wTime) edict.Time { return edict.Time{Incarnation: w.I, Nanos: w.N} }

// qtTable interns the QTs of one message while it is encoded.
type qtTable struct {
	qts  []edict.QT
	wire [][]wReading
	last int // most recent hit, 1-based: entries of an Append repeat QTs
}

func (t *qtTable) stamp(s edict.Stamp) wStamp {
	return wStamp{E: s.Epoch, Q: t.ref(s.QT), C: s.Counter}
}

func (t *qtTable) ref(qt edict.QT) uint32 {
	if len(qt) == 0 {
		return 0
	}
	if t.last > 0 && t.qts[t.last-1].Equal(qt) {
		return uint32(t.last)
	}
	// Look back a little: a leader's entries alternate between a handful
	// of QTs (their reign and the lease they were stamped under). Missing
	// an older duplicate only costs bytes, never correctness.
	for i := len(t.qts) - 1; i >= 0 && i >= len(t.qts)-4; i-- {
		if t.qts[i].Equal(qt) {
			t.last = i + 1
			return uint32(t.last)
		}
	}
	w := make([]wReading, len(qt))
	for i, r := range qt {
		w[i] = wReading{P: uint64(r.Process), T: timeToWire(r.T)}
	}
	t.qts = append(t.qts, qt)
	t.wire = append(t.wire, w)
	t.last = len(t.qts)
	return uint32(t.last)
}

// qtRefs resolves a decoded message's QT table.
type qtRefs []edict.QT

func decodeQTs(w [][]wReading, limit int) (qtRefs, error) {
	if len(w) > limit {
		return nil, fmt.Errorf("%d quorum timestamps exceed the limit of %d", len(w), limit)
	}
	qts := make(qtRefs, len(w))
	for i, rs := range w {
		qt := make(edict.QT, len(rs))
		for j, r := range rs {
			qt[j] = edict.Reading{Process: edict.ProcessID(r.P), T: timeFromWire(r.T)}
		}
		if err := qt.WellFormed(); err != nil {
			return nil, fmt.Errorf("quorum timestamp %d: %w", i+1, err)
		}
		qts[i] = qt
	}
	return qts, nil
}

func (q qtRefs) stamp(w wStamp) (edict.Stamp, error) {
	if w.Q == 0 {
		if w.E != 0 || w.C != 0 {
			return edict.Stamp{}, errors.New("non-zero stamp without a quorum timestamp")
		}
		return edict.Stamp{}, nil
	}
	if int(w.Q) > len(q) {
		return edict.Stamp{}, fmt.Errorf("stamp refers to quorum timestamp %d of %d", w.Q, len(q))
	}
	// Decoded stamps share their QT with the table; QTs are never mutated
	// in place (edict builds new ones).
	return edict.Stamp{Epoch: w.E, QT: q[w.Q-1], Counter: w.C}, nil
}

// leaseToWire and leaseFromWire must name every field of elect.Message;
// TestLeaseWireCoversEveryField fails when one is added there and not here.
func leaseToWire(m *elect.Message, t *qtTable) *wLease {
	return &wLease{
		Type: uint8(m.Type), From: uint64(m.From), To: uint64(m.To), Epoch: m.Epoch,
		Start: timeToWire(m.Start), Delta: int64(m.Delta), Wedge: m.Wedge,
		T: timeToWire(m.T), Grantee: uint64(m.Grantee), Remaining: int64(m.Remaining), Wedged: m.Wedged,
		LastIndex: m.LastIndex, LastStamp: t.stamp(m.LastStamp), Payload: m.Payload,
		Newest: m.Newest, NewestMembers: idsToWire(m.NewestMembers), NewestRan: m.NewestRan,
		NewestStopIndex: m.NewestStopIndex, NewestStopStamp: t.stamp(m.NewestStopStamp),
	}
}

func leaseFromWire(w *wLease, q qtRefs, e *stampErr) *elect.Message {
	return &elect.Message{
		Type: elect.MessageType(w.Type), From: edict.ProcessID(w.From), To: edict.ProcessID(w.To), Epoch: w.Epoch,
		Start: timeFromWire(w.Start), Delta: time.Duration(w.Delta), Wedge: w.Wedge,
		T: timeFromWire(w.T), Grantee: edict.ProcessID(w.Grantee), Remaining: time.Duration(w.Remaining), Wedged: w.Wedged,
		LastIndex: w.LastIndex, LastStamp: e.get(q, w.LastStamp), Payload: w.Payload,
		Newest: w.Newest, NewestMembers: idsFromWire(w.NewestMembers), NewestRan: w.NewestRan,
		NewestStopIndex: w.NewestStopIndex, NewestStopStamp: e.get(q, w.NewestStopStamp),
	}
}
