package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect"
)

// heartbeat is the simplest Protocol: every process sends a heartbeat to
// every other every period, and names the lowest id heard from within
// three periods (or itself). It exercises the simulator, not a paper.
type heartbeat struct {
	self    edict.ProcessID
	members []edict.ProcessID
	heard   map[edict.ProcessID]edict.Time
	next    edict.Time
	out     []elect.Outgoing
	// early counts Ticks before NextTick, which the simulator never makes.
	early *int
}

const period = 10 * time.Millisecond

func newHeartbeat(early *int) func(edict.ProcessID, []edict.ProcessID, uint64) elect.Protocol {
	return func(id edict.ProcessID, members []edict.ProcessID, inc uint64) elect.Protocol {
		return &heartbeat{self: id, members: members, heard: map[edict.ProcessID]edict.Time{},
			next: edict.Time{Incarnation: inc}, early: early}
	}
}

func (h *heartbeat) Observe(elect.Observation) {}

func (h *heartbeat) WeakLeader(now edict.Time) edict.ProcessID {
	best := h.self
	for p, t := range h.heard {
		if p < best && now.Before(t.Add(3*period)) {
			best = p
		}
	}
	return best
}

func (h *heartbeat) Tick(now edict.Time) {
	if now.Before(h.next) {
		*h.early++
		return
	}
	for _, p := range h.members {
		if p != h.self {
			h.out = append(h.out, elect.Outgoing{To: p, Payload: []byte{1}})
		}
	}
	// An odd period, so that deadlines fall between microseconds.
	h.next = now.Add(period + 333)
}

func (h *heartbeat) Receive(now edict.Time, from edict.ProcessID, payload []byte) {
	h.heard[from] = now
}

func (h *heartbeat) Outbox() []elect.Outgoing {
	out := h.out
	h.out = nil
	return out
}

func (h *heartbeat) NextTick() edict.Time { return h.next }

func TestProtocolRunBasics(t *testing.T) {
	var early int
	s := NewProtocolRun(ProtocolConfig{N: 5, New: newHeartbeat(&early), Seed: 1, Rho: 1e-3})
	d, ok := s.UntilAgreed(time.Second)
	require.True(t, ok, s.String())
	assert.Less(t, d, 50*time.Millisecond)
	l, _ := s.Agreed()
	assert.Equal(t, edict.ProcessID(1), l)

	// The leader crashes: the others move to 2 within three periods.
	s.Crash(1)
	d, ok = s.UntilAgreed(time.Second)
	require.True(t, ok, s.String())
	assert.LessOrEqual(t, d, 3*period+10*time.Millisecond)
	l, _ = s.Agreed()
	assert.Equal(t, edict.ProcessID(2), l)

	// A partition: each side agrees on its own lowest id.
	s.Recover(1)
	s.RunFor(100 * time.Millisecond)
	s.Partition([]edict.ProcessID{1, 2}, []edict.ProcessID{3, 4, 5})
	assert.False(t, s.Connected(1, 3))
	assert.True(t, s.Connected(3, 4))
	s.RunFor(100 * time.Millisecond)
	l, ok = s.AgreedAmong([]edict.ProcessID{3, 4, 5})
	assert.True(t, ok)
	assert.Equal(t, edict.ProcessID(3), l)
	_, ok = s.Agreed()
	assert.False(t, ok, "the two sides disagree")
	s.Heal()
	_, ok = s.UntilAgreed(time.Second)
	assert.True(t, ok)

	total, links := s.Messages()
	assert.Positive(t, total)
	assert.Equal(t, 20, links, "heartbeats use every directed link")
	assert.NotEmpty(t, s.Changes)
	assert.Zero(t, early, "a Tick before NextTick")
}

// A cut is one way: 2 stops hearing 1, 1 still hears 2.
func TestProtocolRunCut(t *testing.T) {
	var early int
	s := NewProtocolRun(ProtocolConfig{N: 3, New: newHeartbeat(&early), Seed: 2})
	s.RunFor(100 * time.Millisecond)
	s.Cut(1, 2)
	s.RunFor(100 * time.Millisecond)
	assert.Equal(t, edict.ProcessID(2), s.Opinion(2), "2 no longer hears 1")
	assert.Equal(t, edict.ProcessID(1), s.Opinion(3))
	assert.True(t, s.Connected(2, 1))
	s.Heal()
	s.RunFor(100 * time.Millisecond)
	assert.Equal(t, edict.ProcessID(1), s.Opinion(2))
}

// A slow link holds its messages until the time given; GST ends it.
func TestProtocolRunSlowAndGST(t *testing.T) {
	var early int
	s := NewProtocolRun(ProtocolConfig{N: 2, New: newHeartbeat(&early), Seed: 3, GST: 300 * time.Millisecond})
	s.Slow(1, 2, time.Hour)
	s.RunFor(200 * time.Millisecond)
	assert.Equal(t, edict.ProcessID(2), s.Opinion(2), "nothing from 1 yet")
	s.RunFor(200 * time.Millisecond)
	assert.Equal(t, edict.ProcessID(1), s.Opinion(2), "after GST the link is timely")
}

// One seed, one run.
func TestProtocolRunDeterministic(t *testing.T) {
	run := func() []Change {
		var early int
		s := NewProtocolRun(ProtocolConfig{N: 4, New: newHeartbeat(&early), Seed: 7, Loss: 0.2, Rho: 1e-3})
		s.RunFor(200 * time.Millisecond)
		s.Crash(1)
		s.RunFor(200 * time.Millisecond)
		return s.Changes
	}
	assert.Equal(t, run(), run())
}
