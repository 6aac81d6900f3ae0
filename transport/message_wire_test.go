package transport

import (
	"bytes"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
	"github.com/edictlog/edictlog/wire/wiretest"
)

// messageGen makes random valid messages of every kind, with the values
// that change an integer's or a length's msgpack form (0, 127, 128, 255,
// 256, 65535, 65536, 2^32, negative nanos) and stamps that share QTs or
// not, so that the QT table's interning is exercised too.
type messageGen struct{ r *rand.Rand }

func (g messageGen) uint() uint64 {
	edges := []uint64{0, 1, 127, 128, 255, 256, math.MaxUint16, math.MaxUint16 + 1, math.MaxUint32, math.MaxUint32 + 1, math.MaxInt64, math.MaxUint64}
	if g.r.IntN(3) == 0 {
		return edges[g.r.IntN(len(edges))]
	}
	return g.r.Uint64() >> g.r.IntN(64)
}

func (g messageGen) int() int64 {
	edges := []int64{0, 1, -1, -32, -33, 127, 128, -128, -129, math.MaxInt16, math.MaxInt16 + 1, math.MinInt16, math.MaxInt32 + 1, math.MinInt32 - 1, math.MaxInt64, math.MinInt64}
	if g.r.IntN(3) == 0 {
		return edges[g.r.IntN(len(edges))]
	}
	return int64(g.r.Uint64()) >> g.r.IntN(64)
}

func (g messageGen) time() edict.Time { return edict.Time{Incarnation: g.uint(), Nanos: g.int()} }

// qts are the QTs a message's stamps pick from: few, so that they repeat.
func (g messageGen) qts() []edict.QT {
	qts := make([]edict.QT, 1+g.r.IntN(6))
	for i := range qts {
		n := 1 + g.r.IntN(5)
		rs := make([]edict.Reading, 0, n)
		p := edict.ProcessID(0)
		for range n {
			p += edict.ProcessID(1 + g.r.IntN(300))
			rs = append(rs, edict.Reading{Process: p, T: g.time()})
		}
		qts[i] = rs
	}
	return qts
}

func (g messageGen) stamp(qts []edict.QT) edict.Stamp {
	if g.r.IntN(5) == 0 {
		return edict.Stamp{}
	}
	return edict.Stamp{Epoch: g.uint(), QT: qts[g.r.IntN(len(qts))], Counter: g.uint()}
}

func (g messageGen) data() []byte {
	switch g.r.IntN(8) {
	case 0:
		return nil
	case 1:
		return []byte{}
	case 2:
		return bytes.Repeat([]byte{7}, []int{255, 256, math.MaxUint16, math.MaxUint16 + 1}[g.r.IntN(4)])
	}
	b := make([]byte, g.r.IntN(300))
	for i := range b {
		b[i] = byte(g.r.Uint32())
	}
	return b
}

func (g messageGen) entries(first uint64, qts []edict.QT) []wire.Entry {
	n := g.r.IntN(70)
	if n == 0 || first > math.MaxUint64-uint64(n) {
		return nil
	}
	es := make([]wire.Entry, n)
	for i := range es {
		es[i] = wire.Entry{Index: first + uint64(i), Reign: g.stamp(qts), Stamp: g.stamp(qts), Kind: wire.EntryKind(1 + g.r.IntN(4)), Data: g.data()}
	}
	return es
}

