package omega

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect"
)

// d is δ in these tests.
const d = 10 * time.Millisecond

func at(n time.Duration) edict.Time { return edict.Time{Incarnation: 1, Nanos: int64(n)} }

func mustNew(t *testing.T, v Variant, id edict.ProcessID) *Omega {
	t.Helper()
	o, err := New(v, Config{ID: id, Members: []edict.ProcessID{3, 1, 2}, Delta: d})
	require.NoError(t, err)
	return o
}

// sent decodes an outbox into the messages sent to each process.
func sent(t *testing.T, out []elect.Outgoing) map[edict.ProcessID][]Message {
	t.Helper()
	got := map[edict.ProcessID][]Message{}
	for _, o := range out {
		m, err := Decode(o.Payload)
		require.NoError(t, err)
		got[o.To] = append(got[o.To], m)
	}
	return got
}

func TestConfig(t *testing.T) {
	for name, c := range map[string]Config{
		"no delta":   {ID: 1, Members: []edict.ProcessID{1}},
		"not member": {ID: 4, Members: []edict.ProcessID{1, 2}, Delta: d},
		"duplicate":  {ID: 1, Members: []edict.ProcessID{1, 1}, Delta: d},
		"none":       {ID: 1, Members: []edict.ProcessID{0, 1}, Delta: d},
		"negative":   {ID: 1, Members: []edict.ProcessID{1}, Delta: d, Eta: -1},
	} {
		_, err := NewFig1(c)
		assert.Error(t, err, name)
	}
	c, err := Config{ID: 1, Members: []edict.ProcessID{2, 1}, Delta: d}.withDefaults()
	require.NoError(t, err)
	assert.Equal(t, Config{ID: 1, Members: []edict.ProcessID{1, 2}, Incarnation: 1, Delta: d, Eta: d,
		Timeout: 2 * d, AlertWindow: 6 * d, PingWait: 2 * d}, c)
}

// Fig. 1 lines 1–4: round 0 names process "0" (the lowest id) at once and
// wakes it with START; the leader of round 0 sends OK to all.
func TestFig1Start(t *testing.T) {
	o := mustNew(t, Fig1, 2)
	assert.Equal(t, edict.Time{Incarnation: 1}, o.NextTick(), "asks to be started")
	o.Tick(at(0))
	assert.Equal(t, edict.ProcessID(1), o.WeakLeader(at(0)))
	assert.Equal(t, map[edict.ProcessID][]Message{1: {{Start, 0}}}, sent(t, o.Outbox()))
	assert.Equal(t, at(2*d+1), o.NextTick(), "timer > 2δ")
	o.Tick(at(2*d + 1))
	assert.Equal(t, edict.ProcessID(2), o.WeakLeader(at(0)), "timed out: round 1 is ours")
	assert.Equal(t, map[edict.ProcessID][]Message{1: {{OK, 1}}, 3: {{OK, 1}}}, sent(t, o.Outbox()))

	l := mustNew(t, Fig1, 1)
	l.Tick(at(0))
	assert.Equal(t, map[edict.ProcessID][]Message{2: {{OK, 0}}, 3: {{OK, 0}}}, sent(t, l.Outbox()))
	assert.Equal(t, at(d), l.NextTick(), "next OK after η")
}

// Fig. 2 lines 5, 15–16: leader ⊥ until two OKs; line 19: STOP on timeout;
// line 21: the leader abdicates on STOP.
func TestStable3(t *testing.T) {
	o := mustNew(t, Stable3, 2)
	o.Tick(at(0))
	o.Outbox()
	o.Receive(at(d/2), 1, Encode(Message{OK, 0}))
	assert.Equal(t, edict.None, o.WeakLeader(at(d/2)), "one OK is not enough")
	o.Receive(at(3*d/2), 1, Encode(Message{OK, 0}))
	assert.Equal(t, edict.ProcessID(1), o.WeakLeader(at(d)))
	o.Tick(at(7*d/2 + 1))
	assert.Equal(t, map[edict.ProcessID][]Message{1: {{Stop, 0}, {OK, 1}}, 3: {{OK, 1}}}, sent(t, o.Outbox()))
	assert.Equal(t, uint64(1), o.Round())

	l := mustNew(t, Stable3, 1)
	l.Tick(at(0))
	l.Outbox()
	l.Receive(at(d), 3, Encode(Message{Stop, 0}))
	assert.Equal(t, uint64(1), l.Round(), "abdicated")
	assert.Equal(t, map[edict.ProcessID][]Message{2: {{Start, 1}}}, sent(t, l.Outbox()))
}

