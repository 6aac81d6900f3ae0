package edict

import (
	"testing"
)

// Every decoder must refuse bad input with an error, never panic, and
// anything it accepts must re-encode to an input it accepts again with the
// same value; and go-msgpack, which wrote these encodings before, must read
// anything it accepts to the same value (agreeWithCodec).

func seedStamps(f *testing.F) {
	for _, s := range []Stamp{
		{},
		{Epoch: 1, QT: QT{{1, Time{1, 2}}, {3, Time{2, -4}}}, Counter: 9},
	} {
		b, err := EncodeStamp(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	if b, err := EncodeQT(QT{{2, Time{1, 1}}}); err == nil {
		f.Add(b)
	}
	f.Add([]byte{WireVersion, 0x93, 0x01, 0x02, 0x03})
	f.Add([]byte{WireVersion, 0xdd, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{})
}

func FuzzDecodeStamp(f *testing.F) {
	seedStamps(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := DecodeStamp(b)
		if err != nil {
			return
		}
		agreeWithCodec(t, b, s)
		again, err := EncodeStamp(s)
		if err != nil {
			t.Fatalf("decoded %v but cannot encode it: %v", s, err)
		}
		s2, err := DecodeStamp(again)
		if err != nil || !s2.Equal(s) {
			t.Fatalf("round trip of %v: %v, %v", s, s2, err)
		}
		_ = s.Validate(EpochTable{s.Epoch: MustMajority(1, 2, 3)})
		_, _ = s.Compare(s2)
	})
}

func FuzzDecodeQT(f *testing.F) {
	seedStamps(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		q, err := DecodeQT(b)
		if err != nil {
			return
		}
		if err := q.WellFormed(); err != nil {
			t.Fatalf("decoder accepted a malformed QT %v: %v", q, err)
		}
		agreeWithCodec(t, b, q)
		again, err := EncodeQT(q)
		if err != nil {
			t.Fatal(err)
		}
		q2, err := DecodeQT(again)
		if err != nil || !q2.Equal(q) {
			t.Fatalf("round trip of %v: %v, %v", q, q2, err)
		}
		_, _ = q.Compare(q2)
	})
}

func FuzzDecodeTime(f *testing.F) {
	b, _ := EncodeTime(Time{3, 4})
	f.Add(b)
	f.Add([]byte{WireVersion, 0x82})
	f.Add([]byte{WireVersion, 0x82, 0xa1, 'n', 0xd3, 0x80, 0, 0, 0, 0, 0, 0, 0, 0xc4, 0x01, 'i', 0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{WireVersion, 0xc0})
	f.Fuzz(func(t *testing.T, b []byte) {
		tt, err := DecodeTime(b)
		if err != nil {
			return
		}
		agreeWithCodec(t, b, tt)
		again, _ := EncodeTime(tt)
		t2, err := DecodeTime(again)
		if err != nil || t2 != tt {
			t.Fatalf("round trip of %v: %v, %v", tt, t2, err)
		}
	})
}
