package transport

import (
	"reflect"
	"strings"
	"testing"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect"
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

// TestLeaseWireCoversEveryField fails when elect.Message gains a field the
// wire form does not carry: set every field to a distinct non-zero value by
// reflection and require it back.
func TestLeaseWireCoversEveryField(t *testing.T) {
	t.Parallel()
	var m elect.Message
	v := reflect.ValueOf(&m).Elem()
	for i := range v.NumField() {
		setNonZero(t, v.Field(i), uint64(i+1))
	}
	m.Type = elect.MsgDetector // keep it valid: the only type that carries a payload
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
			t.Fatalf("elect.Message has a slice of %v the test does not know", f.Type().Elem())
		}
	case reflect.Struct:
		for i := range f.NumField() {
			setNonZero(t, f.Field(i), n*10+uint64(i))
		}
	default:
		t.Fatalf("elect.Message has a field of kind %v the test does not know: extend the wire form and this test", f.Kind())
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
