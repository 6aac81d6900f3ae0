package wire

import (
	"reflect"
	"testing"

	"github.com/edictlog/edictlog/edict"
)

// Any bytes decode to a record or to an error, never a panic or a record
// that fails its own check; what decodes encodes again to bytes that
// decode to the same record; and go-msgpack, which wrote these records
// before, reads whatever decodes to the same record (agreeWithCodec).

func FuzzDecodeEpochRecord(f *testing.F) {
	for _, r := range []EpochRecord{{Epoch: 3, Wedged: true}, {Epoch: 4, Terminated: true, Runs: true}} {
		b, err := EncodeEpochRecord(r)
		if err != nil {
			f.Fatal(err)
		}
		got, err := DecodeEpochRecord("seed", b)
		if err != nil || got != r {
			f.Fatalf("round trip of %+v: %+v, %v", r, got, err)
		}
		f.Add(b)
	}
	f.Add([]byte{RecordVersion, 0xc0})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeEpochRecord("fuzz", b)
		if err != nil {
			return
		}
		agreeWithCodec(t, b, RecordVersion, r)
		again, err := EncodeEpochRecord(r)
		if err != nil {
			t.Fatalf("decoded %+v but cannot encode it: %v", r, err)
		}
		if r2, err := DecodeEpochRecord("again", again); err != nil || r2 != r {
			t.Fatalf("round trip of %+v: %+v, %v", r, r2, err)
		}
	})
}

func FuzzDecodeEpochConfig(f *testing.F) {
	stop := edict.Stamp{Epoch: 1, QT: edict.QT{{Process: 1, T: edict.Time{Incarnation: 1, Nanos: 5}}}, Counter: 7}
	for _, c := range []EpochConfig{
		{Epoch: 1, Members: []edict.ProcessID{1, 2, 3}, Learners: []edict.ProcessID{4}},
		{Epoch: 2, Members: []edict.ProcessID{1, 2, 4}, Heard: true, StopIndex: 9, StopStamp: stop},
		{Epoch: 3, Members: []edict.ProcessID{1, 2, 4}, Retiring: 2},
	} {
		b, err := EncodeEpochConfig(c)
		if err != nil {
			f.Fatal(err)
		}
		got, err := DecodeEpochConfig("seed", b)
		if err != nil || got.StopIndex != c.StopIndex || !got.StopStamp.Equal(c.StopStamp) || got.Heard != c.Heard || got.Retiring != c.Retiring {
			f.Fatalf("round trip of %+v: %+v, %v", c, got, err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeEpochConfig("fuzz", b)
		if err != nil {
			return
		}
		if err := c.Check(); err != nil {
			t.Fatalf("decoded a configuration its own check refuses: %v", err)
		}
		agreeWithCodec(t, b, RecordVersion, c)
		again, err := EncodeEpochConfig(c)
		if err != nil {
			t.Fatalf("decoded %+v but cannot encode it: %v", c, err)
		}
		if c2, err := DecodeEpochConfig("again", again); err != nil || !reflect.DeepEqual(c, c2) {
			t.Fatalf("round trip of %+v: %+v, %v", c, c2, err)
		}
	})
}

func FuzzDecodeMembership(f *testing.F) {
	for _, m := range edgeMemberships()[:12] {
		b, err := EncodeMembership(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeMembership(b)
		if err != nil {
			return
		}
		if err := m.Config.Check(); err != nil {
			t.Fatalf("decoded a configuration its own check refuses: %v", err)
		}
		agreeWithCodec(t, b, MembershipVersion, m)
		again, err := EncodeMembership(m)
		if err != nil {
			t.Fatalf("decoded %+v but cannot encode it: %v", m, err)
		}
		if m2, err := DecodeMembership(again); err != nil || !reflect.DeepEqual(m, m2) {
			t.Fatalf("round trip of %+v: %+v, %v", m, m2, err)
		}
	})
}
