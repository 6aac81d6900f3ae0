package elect

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
)

// echo is a Protocol that sends "ping" to every peer every period and
// names the lowest id it has heard a ping from (or itself).
type echo struct {
	self, lowest edict.ProcessID
	peers        []edict.ProcessID
	next         edict.Time
	out          []Outgoing
	got          [][]byte
}

func (e *echo) Observe(Observation)                   {}
func (e *echo) WeakLeader(edict.Time) edict.ProcessID { return e.lowest }
func (e *echo) Tick(now edict.Time) {
	for _, p := range e.peers {
		e.out = append(e.out, Outgoing{To: p, Payload: []byte("ping")})
	}
	e.next = now.Add(100 * time.Millisecond)
}
func (e *echo) Receive(now edict.Time, from edict.ProcessID, payload []byte) {
	e.got = append(e.got, payload)
	if from < e.lowest {
		e.lowest = from
	}
}
func (e *echo) Outbox() []Outgoing {
	out := e.out
	e.out = nil
	return out
}
func (e *echo) NextTick() edict.Time { return e.next }

// A Protocol detector's messages travel as wire.LeaseDetector lease messages:
// the core ticks it when due, sends its outbox, and delivers what arrives.
func TestProtocolDetectorMessages(t *testing.T) {
	members := []edict.ProcessID{1, 2}
	now := edict.Time{Incarnation: 1, Nanos: int64(time.Hour)}
	dets := map[edict.ProcessID]*echo{}
	cores := map[edict.ProcessID]*Core{}
	for _, id := range members {
		dets[id] = &echo{self: id, lowest: id, peers: []edict.ProcessID{3 - id}, next: now}
		c, err := New(testConfig(id, members, dets[id]), nil, now)
		require.NoError(t, err)
		cores[id] = c
	}
	assert.Equal(t, now, cores[2].NextTick(), "the protocol's timer is due")
	now = now.Add(time.Microsecond)
	cores[2].Tick(now)
	var sent []wire.Lease
	for _, m := range cores[2].Ready().Messages {
		if m.Type == wire.LeaseDetector {
			sent = append(sent, m)
		}
	}
	require.Len(t, sent, 1)
	assert.Equal(t, []byte("ping"), sent[0].Payload)
	assert.Equal(t, edict.ProcessID(1), sent[0].To)
	require.NoError(t, sent[0].Validate())

	require.NoError(t, cores[1].Step(now.Add(time.Microsecond), sent[0]))
	assert.Equal(t, [][]byte{[]byte("ping")}, dets[1].got)
	assert.Equal(t, edict.ProcessID(1), dets[1].lowest)

	// A payload on another message type, or an oversized one, is refused.
	bad := sent[0]
	bad.Type = wire.LeaseRelease
	assert.ErrorContains(t, bad.Validate(), "detector payload")
	big := sent[0]
	big.Payload = make([]byte, wire.MaxDetectorPayload+1)
	assert.ErrorContains(t, big.Validate(), "exceeds")
}
