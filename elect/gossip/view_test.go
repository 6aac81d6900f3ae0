package gossip

import (
	"testing"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect"
)

func at(ms int64) edict.Time { return edict.Time{Incarnation: 1, Nanos: ms * int64(time.Millisecond)} }

func testView(self edict.ProcessID, alive ...edict.ProcessID) *view {
	v := newView(self, 1, []edict.ProcessID{1, 2, 3, 4, 5}, time.Second)
	for _, p := range alive {
		v.nodes[p] = &node{meta: Meta{ID: p, Epoch: 1}, alive: true}
	}
	return &v
}

func TestViewLowestEligible(t *testing.T) {
	t.Parallel()
	v := testView(3, 1, 2, 3, 4, 5)
	check := func(want edict.ProcessID, why string) {
		t.Helper()
		if got := v.weakLeader(at(0)); got != want {
			t.Fatalf("%s: weak leader %v, want %v", why, got, want)
		}
	}
	check(1, "all alive")
	v.nodes[1].alive = false
	check(2, "1 dead")
	v.observe(elect.Observation{Kind: elect.LeaseLapsed, Process: 2})
	check(3, "2's lease lapsed")
	v.observe(elect.Observation{Kind: elect.Heard, Process: 2})
	check(3, "2 heard from, but not asking for the lease (it stands aside, or follows another)")
	v.observe(elect.Observation{Kind: elect.Campaigned, Process: 2})
	check(2, "2 asks for the lease again")
	v.observe(elect.Observation{Kind: elect.ProcessDown, Process: 2})
	check(3, "2 reported down")
	v.observe(elect.Observation{Kind: elect.ProcessUp, Process: 2})
	check(2, "2 reported up")
	v.nodes[2].meta.Epoch = 0
	check(3, "2 gossips an old epoch")
	v.setEpoch(1, []edict.ProcessID{4, 5})
	check(4, "new member set without 1..3")
	v.nodes[4].alive, v.nodes[5].alive = false, false
	check(edict.None, "no member alive")
}

func TestViewSelfAlwaysAlive(t *testing.T) {
	t.Parallel()
	v := testView(1) // memberlist has told us nothing yet
	v.observe(elect.Observation{Kind: elect.LeaseLapsed, Process: 1})
	if got := v.weakLeader(at(0)); got != 1 {
		t.Fatalf("weak leader %v, want self", got)
	}
}

// TestViewStability: a live lease holder keeps the role against a lower id
// until its hint expires or its lease to us lapses.
func TestViewStability(t *testing.T) {
	t.Parallel()
	v := testView(4, 1, 2, 3, 4, 5)
	v.observe(elect.Observation{Kind: elect.LeaderSeen, Process: 3, At: at(0)})
	if got := v.weakLeader(at(500)); got != 3 {
		t.Fatalf("within the hint: %v, want the leader 3", got)
	}
	if got := v.weakLeader(at(1500)); got != 1 {
		t.Fatalf("after the hint expired: %v, want 1", got)
	}
	v.observe(elect.Observation{Kind: elect.LeaderSeen, Process: 3, At: at(2000)})
	v.observe(elect.Observation{Kind: elect.LeaseLapsed, Process: 3, At: at(2100)})
	if got := v.weakLeader(at(2200)); got != 1 {
		t.Fatalf("after the leader's lease lapsed: %v, want 1", got)
	}
	// A leader gossiping its own claim keeps the role for those who do
	// not grant to it.
	v.nodes[2].meta.Leader = 2
	if got := v.weakLeader(at(2300)); got != 2 {
		t.Fatalf("with 2 claiming the lease: %v, want 2", got)
	}
	v.nodes[2].alive = false
	if got := v.weakLeader(at(2300)); got != 1 {
		t.Fatalf("with the claimant dead: %v, want 1", got)
	}
	if h := v.hint(at(2500)); h != edict.None {
		t.Fatalf("hint %v after the leader's lease lapsed", h)
	}
}
