package transport

import (
	"reflect"
	"testing"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
	"github.com/edictlog/edictlog/wire/wiretest"
)

// Any bytes decode to a valid message or to an error, what decodes
// encodes back to the same message, and the hand-written codec agrees with
// go-msgpack's reflective one, its oracle (checkDecodersAgree): the same
// message from every body it accepts, the same bytes for it, nothing
// accepted that the oracle refuses.
func FuzzDecodeMessage(f *testing.F) {
	for _, m := range codecMessages(f, 60) {
		b, err := appendMessage(nil, m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkDecodersAgree(t, body)
	})
}

func FuzzDecodeSnapshotHeader(f *testing.F) {
	for _, addrs := range []map[edict.ProcessID]string{nil, {1: "10.0.0.1:7000", 5: "n5:7000", 7: "[fd00::7]:7000"}} {
		b, err := appendSnapshotHeader(nil, wire.SnapshotHeader{Epoch: 2, Reign: wiretest.Stamp(2, 10, 0), LastIndex: 77, LastStamp: wiretest.Stamp(2, 20, 5),
			Members: []edict.ProcessID{1, 2, 5}, Learners: []edict.ProcessID{7}, Size: 1 << 20, Addrs: addrs})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		s, err := decodeSnapshotHeader(body)
		if err != nil {
			return
		}
		b, err := appendSnapshotHeader(nil, s)
		if err != nil {
			t.Fatalf("decoded %+v but cannot encode it: %v", s, err)
		}
		s2, err := decodeSnapshotHeader(b)
		if err != nil || !reflect.DeepEqual(s, s2) {
			t.Fatalf("round trip: %+v → %+v, %v", s, s2, err)
		}
	})
}
