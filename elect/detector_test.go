package elect

import (
	"testing"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/stretchr/testify/assert"
)

func TestLowestLive(t *testing.T) {
	at := func(ns int64) edict.Time { return edict.Time{Incarnation: 1, Nanos: ns} }
	d := NewLowestLive(3, []edict.ProcessID{4, 1, 2, 3}, time.Second)
	assert.Equal(t, edict.ProcessID(1), d.WeakLeader(at(0)), "the lowest id, absent suspicion")

	d.Observe(Observation{Kind: ProcessDown, Process: 1, At: at(1)})
	assert.Equal(t, edict.ProcessID(2), d.WeakLeader(at(2)))

	// A lapsed lease is a suspicion until the process is heard from.
	d.Observe(Observation{Kind: LeaseLapsed, Process: 2, At: at(3)})
	assert.Equal(t, edict.ProcessID(3), d.WeakLeader(at(4)), "self is never suspected")
	d.Observe(Observation{Kind: Heard, Process: 2, At: at(5)})
	assert.Equal(t, edict.ProcessID(2), d.WeakLeader(at(6)))

	// Stability: a live lease holder keeps the role against a recovered
	// lower id, until its hint goes stale.
	d.Observe(Observation{Kind: LeaderSeen, Process: 4, At: at(7)})
	d.Observe(Observation{Kind: ProcessUp, Process: 1, At: at(8)})
	assert.Equal(t, edict.ProcessID(4), d.WeakLeader(at(9)))
	assert.Equal(t, edict.ProcessID(1), d.WeakLeader(at(7+int64(time.Second))), "hint expired")
	d.Observe(Observation{Kind: LeaderSeen, Process: 4, At: at(10)})
	d.Observe(Observation{Kind: ProcessDown, Process: 4, At: at(11)})
	assert.Equal(t, edict.ProcessID(1), d.WeakLeader(at(12)), "a suspected leader loses the role")

	d.SetMembers([]edict.ProcessID{5, 3})
	assert.Equal(t, edict.ProcessID(3), d.WeakLeader(at(13)))
}
