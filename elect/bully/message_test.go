package bully

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMessageRoundTrip(t *testing.T) {
	for ty := MsgAreYouThere; ty <= MsgAccept; ty++ {
		m := Message{Type: ty, G: Group{Creator: 7, Incarnation: 3, Seq: 1 << 40}, OK: ty%2 == 0}
		b := m.Encode()
		assert.Equal(t, Version, b[0])
		got, err := Decode(b)
		require.NoError(t, err, ty.String())
		assert.Equal(t, m, got)
	}
}

func TestDecodeRefuses(t *testing.T) {
	good := Message{Type: MsgHalt, G: Group{Creator: 1, Incarnation: 1, Seq: 1}}.Encode()
	for name, b := range map[string][]byte{
		"empty":    nil,
		"version":  append([]byte{2}, good[1:]...),
		"trailing": append(append([]byte{}, good...), 0),
		"type":     Message{Type: MsgAccept + 1}.Encode(),
		"zerotype": Message{}.Encode(),
		"garbage":  {Version, 0xc1},
	} {
		_, err := Decode(b)
		assert.Error(t, err, name)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(Message{Type: MsgInvitation, G: Group{Creator: 3, Incarnation: 2, Seq: 9}, OK: true}.Encode())
	f.Add([]byte{Version})
	f.Add([]byte{Version, 0x95, 1, 2, 3, 4, 0xc3})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Decode(b)
		if err != nil {
			return
		}
		// Whatever decodes re-encodes to a payload that decodes the same.
		again, err := Decode(m.Encode())
		if err != nil || again != m {
			t.Fatalf("round trip of %v: %v %v", m, again, err)
		}
	})
}