// Fig. 4 lines 16, 25: an ALERT from a higher round drops the leader and
// blocks electing for 6δ; line 23: an old round is told the current one.
func TestStable6Alert(t *testing.T) {
	o := mustNew(t, Stable6, 2)
	o.Tick(at(0))
	o.Outbox()
	for i := range 2 {
		o.Receive(at(time.Duration(i)*d), 1, Encode(Message{OK, 0}))
	}
	require.Equal(t, edict.ProcessID(1), o.WeakLeader(at(d)))
	o.Receive(at(d+1), 3, Encode(Message{Alert, 1}))
	assert.Equal(t, edict.None, o.WeakLeader(at(d)))
	o.Receive(at(2*d), 1, Encode(Message{OK, 0}))
	assert.Equal(t, edict.None, o.WeakLeader(at(2*d)), "within 6δ of the ALERT")
	for t0 := 3 * d; t0 <= 7*d; t0 += d {
		o.Receive(at(t0), 1, Encode(Message{OK, 0}))
	}
	assert.Equal(t, edict.None, o.WeakLeader(at(7*d)), "7δ is 6δ after the ALERT at δ+1ns")
	o.Receive(at(8*d), 1, Encode(Message{OK, 0}))
	assert.Equal(t, edict.ProcessID(1), o.WeakLeader(at(8*d)))
	o.Outbox()
	o.Receive(at(8*d), 1, Encode(Message{Start, 5}))
	o.Outbox()
	o.Receive(at(8*d), 3, Encode(Message{OK, 2}))
	assert.Equal(t, map[edict.ProcessID][]Message{3: {{Start, 5}}}, sent(t, o.Outbox()))
}

// Fig. 5: on a timeout, ping; then skip to the first round whose leader
// answered (or our own).
func TestConstantTimeSkips(t *testing.T) {
	o, err := New(ConstantTime, Config{ID: 2, Members: []edict.ProcessID{1, 2, 3, 4, 5}, Delta: d})
	require.NoError(t, err)
	o.Tick(at(0))
	o.Outbox()
	o.Tick(at(2*d + 1))
	out := sent(t, o.Outbox())
	assert.Equal(t, []Message{{Alert, 1}, {Ping, 0}}, out[4])
	o.Receive(at(3*d), 5, Encode(Message{Pong, 0}))
	o.Receive(at(3*d), 4, Encode(Message{Pong, 7})) // another ping's
	o.Receive(at(3*d), 1, Encode(Message{Ping, 0}))
	assert.Equal(t, map[edict.ProcessID][]Message{1: {{Pong, 0}}}, sent(t, o.Outbox()))
	assert.Equal(t, at(4*d+1), o.NextTick())
	o.Tick(at(4*d + 1))
	assert.Equal(t, uint64(1), o.Round(), "round 1 is our own: process 2 answers itself")

	q, err := New(ConstantTime, Config{ID: 1, Members: []edict.ProcessID{1, 2, 3, 4, 5}, Delta: d})
	require.NoError(t, err)
	q.Tick(at(0))
	q.Receive(at(0), 2, Encode(Message{OK, 1})) // now in round 1, led by 2
	q.Tick(at(2*d + 1))
	q.Receive(at(3*d), 4, Encode(Message{Pong, 1}))
	q.Tick(at(4*d + 1))
	assert.Equal(t, uint64(3), q.Round(), "rounds 2 (process 3) skipped; 3 is process 4's")
}

func TestGarbageDropped(t *testing.T) {
	o := mustNew(t, Stable6, 2)
	o.Receive(at(0), 1, []byte{9, 9})
	o.Receive(at(0), 7, Encode(Message{OK, 0}))
	o.Receive(at(0), 2, Encode(Message{OK, 0}))
	assert.Equal(t, 3, o.Dropped)
	assert.Equal(t, edict.None, o.WeakLeader(at(0)))
}
