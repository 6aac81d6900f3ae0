package edict

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func tm(inc uint64, ns int64) Time { return Time{Incarnation: inc, Nanos: ns} }

func qt(t *testing.T, rs ...Reading) QT {
	t.Helper()
	q, err := NewQT(rs...)
	require.NoError(t, err)
	return q
}

func TestTimeOrderIsLexicographic(t *testing.T) {
	assert.True(t, tm(1, 500).Before(tm(2, 1)), "a later incarnation is later whatever its nanoseconds")
	assert.True(t, tm(2, 1).Before(tm(2, 2)))
	assert.Equal(t, 0, tm(3, 3).Compare(tm(3, 3)))
	_, ok := tm(2, 5).Sub(tm(1, 1))
	assert.False(t, ok, "durations across incarnations are meaningless")
	d, ok := tm(2, 5).Sub(tm(2, 1))
	assert.True(t, ok)
	assert.Equal(t, 4*time.Nanosecond, d)
	assert.Equal(t, int64(1<<63-1), tm(1, 1<<63-10).Add(time.Hour).Nanos, "Add saturates")
}

// TestQTCompareEq21 follows Lemma 7.1's setting: two quorums of five share
// a process, whose readings decide the order.
func TestQTCompareEq21(t *testing.T) {
	a := qt(t, Reading{1, tm(1, 10)}, Reading{2, tm(1, 10)}, Reading{3, tm(1, 10)})
	b := qt(t, Reading{3, tm(1, 20)}, Reading{4, tm(1, 5)}, Reading{5, tm(1, 5)})
	c, err := a.Compare(b)
	require.NoError(t, err)
	assert.Equal(t, -1, c, "p3 saw a before b")
	c, err = b.Compare(a)
	require.NoError(t, err)
	assert.Equal(t, 1, c)
	c, err = a.Compare(a)
	require.NoError(t, err)
	assert.Equal(t, 0, c)
}

func TestQTCompareRefusesInconsistentPairs(t *testing.T) {
	a := qt(t, Reading{1, tm(1, 10)}, Reading{2, tm(1, 30)})
	b := qt(t, Reading{1, tm(1, 20)}, Reading{2, tm(1, 20)})
	_, err := a.Compare(b)
	assert.ErrorIs(t, err, ErrInconsistent, "p1 says a<b, p2 says a>b")
	disjoint := qt(t, Reading{3, tm(1, 1)})
	_, err = a.Compare(disjoint)
	assert.ErrorIs(t, err, ErrInconsistent, "no shared process: not quorums of one system")
}

func TestQTValidate(t *testing.T) {
	qs := MustMajority(1, 2, 3, 4, 5)
	require.NoError(t, qt(t, Reading{1, tm(1, 1)}, Reading{2, tm(1, 1)}, Reading{5, tm(1, 1)}).Validate(qs))
	err := qt(t, Reading{1, tm(1, 1)}, Reading{2, tm(1, 1)}).Validate(qs)
	assert.ErrorContains(t, err, "does not cover a quorum")
	err = qt(t, Reading{1, tm(1, 1)}, Reading{2, tm(1, 1)}, Reading{9, tm(1, 1)}).Validate(qs)
	assert.ErrorContains(t, err, "p9, not a member")
	assert.ErrorContains(t, QT{{2, tm(1, 1)}, {1, tm(1, 1)}}.Validate(qs), "not sorted")
	assert.ErrorContains(t, QT{}.Validate(qs), "empty")
	_, err = NewQT(Reading{1, tm(1, 1)}, Reading{1, tm(1, 2)})
	assert.ErrorContains(t, err, "p1 twice")
	_, err = NewQT(Reading{0, tm(1, 1)})
	assert.ErrorContains(t, err, "process 0")
}

func TestMajority(t *testing.T) {
	_, err := NewMajority()
	assert.Error(t, err)
	_, err = NewMajority(1, 1)
	assert.ErrorContains(t, err, "twice")
	_, err = NewMajority(0, 1)
	assert.ErrorContains(t, err, "reserved")
	m := MustMajority(3, 1, 2, 4)
	assert.Equal(t, []ProcessID{1, 2, 3, 4}, m.Members())
	assert.False(t, m.IsQuorum([]ProcessID{1, 2}), "half of four is not a majority")
	assert.True(t, m.IsQuorum([]ProcessID{1, 2, 4}))
	assert.Equal(t, 3, m.Size())
}

func TestStampOrderAndValidation(t *testing.T) {
	epochs := EpochTable{0: MustMajority(1, 2, 3), 1: MustMajority(2, 3, 4)}
	q1 := qt(t, Reading{1, tm(1, 1)}, Reading{2, tm(1, 1)})
	q2 := qt(t, Reading{2, tm(1, 2)}, Reading{3, tm(1, 2)})
	s := []Stamp{
		{},
		{Epoch: 0, QT: q1, Counter: 0},
		{Epoch: 0, QT: q1, Counter: 7},
		{Epoch: 0, QT: q2, Counter: 0},
		{Epoch: 1, QT: qt(t, Reading{3, tm(1, 1)}, Reading{4, tm(1, 1)}), Counter: 0},
	}
	for i := range s {
		require.NoError(t, s[i].Validate(epochs))
		for j := range s {
			c, err := s[i].Compare(s[j])
			require.NoError(t, err)
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			assert.Equal(t, want, c, "stamps %d and %d", i, j)
		}
	}
	assert.ErrorContains(t, Stamp{Epoch: 7, QT: q1}.Validate(epochs), "unknown epoch 7")
	assert.ErrorContains(t, Stamp{Epoch: 1, QT: q1}.Validate(epochs), "p1, not a member")
}