func (g messageGen) lease(qts []edict.QT) *wire.Lease {
	m := &wire.Lease{Type: wire.LeaseType(1 + g.r.IntN(int(wire.LeaseDetector))), From: 1, To: 2, Epoch: g.uint(),
		Start: g.time(), Delta: time.Duration(g.r.Int64()), Wedge: g.r.IntN(2) == 0, T: g.time(), Grantee: edict.ProcessID(g.uint()),
		Remaining: time.Duration(g.r.Int64()), Wedged: g.r.IntN(2) == 0, LastIndex: g.uint(), LastStamp: g.stamp(qts), Newest: g.uint()}
	if m.Type == wire.LeaseDetector {
		m.Payload = g.data()
		if len(m.Payload) > wire.MaxDetectorPayload {
			m.Payload = m.Payload[:wire.MaxDetectorPayload]
		}
	}
	if g.r.IntN(2) == 0 {
		for p := range edict.ProcessID(1 + g.r.IntN(edict.MaxQTSize)) {
			m.NewestMembers = append(m.NewestMembers, 2*p+1)
		}
		m.NewestRan = g.r.IntN(2) == 0
		if g.r.IntN(2) == 0 {
			m.NewestStopIndex, m.NewestStopStamp = 1+g.uint()/2, edict.Stamp{Epoch: 1, QT: qts[0], Counter: 3}
		}
	}
	return m
}

func (g messageGen) message() wire.Message {
	qts := g.qts()
	reign := func() edict.Stamp {
		return edict.Stamp{Epoch: g.uint(), QT: qts[g.r.IntN(len(qts))], Counter: g.uint()}
	}
	m := wire.Message{From: 1, To: 2}
	switch wire.Kind(1 + g.r.IntN(int(wire.KindFetchReply))) {
	case wire.KindLease:
		m.Lease = g.lease(qts)
	case wire.KindAppend:
		a := &wire.Append{Epoch: g.uint(), Reign: reign(), LeaderCommit: g.uint(), PrevIndex: g.uint() / 2, PrevStamp: g.stamp(qts)}
		a.Entries = g.entries(a.PrevIndex+1, qts)
		m.Append = a
	case wire.KindAppendReply:
		r := &wire.AppendReply{Epoch: g.uint(), Reign: reign(), Accepted: g.stamp(qts), Success: g.r.IntN(2) == 0, LastIndex: g.uint()}
		if !r.Success {
			r.Refused = g.r.IntN(2) == 0
			r.HintIndex, r.HintStamp = r.LastIndex/2, g.stamp(qts)
			if r.LastIndex == 0 {
				r.HintIndex = 0
			}
		}
		m.AppendReply = r
	case wire.KindReadIndex:
		m.ReadIndex = &wire.ReadIndexRequest{Epoch: g.uint(), ID: 1 + g.uint()/2, Sent: g.time()}
	case wire.KindReadIndexReply:
		m.ReadIndexReply = &wire.ReadIndexReply{Epoch: g.uint(), ID: 1 + g.uint()/2, Sent: g.time(), Reign: reign(), OK: g.r.IntN(2) == 0, Index: g.uint(), Leader: edict.ProcessID(g.uint())}
	case wire.KindTimeoutNow:
		m.TimeoutNow = &wire.TimeoutNow{Epoch: g.uint(), Reign: reign()}
	case wire.KindFetch:
		f := &wire.Fetch{Epoch: g.uint(), ID: 1 + g.uint()/2, Attempt: g.time(), PrevIndex: g.uint(), PrevStamp: g.stamp(qts), Max: uint32(g.uint())}
		if g.r.IntN(2) == 0 {
			f.Committed = true
			if g.r.IntN(2) == 0 {
				f.UpToIndex, f.UpToStamp = 1+g.uint()/2, reign()
			}
		}
		m.Fetch = f
	case wire.KindFetchReply:
		r := &wire.FetchReply{Epoch: g.uint(), ID: 1 + g.uint()/2, Attempt: g.time(), LastIndex: g.uint(), LastStamp: g.stamp(qts), Compacted: g.r.IntN(2) == 0, OK: g.r.IntN(2) == 0}
		if r.OK {
			r.Entries = g.entries(1+g.uint()/2, qts)
		}
		if g.r.IntN(2) == 0 {
			r.Committed = true
			r.Commit = g.uint()
			if n := len(r.Entries); n > 0 {
				r.Commit = max(r.Commit, r.Entries[n-1].Index)
			}
		}
		m.FetchReply = r
	}
	return m
}

