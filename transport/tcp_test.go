package transport

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
	"github.com/edictlog/edictlog/wire/wiretest"
)

type tcpNode struct {
	*TCP
	log *logBuffer
}

// newTCPNodes starts transports for ids 1..n on 127.0.0.1 ephemeral ports,
// each knowing the others.
func newTCPNodes(t *testing.T, n int, tweak func(*TCPConfig)) []*tcpNode {
	t.Helper()
	nodes := make([]*tcpNode, n)
	for i := range nodes {
		lb := &logBuffer{}
		cfg := TCPConfig{ID: edict.ProcessID(i + 1), ClusterID: "test", BindAddr: "127.0.0.1:0", Logger: lb.logger()}
		if tweak != nil {
			tweak(&cfg)
		}
		tr, err := NewTCP(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		nodes[i] = &tcpNode{TCP: tr, log: lb}
	}
	for _, a := range nodes {
		for _, b := range nodes {
			a.AddPeer(b.ID(), b.LocalAddr())
		}
	}
	return nodes
}

// receiver is the side of a transport the tests read from.
type receiver interface {
	ID() edict.ProcessID
	Receive() <-chan wire.Message
}

func recv(t *testing.T, tr receiver, within time.Duration) wire.Message {
	t.Helper()
	select {
	case m, ok := <-tr.Receive():
		if !ok {
			t.Fatal("receive channel closed")
		}
		return m
	case <-time.After(within):
		t.Fatalf("%v received nothing within %v", tr.ID(), within)
	}
	return wire.Message{}
}

func expectNothing(t *testing.T, tr receiver, within time.Duration) {
	t.Helper()
	select {
	case m := <-tr.Receive():
		t.Fatalf("%v received %v, want nothing", tr.ID(), m)
	case <-time.After(within):
	}
}

func TestTCPDeliversEveryKind(t *testing.T) {
	t.Parallel()
	n := newTCPNodes(t, 2, nil)
	want := wiretest.Messages()
	for _, m := range want {
		if err := n[0].Send(ctxT(t, time.Second), 2, m); err != nil {
			t.Fatalf("send %v: %v", m, err)
		}
	}
	var got []wire.Message
	for range want {
		got = append(got, recv(t, n[1], 5*time.Second))
	}
	// Appends and control messages travel on different connections, so
	// only the order within each lane is kept.
	key := func(m wire.Message) string { return fmt.Sprintf("%#v", m) }
	for _, m := range want {
		i := slices.IndexFunc(got, func(g wire.Message) bool { return reflect.DeepEqual(g, m) })
		if i < 0 {
			t.Fatalf("message %s never arrived", key(m))
		}
		got = slices.Delete(got, i, i+1)
	}
	expectNothing(t, n[1], 100*time.Millisecond)
}

func TestTCPSendToSelfAndUnknown(t *testing.T) {
	t.Parallel()
	n := newTCPNodes(t, 1, nil)
	if err := n[0].Send(ctxT(t, time.Second), 1, wire.LeaseMessage(wiretest.Lease(1, 1))); err != nil {
		t.Fatal(err)
	}
	if m := recv(t, n[0], time.Second); m.Lease == nil || m.From != 1 {
		t.Fatalf("loopback delivered %v", m)
	}
	err := n[0].Send(ctxT(t, time.Second), 9, wire.LeaseMessage(wiretest.Lease(1, 9)))
	if !errors.Is(err, ErrUnknownPeer) {
		t.Fatalf("send to unknown peer: %v, want ErrUnknownPeer", err)
	}
	err = n[0].Send(ctxT(t, time.Second), 9, wire.LeaseMessage(wiretest.Lease(3, 9)))
	if err == nil || !strings.Contains(err.Error(), "message from p3") {
		t.Fatalf("send of a message from another process: %v", err)
	}
}

// TestTCPLeaseNotBehindAppends fills the receiver's inbox with appends the
// runtime has not taken, then sends a lease message: it must come out
// first.
func TestTCPLeaseNotBehindAppends(t *testing.T) {
	t.Parallel()
	n := newTCPNodes(t, 2, func(c *TCPConfig) { c.AppendWindow = 8 })
	for i := range 8 {
		if err := n[0].Send(ctxT(t, time.Second), 2, wire.Message{Append: wiretest.Append(uint64(i*4), 4, 1024)}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "appends queued at the receiver", func() bool { return len(n[1].inbox.appends) >= 7 })
	if err := n[0].Send(ctxT(t, time.Second), 2, wire.LeaseMessage(wiretest.Lease(1, 2))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "lease message queued at the receiver", func() bool { return len(n[1].inbox.control) == 1 })
	// The merger may already hold one append it took before the lease
	// message arrived; the lease message must come no later than second.
	first := recv(t, n[1], time.Second)
	if first.Lease == nil {
		if second := recv(t, n[1], time.Second); second.Lease == nil {
			t.Fatalf("lease message queued behind appends: got %v then %v", first, second)
		}
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestTCPAppendWindow shows the window bounds the appends in flight: with
// the receiver's runtime not reading, Send blocks after the window and the
// receiver's queue are full; once it reads, every append arrives in order.
func TestTCPAppendWindow(t *testing.T) {
	t.Parallel()
	const window = 4
	n := newTCPNodes(t, 2, func(c *TCPConfig) { c.AppendWindow = window })
	sent := 0
	var err error
	for sent < 100 {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		err = n[0].Send(ctx, 2, wire.Message{Append: wiretest.Append(uint64(sent), 1, 64)})
		cancel()
		if err != nil {
			break
		}
		sent++
	}
	if err == nil || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "window") {
		t.Fatalf("send with a full window: %v", err)
	}
	// In flight: the window. Queued at the receiver: its append queue
	// (sized to the window) and the one message its inbox holds ready.
	if sent < window || sent > 2*window+1 {
		t.Fatalf("%d appends accepted before the window filled, want %d..%d", sent, window, 2*window+1)
	}
	for i := range sent {
		m := recv(t, n[1], 2*time.Second)
		if m.Append == nil || m.Append.PrevIndex != uint64(i) {
			t.Fatalf("append %d: got %v", i, m)
		}
	}
	if err := n[0].Send(ctxT(t, time.Second), 2, wire.Message{Append: wiretest.Append(999, 1, 64)}); err != nil {
		t.Fatalf("send after the receiver caught up: %v", err)
	}
	if m := recv(t, n[1], 2*time.Second); m.Append == nil || m.Append.PrevIndex != 999 {
		t.Fatalf("got %v", m)
	}
}

func TestTCPRefusesOversizedAppendAtSender(t *testing.T) {
	t.Parallel()
	n := newTCPNodes(t, 2, func(c *TCPConfig) { c.MaxFrameSize = 64 << 10 })
	err := n[0].Send(ctxT(t, time.Second), 2, wire.Message{Append: wiretest.Append(0, 2, 40<<10)})
	if !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("oversized append: %v, want ErrFrameTooLarge", err)
	}
}

// TestTCPWrongClusterRefused: a node of another cluster cannot get a single
// message accepted, and both sides log why.
func TestTCPWrongClusterRefused(t *testing.T) {
	t.Parallel()
	good := newTCPNodes(t, 2, nil)
	lb := &logBuffer{}
	intruder, err := NewTCP(TCPConfig{ID: 3, ClusterID: "other", BindAddr: "127.0.0.1:0", Logger: lb.logger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { intruder.Close() })
	intruder.AddPeer(2, good[1].LocalAddr())
	for range 5 {
		if err := intruder.Send(ctxT(t, time.Second), 2, wire.LeaseMessage(wiretest.Lease(3, 2))); err != nil {
			t.Fatal(err)
		}
		time.Sleep(60 * time.Millisecond) // let the lane retry after its backoff
	}
	good[1].log.waitLog(t, "cluster id mismatch", "peer_cluster=other", "cluster=test")
	lb.waitLog(t, "cannot connect to peer", "refused the connection", "cluster id mismatch")
	expectNothing(t, good[1], 300*time.Millisecond)
	// A member of the cluster still gets through.
	if err := good[0].Send(ctxT(t, time.Second), 2, wire.LeaseMessage(wiretest.Lease(1, 2))); err != nil {
		t.Fatal(err)
	}
	if m := recv(t, good[1], 2*time.Second); m.From != 1 {
		t.Fatalf("got %v", m)
	}
}

// TestTCPReconnects: when a peer restarts (here at a new address), the
// sender's lanes notice the dead connections and dial again.
func TestTCPReconnects(t *testing.T) {
	t.Parallel()
	n := newTCPNodes(t, 2, nil)
	if err := n[0].Send(ctxT(t, time.Second), 2, wire.LeaseMessage(wiretest.Lease(1, 2))); err != nil {
		t.Fatal(err)
	}
	recv(t, n[1], 2*time.Second)
	n[1].Close()
	if _, ok := <-n[1].Receive(); ok {
		t.Fatal("Receive not closed by Close")
	}
	if err := n[1].Send(ctxT(t, time.Second), 1, wire.LeaseMessage(wiretest.Lease(2, 1))); !errors.Is(err, ErrClosed) {
		t.Fatalf("send after Close: %v", err)
	}
	b := newTCPNodes(t, 2, nil)[1] // a fresh p2
	n[0].AddPeer(2, b.LocalAddr())
	deadline := time.Now().Add(5 * time.Second)
	for {
		if err := n[0].Send(ctxT(t, time.Second), 2, wire.Message{Append: wiretest.Append(1, 1, 8)}); err != nil {
			t.Fatal(err)
		}
		select {
		case m := <-b.Receive():
			if m.Append == nil {
				t.Fatalf("got %v", m)
			}
			return
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("no message reached the restarted peer")
		}
	}
}
