package wire_test

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
		b, err := wire.AppendMessage(nil, m)
		if err != nil {
			t.Fatalf("%v: encode: %v", m, err)
		}
		got, err := wire.DecodeMessage(b)
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
	b, err := wire.AppendMessage(nil, wire.LeaseMessage(m))
	if err != nil {
		t.Fatal(err)
	}
	got, err := wire.DecodeMessage(b)
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
	qts, err := wire.QTTableSize(m)
	if err != nil {
		t.Fatal(err)
	}
	// The reign and prev stamp share one QT, the 64 entry stamps another.
	if qts != 2 {
		t.Fatalf("QT table has %d entries, want 2", qts)
	}
	f, _ := wire.AppendMessage(nil, m)
	payload := 64 * 256
	if over := len(f) - payload; over > 64*12+200 {
		t.Fatalf("append of %d payload bytes takes %d bytes on the wire (%d overhead)", payload, len(f), over)
	}
}

func TestValidateRefuses(t *testing.T) {
	t.Parallel()
	reign := wiretest.Stamp(1, 1000, 0)
	badQT := edict.Stamp{Epoch: 1, QT: edict.QT{{Process: 2}, {Process: 1}}, Counter: 1}
	gap := wiretest.Append(5, 3, 1)
	gap.Entries[1].Index = 9
	badKind := wiretest.Append(5, 2, 1)
	badKind.Entries[1].Kind = 0
	lease := wiretest.Lease(1, 2)
	lease.Delta = 0
	cases := []struct {
		m    wire.Message
		want string
	}{
		{wire.Message{From: 1, To: 2}, "exactly one payload"},
		{wire.Message{From: 1, To: 2, ReadIndex: &wire.ReadIndexRequest{ID: 1}, TimeoutNow: &wire.TimeoutNow{Reign: reign}}, "exactly one payload"},
		{wire.Message{To: 2, ReadIndex: &wire.ReadIndexRequest{ID: 1}}, "without a sender"},
		{wire.Message{From: 1, ReadIndex: &wire.ReadIndexRequest{ID: 1}}, "without a receiver"},
		{wire.Message{From: 1, To: 2, ReadIndex: &wire.ReadIndexRequest{}}, "without an id"},
		{wire.Message{From: 1, To: 2, Append: &wire.Append{}}, "without a reign"},
		{wire.Message{From: 1, To: 2, Append: gap}, "contiguously"},
		{wire.Message{From: 1, To: 2, Append: badKind}, "unknown kind"},
		{wire.Message{From: 1, To: 2, Append: &wire.Append{Reign: badQT}}, "not sorted"},
		{wire.Message{From: 1, To: 2, AppendReply: &wire.AppendReply{Reign: reign, Success: true, HintIndex: 3}}, "rejection hint"},
		{wire.Message{From: 1, To: 2, AppendReply: &wire.AppendReply{Reign: reign, LastIndex: 3, HintIndex: 3}}, "not below"},
		{wire.Message{From: 1, To: 2, AppendReply: &wire.AppendReply{Success: true, LastIndex: 3}}, "without the reign it answers"},
		{wire.Message{From: 1, To: 2, AppendReply: &wire.AppendReply{Reign: reign, Accepted: badQT}}, "not sorted"},
		{wire.Message{From: 1, To: 2, TimeoutNow: &wire.TimeoutNow{}}, "without a reign"},
		{wire.Message{From: 1, To: 2, Lease: &lease}, "δ = 0"},
		{wire.Message{From: 3, To: 2, Lease: &elect.Message{Type: elect.MsgRelease, From: 1, To: 2}}, "envelope"},
		{wire.Message{From: 1, To: 2, Fetch: &wire.Fetch{}}, "without an id"},
		{wire.Message{From: 1, To: 2, FetchReply: &wire.FetchReply{ID: 1, Entries: wiretest.Append(0, 1, 1).Entries}}, "without OK"},
		{wire.Message{From: 1, To: 2, FetchReply: &wire.FetchReply{ID: 1, OK: true, Entries: gap.Entries}}, "contiguous"},
		{wire.Message{From: 1, To: 2, Fetch: &wire.Fetch{ID: 1, UpToIndex: 4, UpToStamp: reign}}, "not a committed fetch"},
		{wire.Message{From: 1, To: 2, Fetch: &wire.Fetch{ID: 1, Committed: true, UpToIndex: 4}}, "both or neither"},
		{wire.Message{From: 1, To: 2, FetchReply: &wire.FetchReply{ID: 1, Commit: 4}}, "answers no committed fetch"},
		{wire.Message{From: 1, To: 2, FetchReply: &wire.FetchReply{ID: 1, OK: true, Committed: true, Commit: 1, Entries: wiretest.Append(0, 2, 1).Entries}}, "beyond its commit index"},
	}
	for _, c := range cases {
		err := c.m.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: Validate = %v, want an error containing %q", c.m, err, c.want)
		}
		if _, err := wire.AppendMessage(nil, c.m); err == nil {
			t.Errorf("%v: encoded an invalid message", c.m)
		}
	}
}

func TestSnapshotHeaderRoundTrip(t *testing.T) {
	t.Parallel()
	s := wire.SnapshotHeader{Epoch: 2, Reign: wiretest.Stamp(2, 10, 0), LastIndex: 77, LastStamp: wiretest.Stamp(2, 20, 5), Members: []edict.ProcessID{1, 2, 5},
		Learners: []edict.ProcessID{7}, Size: 1 << 20}
	b, err := wire.AppendSnapshotHeader(nil, s)
	if err != nil {
		t.Fatal(err)
	}
	got, err := wire.DecodeSnapshotHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, s) {
		t.Fatalf("got %#v, want %#v", got, s)
	}
	bad := s
	bad.Learners = []edict.ProcessID{7, 7}
	if _, err := wire.AppendSnapshotHeader(nil, bad); err == nil || !strings.Contains(err.Error(), "learner list not strictly increasing") {
		t.Fatalf("a repeated learner: %v", err)
	}
}