// codecMessages are the messages the cross-checks start from: one of
// every kind from wiretest, and random ones.
func codecMessages(t testing.TB, n int) []wire.Message {
	ms := wiretest.Messages()
	ms = append(ms, wire.Message{From: 1, To: 2, Append: wiretest.Append(0, 64, 256)})
	g := messageGen{rand.New(rand.NewPCG(25, 1))}
	for len(ms) < n {
		m := g.message()
		if err := m.Validate(); err != nil {
			t.Fatalf("the generator made an invalid message %v: %v", m, err)
		}
		ms = append(ms, m)
	}
	return ms
}

// The hand-written encoder writes the bytes go-msgpack writes, and both
// decoders read them back to the message.
func TestCodecMatchesOracle(t *testing.T) {
	t.Parallel()
	for _, m := range codecMessages(t, 3000) {
		got, err := appendMessage(nil, m)
		if err != nil {
			t.Fatalf("%v: encode: %v", m, err)
		}
		want, err := oracleAppendMessage(nil, m)
		if err != nil {
			t.Fatalf("%v: oracle encode: %v", m, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%v: encodings differ\n got %x\nwant %x", m, got, want)
		}
		checkDecodersAgree(t, got)
		dm, err := decodeMessage(got)
		if err != nil {
			t.Fatalf("%v: decode: %v", m, err)
		}
		if !reflect.DeepEqual(dm, m) {
			t.Fatalf("round trip changed the message:\n got %#v\nwant %#v", dm, m)
		}
	}
}

// checkDecodersAgree holds the hand-written decoder to the reflective one
// on any body: what it accepts, the oracle accepts as the same message,
// and the two encoders write that message alike; what only the oracle
// accepts is a form no encoder writes (its canonical encoding is other
// bytes), and that encoding the hand-written decoder reads.
func checkDecodersAgree(t *testing.T, body []byte) {
	t.Helper()
	m, err := decodeMessage(body)
	om, oerr := oracleDecodeMessage(body)
	switch {
	case err == nil && oerr != nil:
		t.Fatalf("decoded %v where the oracle refuses: %v\nbody %x", m, oerr, body)
	case err == nil:
		if !reflect.DeepEqual(m, om) {
			t.Fatalf("decoders disagree:\n got %#v\nwant %#v\nbody %x", m, om, body)
		}
		b, err := appendMessage(nil, m)
		if err != nil {
			t.Fatalf("decoded %v but cannot encode it: %v", m, err)
		}
		ob, oerr := oracleAppendMessage(nil, m)
		if oerr != nil || !bytes.Equal(b, ob) {
			t.Fatalf("encoders disagree on %v (%v):\n got %x\nwant %x", m, oerr, b, ob)
		}
		m2, err := decodeMessage(b)
		if err != nil || !reflect.DeepEqual(m, m2) {
			t.Fatalf("round trip changed %v to %v (%v)", m, m2, err)
		}
	case oerr == nil:
		canon, cerr := appendMessage(nil, om)
		if cerr != nil {
			t.Fatalf("the oracle decoded %v, which does not encode: %v", om, cerr)
		}
		if bytes.Equal(canon, body) {
			t.Fatalf("refused a body the encoder writes: %v\nbody %x", err, body)
		}
		m2, err := decodeMessage(canon)
		if err != nil || !reflect.DeepEqual(m2, om) {
			t.Fatalf("the canonical form of %v decodes to %v (%v)", om, m2, err)
		}
	}
}

// Decoding takes a few allocations whatever the entries: the message, its
// payload, the entries, one buffer for their data and the QT table.
func TestDecodeAllocations(t *testing.T) {
	body, err := appendMessage(nil, wire.Message{From: 1, To: 2, Append: wiretest.Append(0, 64, 256)})
	if err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := decodeMessage(body); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 8 {
		t.Fatalf("decoding a 64-entry append takes %v allocations, want at most 8", allocs)
	}
}
