package detsim

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
}

const period = 10 * time.Millisecond

func newHeartbeat(id edict.ProcessID, members []edict.ProcessID, inc uint64) elect.Protocol {
	h := &heartbeat{self: id, members: members, heard: map[edict.ProcessID]edict.Time{}}
	h.next = edict.Time{Incarnation: inc}
	return h
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
	for _, p := range h.members {
		if p != h.self {
			h.out = append(h.out, elect.Outgoing{To: p, Payload: []byte{1}})
		}
	}
	h.next = now.Add(period)
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

func TestSimulatorBasics(t *testing.T) {
	s := New(Config{N: 5, New: newHeartbeat, Seed: 1, Rho: 1e-3})
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
}

// One seed, one run.
func TestSimulatorDeterministic(t *testing.T) {
	run := func() []Change {
		s := New(Config{N: 4, New: newHeartbeat, Seed: 7, Loss: 0.2, Rho: 1e-3})
		s.RunFor(200 * time.Millisecond)
		s.Crash(1)
		s.RunFor(200 * time.Millisecond)
		return s.Changes
	}
	assert.Equal(t, run(), run())
}
