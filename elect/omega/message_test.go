package omega

import (
	"bytes"
	"errors"
	"math"
	"testing"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMessageRoundTrip(t *testing.T) {
	for k := OK; k <= Pong; k++ {
		for _, r := range []uint64{0, 1, 1 << 40, MaxRound} {
			m := Message{Kind: k, Round: r}
			b := Encode(m)
			require.LessOrEqual(t, len(b), maxMessageSize)
			got, err := Decode(b)
			require.NoError(t, err)
			assert.Equal(t, m, got)
		}
	}
}

func TestDecodeRefuses(t *testing.T) {
	good := Encode(Message{Kind: OK, Round: 7})
	var unknownField []byte
	require.NoError(t, codec.NewEncoderBytes(&unknownField, mh).Encode(map[string]uint64{"k": 1, "r": 2, "x": 3}))
	var badKind []byte
	require.NoError(t, codec.NewEncoderBytes(&badKind, mh).Encode(Message{Kind: 99}))
	cases := map[string][]byte{
		"empty":         nil,
		"version":       append([]byte{2}, good[1:]...),
		"trailing":      append(bytes.Clone(good), 0),
		"truncated":     good[:len(good)-1],
		"oversized":     make([]byte, maxMessageSize+1),
		"unknown field": append([]byte{WireVersion}, unknownField...),
		"unknown kind":  append([]byte{WireVersion}, badKind...),
		"zero kind":     Encode(Message{Round: 1}),
		"huge round":    Encode(Message{Kind: OK, Round: math.MaxUint64}),
	}
	for name, b := range cases {
		_, err := Decode(b)
		assert.True(t, errors.Is(err, ErrInvalid), "%s: %v", name, err)
	}
}

// FuzzDecode: Decode never panics, and what it accepts survives a round
// trip through Encode unchanged.
func FuzzDecode(f *testing.F) {
	for k := OK; k <= Pong; k++ {
		f.Add(Encode(Message{Kind: k, Round: uint64(k) << 33}))
	}
	f.Add([]byte{WireVersion, 0x80})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Decode(b)
		if err != nil {
			return
		}
		again, err := Decode(Encode(m))
		if err != nil || again != m {
			t.Fatalf("%x decoded to %+v, which does not round-trip: %v", b, m, err)
		}
	})
}
