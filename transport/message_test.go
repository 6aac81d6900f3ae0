package transport

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
	"github.com/edictlog/edictlog/wire/wiretest"
)

func TestMessageRoundTrip(t *testing.T) {
	t.Parallel()
	for _, m := range wiretest.Messages() {
		b, err := appendMessage(nil, m)
		if err != nil {
			t.Fatalf("%v: encode: %v", m, err)
		}
		got, err := decodeMessage(b)
		if err != nil {
			t.Fatalf("%v: decode: %v", m, err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Fatalf("round trip changed the message:\n got %#v\nwant %#v", got, m)
		}
	}
}

// TestLeaseWireCoversEveryField fails when wire.Lease gains a field the
// wire form does not carry: set every field to a distinct non-zero value by
// reflection and require it back.
func TestLeaseWireCoversEveryField(t *testing.T) {
	t.Parallel()
	var m wire.Lease
	v := reflect.ValueOf(&m).Elem()
	for i := range v.NumField() {
		setNonZero(t, v.Field(i), uint64(i+1))
	}
	m.Type = wire.LeaseDetector // keep it valid: the only type that carries a payload
	b, err := appendMessage(nil, wire.LeaseMessage(m))
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeMessage(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*got.Lease, m) {
		t.Fatalf("lease message fields lost on the wire:\n got %#v\nwant %#v", *got.Lease, m)
	}
}

func setNonZero(t *testing.T, f reflect.Value, n uint64) {
	if f.Type() == reflect.TypeFor[edict.Stamp]() {
		f.Set(reflect.ValueOf(wiretest.Stamp(n, int64(n)*100, n)))
		return
	}
	switch f.Kind() {
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		f.SetUint(n)
	case reflect.Int64, reflect.Int:
		f.SetInt(int64(n))
	case reflect.Bool:
		f.SetBool(true)
	case reflect.Slice:
		switch f.Type().Elem() {
		case reflect.TypeFor[byte]():
			f.SetBytes([]byte{byte(n), byte(n >> 8), 7})
		case reflect.TypeFor[edict.ProcessID]():
			f.Set(reflect.ValueOf([]edict.ProcessID{edict.ProcessID(n), edict.ProcessID(n + 1)}))
		default:
			t.Fatalf("wire.Lease has a slice of %v the test does not know", f.Type().Elem())
		}
	case reflect.Struct:
		for i := range f.NumField() {
			setNonZero(t, f.Field(i), n*10+uint64(i))
		}
	default:
		t.Fatalf("wire.Lease has a field of kind %v the test does not know: extend the wire form and this test", f.Kind())
	}
}

func TestAppendInternsQTs(t *testing.T) {
	t.Parallel()
	m := wire.Message{From: 1, To: 2, Append: wiretest.Append(0, 64, 256)}
	w, err := messageToWire(m)
	if err != nil {
		t.Fatal(err)
	}
	// The reign and prev stamp share one QT, the 64 entry stamps another.
	if qts := len(w.QTs); qts != 2 {
		t.Fatalf("QT table has %d entries, want 2", qts)
	}
	f, _ := appendMessage(nil, m)
	payload := 64 * 256
	if over := len(f) - payload; over > 64*12+200 {
		t.Fatalf("append of %d payload bytes takes %d bytes on the wire (%d overhead)", payload, len(f), over)
	}
}

// TestEncodeRefusesInvalid: the encoder refuses what Validate refuses
// (wire's TestValidateRefuses checks the reasons), so nothing is sent that
// the receiver would drop.
func TestEncodeRefusesInvalid(t *testing.T) {
	t.Parallel()
	for _, c := range wiretest.InvalidMessages() {
		if _, err := appendMessage(nil, c.M); err == nil || !strings.Contains(err.Error(), c.Want) {
			t.Errorf("%v: encode = %v, want an error containing %q", c.M, err, c.Want)
		}
	}
}

func TestSnapshotHeaderRoundTrip(t *testing.T) {
	t.Parallel()
	s := wire.SnapshotHeader{Epoch: 2, Reign: wiretest.Stamp(2, 10, 0), LastIndex: 77, LastStamp: wiretest.Stamp(2, 20, 5), Members: []edict.ProcessID{1, 2, 5},
		Learners: []edict.ProcessID{7}, Size: 1 << 20}
	b, err := appendSnapshotHeader(nil, s)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeSnapshotHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, s) {
		t.Fatalf("got %#v, want %#v", got, s)
	}
	bad := s
	bad.Learners = []edict.ProcessID{7, 7}
	if _, err := appendSnapshotHeader(nil, bad); err == nil || !strings.Contains(err.Error(), "learner list not strictly increasing") {
		t.Fatalf("a repeated learner: %v", err)
	}
}

