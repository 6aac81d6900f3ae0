package transport

import (
	"errors"
	"fmt"

	"github.com/edictlog/edictlog/edict"
)

// The wire forms below are what go-msgpack encodes for a snapshot header
// (messages are written by hand, message_wire.go, in the same forms),
// rather than the public types themselves:
//
//   - The layout is defined here, once, and versioned by this package's
//     frame version byte; a field added to edict.Stamp does not silently
//     change the wire format.
//   - Structs travel as msgpack arrays (toarray), not maps with field
//     names.
//   - Quorum timestamps are interned in a per-body table (qts): the
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

func timeToWire(t edict.Time) wTime   { return wTime{I: t.Incarnation, N: t.Nanos} }
func timeFromWire(w wTime) edict.Time { return edict.Time{Incarnation: w.I, Nanos: w.N} }

// qtTable interns the QTs of one message while it is encoded.
type qtTable struct {
	qts  []edict.QT
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
	t.qts = append(t.qts, qt)
	t.last = len(t.qts)
	return uint32(t.last)
}

// wireForm is the table for go-msgpack: nil when empty.
func (t *qtTable) wireForm() [][]wReading {
	if len(t.qts) == 0 {
		return nil
	}
	w := make([][]wReading, len(t.qts))
	for i, qt := range t.qts {
		w[i] = make([]wReading, len(qt))
		for j, r := range qt {
			w[i][j] = wReading{P: uint64(r.Process), T: timeToWire(r.T)}
		}
	}
	return w
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
