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

	// A lapsed lease is a suspicion until the process asks for the lease
	// again; a message that is not a campaign (a grant reply from a
	// process standing aside) does not end it.
	d.Observe(Observation{Kind: LeaseLapsed, Process: 2, At: at(3)})
	assert.Equal(t, edict.ProcessID(3), d.WeakLeader(at(4)), "self is never suspected")
	d.Observe(Observation{Kind: Heard, Process: 2, At: at(5)})
	assert.Equal(t, edict.ProcessID(3), d.WeakLeader(at(5)), "heard, but not campaigning")
	d.Observe(Observation{Kind: Campaigned, Process: 2, At: at(5)})
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

// A nack names a grantee second-hand: it must not clear a suspicion, or a
// dead leader is named weak leader forever (found on a real cluster).
func TestLowestLiveLeaderSeenDoesNotClearSuspicion(t *testing.T) {
	at := func(ns int64) edict.Time { return edict.Time{Incarnation: 1, Nanos: ns} }
	d := NewLowestLive(2, []edict.ProcessID{1, 2, 3}, time.Second)
	d.Observe(Observation{Kind: LeaseLapsed, Process: 1, At: at(1)})
	d.Observe(Observation{Kind: LeaderSeen, Process: 1, At: at(2)})
	assert.Equal(t, edict.ProcessID(2), d.WeakLeader(at(3)))
}

// With SuspectAfter, a member never heard from is suspected once that
// long has passed, and hearing from it clears the suspicion.
func TestLowestLiveSuspectsSilence(t *testing.T) {
	at := func(d time.Duration) edict.Time { return edict.Time{Incarnation: 1, Nanos: int64(d)} }
	d := NewLowestLive(3, []edict.ProcessID{1, 2, 3}, time.Second)
	d.SuspectAfter = time.Second
	assert.Equal(t, edict.ProcessID(1), d.WeakLeader(at(0)), "nobody is suspected at the start")
	d.Observe(Observation{Kind: Heard, Process: 2, At: at(900 * time.Millisecond)})
	assert.Equal(t, edict.ProcessID(2), d.WeakLeader(at(1500*time.Millisecond)), "p1 silent for 1.5s, p2 heard recently")
	assert.Equal(t, edict.ProcessID(3), d.WeakLeader(at(2*time.Second)), "everyone else silent")
	d.Observe(Observation{Kind: Heard, Process: 1, At: at(2100 * time.Millisecond)})
	assert.Equal(t, edict.ProcessID(1), d.WeakLeader(at(2200*time.Millisecond)), "a campaigning lower id is heard")
}

// A member that campaigns in an ended epoch missed the change: it is
// passed over until it is heard from in a later epoch, or everyone would
// wait for a weak leader that cannot lead.
func TestLowestLiveSkipsLaggingMember(t *testing.T) {
	now := edict.Time{Incarnation: 1, Nanos: int64(time.Hour)}
	d := NewLowestLive(3, []edict.ProcessID{2, 3, 4}, time.Second)
	if got := d.WeakLeader(now); got != 2 {
		t.Fatalf("weak leader %v, want 2", got)
	}
	d.Observe(Observation{Kind: Lagging, Process: 2, At: now})
	if got := d.WeakLeader(now); got != 3 {
		t.Fatalf("weak leader %v while 2 lags, want 3", got)
	}
	d.Observe(Observation{Kind: Heard, Process: 2, At: now.Add(time.Millisecond)})
	if got := d.WeakLeader(now.Add(time.Millisecond)); got != 2 {
		t.Fatalf("weak leader %v once 2 caught up, want 2", got)
	}
}