// A snapshot header carries the addresses of the processes it names: a
// follower that installs it skips the config edicts that taught them.
func TestSnapshotHeaderAddrs(t *testing.T) {
	t.Parallel()
	s := wire.SnapshotHeader{Epoch: 2, Reign: wiretest.Stamp(2, 10, 0), LastIndex: 77, LastStamp: wiretest.Stamp(2, 20, 5), Members: []edict.ProcessID{1, 2, 5},
		Learners: []edict.ProcessID{7}, Size: 1 << 20, Addrs: map[edict.ProcessID]string{1: "10.0.0.1:7000", 5: "n5.example:7000", 7: "[fd00::7]:7000"}}
	b, err := appendSnapshotHeader(nil, s)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeSnapshotHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, s) {
		t.Fatalf("got %#v, want %#v", got, s)
	}
	for range 10 {
		again, err := appendSnapshotHeader(nil, s)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("a header encodes differently from one time to the next (%v)", err)
		}
	}

	for _, c := range []struct {
		name  string
		addrs map[edict.ProcessID]string
		want  string
	}{
		{"a stranger's", map[edict.ProcessID]string{9: "x:1"}, "address of p9, which is neither a member nor a learner"},
		{"an empty one", map[edict.ProcessID]string{7: ""}, "address of p7: empty"},
		{"an overlong one", map[edict.ProcessID]string{2: strings.Repeat("a", wire.MaxAddrLen+1)}, fmt.Sprintf("address of p2: %d bytes, limit %d", wire.MaxAddrLen+1, wire.MaxAddrLen)},
	} {
		bad := s
		bad.Addrs = c.addrs
		if _, err := appendSnapshotHeader(nil, bad); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: encode = %v, want an error containing %q", c.name, err, c.want)
		}
		// And a decoder refuses it from a sender that did not check.
		w, err := snapshotHeaderToWire(s)
		if err != nil {
			t.Fatal(err)
		}
		w.Addrs = addrsToWire(c.addrs)
		body, err := appendBody(nil, "snapshot header", w)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := decodeSnapshotHeader(body); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: decode = %v, want an error containing %q", c.name, err, c.want)
		}
	}

	w, err := snapshotHeaderToWire(s)
	if err != nil {
		t.Fatal(err)
	}
	w.Addrs = append(w.Addrs, wAddr{P: 1, A: "elsewhere:1"})
	body, err := appendBody(nil, "snapshot header", w)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decodeSnapshotHeader(body); err == nil || !strings.Contains(err.Error(), "address of p1 listed twice") {
		t.Errorf("a process listed twice: %v", err)
	}
	w.Addrs = make([]wAddr, 5)
	for i := range w.Addrs {
		w.Addrs[i] = wAddr{P: uint64(i + 1), A: "x:1"}
	}
	if body, err = appendBody(nil, "snapshot header", w); err != nil {
		t.Fatal(err)
	}
	if _, err := decodeSnapshotHeader(body); err == nil || !strings.Contains(err.Error(), "5 addresses for 4 members and learners") {
		t.Errorf("more addresses than processes: %v", err)
	}
}

// wSnapshotHeaderNoAddrs is the header without its last field, the
// addresses.
type wSnapshotHeaderNoAddrs struct {
	_struct   bool `codec:",toarray"`
	Epoch     uint64
	QTs       [][]wReading
	Reign     wStamp
	LastIndex uint64
	LastStamp wStamp
	Members   []uint64
	Learners  []uint64
	Size      int64
}

// The addresses are the header's last field, so that the body of a header
// without them still decodes, with none.
func TestSnapshotHeaderWithoutAddrs(t *testing.T) {
	t.Parallel()
	s := wire.SnapshotHeader{Epoch: 2, Reign: wiretest.Stamp(2, 10, 0), LastIndex: 77, LastStamp: wiretest.Stamp(2, 20, 5), Members: []edict.ProcessID{1, 2, 5},
		Learners: []edict.ProcessID{7}, Size: 1 << 20}
	w, err := snapshotHeaderToWire(s)
	if err != nil {
		t.Fatal(err)
	}
	old := wSnapshotHeaderNoAddrs{Epoch: w.Epoch, QTs: w.QTs, Reign: w.Reign, LastIndex: w.LastIndex, LastStamp: w.LastStamp, Members: w.Members, Learners: w.Learners, Size: w.Size}
	body, err := appendBody(nil, "snapshot header", old)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeSnapshotHeader(body)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, s) {
		t.Fatalf("got %#v, want %#v", got, s)
	}
}
