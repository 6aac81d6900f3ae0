package edictlog

import "testing"

func rang(g *readGate) bool {
	select {
	case <-g.bell:
		return true
	default:
		return false
	}
}

// The gate's rules, step by step: the first read of a group rings, the
// rest join it; a follower group opened while follower reads wait does
// not ring and stays until a take finds none waiting; other levels ring
// and go whatever follower reads do.
func TestReadGate(t *testing.T) {
	g := &readGate{bell: make(chan struct{}, 1)}

	a := g.join(ReadFollower)
	if !rang(g) {
		t.Fatal("the first follower read, none waiting, did not ring")
	}
	if b := g.join(ReadFollower); b != a || rang(g) {
		t.Fatal("a second follower read did not join the open group quietly")
	}
	groups, levels := g.take(nil, nil, false)
	if len(groups) != 1 || groups[0] != a || levels[0] != ReadFollower {
		t.Fatalf("take: %v %v", groups, levels)
	}

	g.setHold(true) // the group's request is in flight
	h := g.join(ReadFollower)
	if h == a || rang(g) {
		t.Fatal("a follower read while one waits opened no new group, or rang")
	}
	l := g.join(ReadLease)
	if !rang(g) {
		t.Fatal("a lease read did not ring while follower reads wait")
	}
	s := g.join(ReadStale)
	if !rang(g) {
		t.Fatal("a stale read did not ring while follower reads wait")
	}
	groups, levels = g.take(nil, nil, true)
	if len(groups) != 2 || groups[0] != l || groups[1] != s || levels[0] != ReadLease || levels[1] != ReadStale {
		t.Fatalf("take while follower reads wait: %v %v, want the lease and stale groups", groups, levels)
	}
	if again := g.join(ReadFollower); again != h || rang(g) {
		t.Fatal("the held follower group was not kept open, quietly")
	}
	groups, levels = g.take(nil, nil, false) // the reply is in
	if len(groups) != 1 || groups[0] != h || levels[0] != ReadFollower {
		t.Fatalf("take once none waits: %v %v, want the held group", groups, levels)
	}
	if g.join(ReadFollower) == h || !rang(g) {
		t.Fatal("after the take, a follower read did not open a new group and ring")
	}
}
