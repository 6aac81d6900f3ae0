package transport

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/edictlog/edictlog/edict"
)

func memNodes(t *testing.T, seed uint64, n int) (*Network, []*Mem) {
	t.Helper()
	net := NewNetwork(seed)
	nodes := make([]*Mem, n)
	for i := range nodes {
		m, err := net.Node(edict.ProcessID(i + 1))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		nodes[i] = m
	}
	return net, nodes
}

// numbered is a lease message whose Start carries i, to tell messages apart.
func numbered(from, to edict.ProcessID, i int) Message {
	l := testLease(from, to)
	l.Start.Nanos = int64(i + 1)
	return LeaseMessage(l)
}

// drain collects what arrives within d.
func drain(tr Transport, d time.Duration) []int {
	var got []int
	timeout := time.After(d)
	for {
		select {
		case m := <-tr.Receive():
			got = append(got, int(m.Lease.Start.Nanos-1))
		case <-timeout:
			return got
		}
	}
}

func sendN(t *testing.T, from Transport, to edict.ProcessID, n int) {
	t.Helper()
	for i := range n {
		if err := from.Send(context.Background(), to, numbered(from.ID(), to, i)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestMemDeliversInOrderWithoutFaults(t *testing.T) {
	t.Parallel()
	_, n := memNodes(t, 1, 2)
	sendN(t, n[0], 2, 100)
	got := drain(n[1], 100*time.Millisecond)
	if len(got) != 100 {
		t.Fatalf("got %d messages, want 100", len(got))
	}
	for i, v := range got {
		if v != i {
			t.Fatalf("message %d is #%d: reordered without a fault", i, v)
		}
	}
	for _, m := range sampleMessages() {
		if err := n[0].Send(context.Background(), 2, m); err != nil {
			t.Fatalf("%v: %v", m, err)
		}
	}
}

func TestMemOneWayPartitionAndHeal(t *testing.T) {
	t.Parallel()
	net, n := memNodes(t, 1, 3)
	net.Cut(1, 2)
	sendN(t, n[0], 2, 5)
	sendN(t, n[1], 1, 5)
	if got := drain(n[1], 50*time.Millisecond); len(got) != 0 {
		t.Fatalf("2 heard 1 across a cut link: %v", got)
	}
	if got := drain(n[0], 50*time.Millisecond); len(got) != 5 {
		t.Fatalf("1 heard %d of 2's messages on the uncut direction, want 5", len(got))
	}
	net.Partition([]edict.ProcessID{1}, []edict.ProcessID{2, 3})
	sendN(t, n[2], 1, 5)
	sendN(t, n[1], 3, 5)
	if got := drain(n[0], 50*time.Millisecond); len(got) != 0 {
		t.Fatalf("1 heard 3 across a partition: %v", got)
	}
	if got := drain(n[2], 50*time.Millisecond); len(got) != 5 {
		t.Fatalf("3 heard %d of 2's messages within its side, want 5", len(got))
	}
	net.Heal()
	sendN(t, n[0], 2, 5)
	if got := drain(n[1], 50*time.Millisecond); len(got) != 5 {
		t.Fatalf("after Heal 2 heard %d of 5", len(got))
	}
	if s := net.Stats(); s.Cut != 10 || s.Delivered != 15 {
		t.Fatalf("stats %+v: want 10 cut, 15 delivered", s)
	}
}

func TestMemLossIsSeededAndRoughlyRight(t *testing.T) {
	t.Parallel()
	run := func() (int, Stats) {
		net, n := memNodes(t, 42, 2)
		net.SetFaults(1, 2, Faults{Drop: 0.3})
		sendN(t, n[0], 2, 1000)
		return len(drain(n[1], 100*time.Millisecond)), net.Stats()
	}
	got1, s1 := run()
	got2, _ := run()
	if got1 != got2 {
		t.Fatalf("same seed, different losses: %d vs %d", got1, got2)
	}
	if got1 < 620 || got1 > 780 || s1.Dropped != uint64(1000-got1) {
		t.Fatalf("with 30%% loss %d of 1000 arrived (stats %+v)", got1, s1)
	}
}

func TestMemDuplicateDelayReorder(t *testing.T) {
	t.Parallel()
	net, n := memNodes(t, 7, 2)
	net.SetFaults(1, 2, Faults{Duplicate: 0.5})
	sendN(t, n[0], 2, 200)
	got := drain(n[1], 100*time.Millisecond)
	if s := net.Stats(); len(got) != 200+int(s.Duplicated) || s.Duplicated < 60 {
		t.Fatalf("got %d with %d duplicated", len(got), s.Duplicated)
	}

	net.SetFaults(1, 2, Faults{DelayMin: 30 * time.Millisecond, DelayMax: 40 * time.Millisecond})
	start := time.Now()
	sendN(t, n[0], 2, 1)
	recv(t, n[1], time.Second)
	if el := time.Since(start); el < 30*time.Millisecond {
		t.Fatalf("delayed message arrived after %v", el)
	}

	// Changed while running: reordering on.
	net.SetFaults(1, 2, Faults{Reorder: 0.3, ReorderDelay: 3 * time.Millisecond})
	for i := range 200 {
		n[0].Send(context.Background(), 2, numbered(1, 2, i))
		if i%20 == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	got = drain(n[1], 200*time.Millisecond)
	inversions := 0
	for i := 1; i < len(got); i++ {
		if got[i] < got[i-1] {
			inversions++
		}
	}
	if len(got) != 200 || inversions == 0 {
		t.Fatalf("reorder: %d messages, %d inversions", len(got), inversions)
	}
}

func TestMemCrashAndRestart(t *testing.T) {
	t.Parallel()
	net, n := memNodes(t, 1, 2)
	if _, err := net.Node(2); err == nil {
		t.Fatal("a live process was attached twice")
	}
	n[1].Close()
	if err := n[1].Send(context.Background(), 1, numbered(2, 1, 0)); !errors.Is(err, ErrClosed) {
		t.Fatalf("send after close: %v", err)
	}
	sendN(t, n[0], 2, 3) // lost: 2 is down
	b, err := net.Node(2)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	sendN(t, n[0], 2, 3)
	if got := drain(b, 50*time.Millisecond); len(got) != 3 {
		t.Fatalf("restarted process got %d messages, want the 3 sent after the restart", len(got))
	}
	if s := net.Stats(); s.Lost != 3 {
		t.Fatalf("stats %+v: want 3 lost", s)
	}
	n[0].RemovePeer(2)
	if err := n[0].Send(context.Background(), 2, numbered(1, 2, 0)); !errors.Is(err, ErrUnknownPeer) {
		t.Fatalf("send to a removed peer: %v", err)
	}
}