func TestFenceRefusesStaleEdicts(t *testing.T) {
	f := NewFence(EpochTable{0: MustMajority(1, 2, 3)})
	old := Stamp{QT: qt(t, Reading{1, tm(1, 1)}, Reading{2, tm(1, 1)}), Counter: 3}
	newer := Stamp{QT: qt(t, Reading{2, tm(1, 5)}, Reading{3, tm(1, 5)})}
	require.NoError(t, f.Admit(old))
	require.NoError(t, f.Admit(newer))
	err := f.Admit(old)
	assert.ErrorIs(t, err, ErrStale, "a deposed leader's edict arrives late")
	assert.ErrorIs(t, f.Admit(newer), ErrStale, "the same edict twice is not acted on twice")
	assert.ErrorContains(t, f.Admit(Stamp{Epoch: 3, QT: newer.QT}), "unknown epoch")
	assert.True(t, f.Highest().Equal(newer))
}

func TestEncodingRoundTrip(t *testing.T) {
	s := Stamp{Epoch: 4, QT: qt(t, Reading{1, tm(3, 99)}, Reading{7, tm(1, -5)}), Counter: 12}
	b, err := EncodeStamp(s)
	require.NoError(t, err)
	assert.Equal(t, WireVersion, b[0])
	got, err := DecodeStamp(b)
	require.NoError(t, err)
	assert.True(t, got.Equal(s), "%v != %v", got, s)

	b, err = EncodeStamp(Stamp{})
	require.NoError(t, err)
	zero, err := DecodeStamp(b)
	require.NoError(t, err)
	assert.True(t, zero.IsZero())

	b, err = EncodeQT(s.QT)
	require.NoError(t, err)
	q, err := DecodeQT(b)
	require.NoError(t, err)
	assert.True(t, q.Equal(s.QT))

	b, err = EncodeTime(tm(5, 6))
	require.NoError(t, err)
	tt, err := DecodeTime(b)
	require.NoError(t, err)
	assert.Equal(t, tm(5, 6), tt)
}

func TestDecodeRefusesBadInput(t *testing.T) {
	good, err := EncodeStamp(Stamp{Epoch: 1, QT: qt(t, Reading{1, tm(1, 1)})})
	require.NoError(t, err)
	cases := map[string]struct {
		in   []byte
		want string
	}{
		"empty":         {nil, "empty input"},
		"version":       {append([]byte{9}, good[1:]...), "unknown version byte 9"},
		"truncated":     {good[:len(good)-2], "decode stamp"},
		"trailing":      {append(append([]byte{}, good...), 0xc0), "trailing bytes"},
		"oversized":     {make([]byte, MaxEncodedSize+1), "exceeds the limit"},
		"unknown field": {mustEncode(t, map[string]int{"zz": 1}), "decode stamp"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := DecodeStamp(c.in)
			assert.ErrorContains(t, err, c.want)
		})
	}
	// Well-formed msgpack, malformed QT: duplicates and ⊥ are refused.
	_, err = DecodeQT(mustEncode(t, []Reading{{2, tm(1, 1)}, {2, tm(1, 2)}}))
	assert.ErrorContains(t, err, "p2 twice")
	_, err = DecodeQT(mustEncode(t, []Reading{{0, tm(1, 1)}}))
	assert.ErrorContains(t, err, "process 0")
	_, err = DecodeStamp(mustEncode(t, Stamp{Epoch: 3, Counter: 1}))
	assert.ErrorContains(t, err, "without a quorum timestamp")
	big := make([]Reading, MaxQTSize+1)
	for i := range big {
		big[i] = Reading{ProcessID(i + 1), tm(1, 1)}
	}
	_, err = DecodeQT(mustEncode(t, big))
	assert.ErrorContains(t, err, "exceeds the limit")
}

// mustEncode encodes v as go-msgpack does, version byte first.
func mustEncode(t *testing.T, v any) []byte { return codecEncode(t, v) }

func TestManualClockSuspend(t *testing.T) {
	c := NewManualClock(tm(1, 0))
	before := c.Now()
	assert.False(t, c.Suspended(before))
	c.Suspend()
	assert.True(t, c.Suspended(before), "a lease taken before the suspend is not trusted")
	after := c.Now()
	assert.False(t, c.Suspended(after))
	assert.True(t, before.Before(after))
}

func TestSystemClock(t *testing.T) {
	_, err := NewSystemClock(0, 1e-3)
	assert.ErrorContains(t, err, "incarnation")
	_, err = NewSystemClock(1, 2)
	assert.ErrorContains(t, err, "rho")
	c, err := NewSystemClock(4, 1e-3)
	require.NoError(t, err)
	prev := c.Now()
	for range 10000 {
		now := c.Now()
		require.True(t, prev.Before(now), "readings strictly increase: %v then %v", prev, now)
		prev = now
	}
	assert.Equal(t, uint64(4), prev.Incarnation)
	start := c.Now()
	time.Sleep(20 * time.Millisecond)
	d, ok := c.Now().Sub(start)
	require.True(t, ok)
	assert.GreaterOrEqual(t, d, 19*time.Millisecond)
	assert.False(t, c.Suspended(start), "no suspend happened")
}

func TestErrorsAreWrapped(t *testing.T) {
	_, err := Stamp{Epoch: 0, QT: QT{{1, tm(1, 1)}}}.Compare(Stamp{Epoch: 0, QT: QT{{2, tm(1, 1)}}})
	assert.True(t, errors.Is(err, ErrInconsistent))
}
