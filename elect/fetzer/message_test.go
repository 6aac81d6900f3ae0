package fetzer

import (
	"errors"
	"testing"

	"github.com/edictlog/edictlog/edict"
)

func sample() []Message {
	t := func(i uint64, n int64) edict.Time { return edict.Time{Incarnation: i, Nanos: n} }
	return []Message{
		{Kind: Election, Request: t(1, 100), Alive: []edict.ProcessID{1, 2, 5}, Support: []edict.ProcessID{1, 2}, SentAt: t(1, 100), Echo: t(2, 90), Held: 7},
		{Kind: Reply, Request: t(1, 100), Supportive: true, SentAt: t(3, 5), Echo: t(1, 100)},
		{Kind: Release, Request: t(4, -3), SentAt: t(4, 9)},
	}
}

func TestMessageRoundTrip(t *testing.T) {
	for _, m := range sample() {
		b, err := m.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if b[0] != WireVersion {
			t.Fatalf("version byte %d", b[0])
		}
		got, err := Decode(b)
		if err != nil || !got.equal(m) {
			t.Fatalf("%+v → %+v, %v", m, got, err)
		}
	}
}

func TestDecodeRefuses(t *testing.T) {
	good, _ := sample()[0].Encode()
	bad := map[string][]byte{
		"empty":     nil,
		"version":   append([]byte{2}, good[1:]...),
		"trailing":  append(append([]byte{}, good...), 0),
		"truncated": good[:len(good)-1],
	}
	for name, m := range map[string]Message{
		"kind":        {Kind: 9},
		"unsorted":    {Kind: Election, Alive: []edict.ProcessID{2, 1}},
		"zero id":     {Kind: Election, Support: []edict.ProcessID{0}},
		"reply sets":  {Kind: Reply, Alive: []edict.ProcessID{1}},
		"supp. elect": {Kind: Election, Supportive: true},
		"held":        {Kind: Release, Held: -1},
	} {
		if _, err := m.Encode(); err == nil {
			t.Errorf("%s: encoded %+v", name, m)
		}
		// Forge it past the encoder's check.
		w := wireMessage{Kind: uint8(m.Kind), Alive: ids(m.Alive), Support: ids(m.Support), Supportive: m.Supportive, Held: m.Held}
		body := []byte{}
		if err := codecEncode(&body, &w); err != nil {
			t.Fatal(err)
		}
		bad[name] = append([]byte{WireVersion}, body...)
	}
	for name, b := range bad {
		if _, err := Decode(b); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Decode = %v, want ErrInvalid", name, err)
		}
	}
}

func FuzzDecode(f *testing.F) {
	for _, m := range sample() {
		b, _ := m.Encode()
		f.Add(b)
	}
	f.Add([]byte{WireVersion})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Decode(b)
		if err != nil {
			return
		}
		b2, err := m.Encode()
		if err != nil {
			t.Fatalf("decoded %+v but cannot encode it: %v", m, err)
		}
		if m2, err := Decode(b2); err != nil || !m2.equal(m) {
			t.Fatalf("round trip %+v → %+v, %v", m, m2, err)
		}
	})
}
