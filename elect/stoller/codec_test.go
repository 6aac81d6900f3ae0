package stoller

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edictlog/edictlog/edict"
)

type edictID = edict.ProcessID

func tm(inc uint64, d time.Duration) edict.Time { return edict.Time{Incarnation: inc, Nanos: int64(d)} }

func sampleMessages() []Message {
	return []Message{
		{Kind: Halt, Inc: 2, Elid: Elid{Node: 1, Incarn: 2, Seq: 3}},
		{Kind: NotNorm, Elid: Elid{Node: 4}},
		{Kind: Token, Inc: 1, Epoch: 7, Origin: 3, Seq: 9,
			Stamps: []Stamp{{Node: 1, Visits: 4}, {Node: 2, Visits: 5, Hidden: []edictID{3, 4}}}},
	}
}

func TestCodecRoundTrip(t *testing.T) {
	for _, m := range sampleMessages() {
		b := Encode(m)
		require.Equal(t, WireVersion, b[0])
		got, err := Decode(b)
		require.NoError(t, err)
		assert.Equal(t, m, got)
	}
}

func TestCodecRefuses(t *testing.T) {
	good := Encode(Message{Kind: Ack})
	bad := map[string][]byte{
		"empty":    nil,
		"version":  append([]byte{2}, good[1:]...),
		"trailing": append(append([]byte{}, good...), 0xc0),
		"kind 0":   Encode(Message{}),
		"kind max": Encode(Message{Kind: maxKind}),
		"garbage":  {WireVersion, 0xff, 0x00},
		"no body":  {WireVersion},
	}
	for name, b := range bad {
		_, err := Decode(b)
		assert.True(t, errors.Is(err, ErrInvalid), "%s: %v", name, err)
	}
	// A Protocol drops what does not decode, and counts it.
	p := NewAsync(Config{ID: 1, Members: []edictID{1, 2}, Incarnation: 1})
	p.Receive(tm(1, 0), 2, []byte{9})
	assert.Equal(t, 1, p.Dropped())
}

func FuzzDecode(f *testing.F) {
	for _, m := range sampleMessages() {
		f.Add(Encode(m))
	}
	f.Add([]byte{WireVersion, 0x80})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Decode(b)
		if err != nil {
			return
		}
		again, err := Decode(Encode(m))
		require.NoError(t, err)
		assert.Equal(t, m, again)
	})
}
