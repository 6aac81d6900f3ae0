package transport

import (
	"bufio"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/edictlog/edictlog/wire"
	"github.com/edictlog/edictlog/wire/wiretest"
)

// fakeReceiver accepts one connection, answers its hello, and hands the
// test the connection and what followed the hello, to read when it likes.
func fakeReceiver(t *testing.T) (addr string, conns <-chan *bufio.Reader, hellos <-chan hello) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	cc := make(chan *bufio.Reader, 4)
	hc := make(chan hello, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
			br := bufio.NewReaderSize(c, 64<<10)
			body, err := newFrameReader(br, maxHandshakeFrame).next()
			if err != nil {
				return
			}
			h, err := decodeHello(body)
			if err != nil {
				return
			}
			f, _ := encodeFrame("hello reply", &helloReply{OK: true}, maxHandshakeFrame)
			c.Write(f)
			hc <- h
			cc <- br
		}
	}()
	return ln.Addr().String(), cc, hc
}

// TestTCPWriteLeftToTheWriter: a frame the socket does not take whole
// when its sender writes it (the peer has not read for a while) is
// finished by the lane's writer goroutine before anything sent after it,
// and the frames arrive whole and in the order they were sent. The sends
// never wait for the network.
func TestTCPWriteLeftToTheWriter(t *testing.T) {
	t.Parallel()
	addr, conns, hellos := fakeReceiver(t)
	n := newTCPNodes(t, 1, func(c *TCPConfig) { c.AppendWindow = 64 })
	n[0].AddPeer(2, addr)
	// The first send dials (through the writer goroutine); the lane is then
	// idle, and the next sends are written by the sender itself.
	if err := n[0].Send(ctxT(t, 5*time.Second), 2, wire.Message{Append: wiretest.Append(0, 1, 16)}); err != nil {
		t.Fatal(err)
	}
	var br *bufio.Reader
	select {
	case br = <-conns:
	case <-time.After(5 * time.Second):
		t.Fatal("no connection")
	}
	if h := <-hellos; lane(h.Lane) != laneBulk || h.Window != 64 {
		t.Fatalf("hello %+v, want the bulk lane with window 64", h)
	}
	fr := newFrameReader(br, DefaultMaxFrameSize)
	first, err := fr.next()
	if err != nil {
		t.Fatal(err)
	}
	if m, err := decodeMessage(first); err != nil || m.Append.PrevIndex != 0 {
		t.Fatalf("first frame: %v %v", m, err)
	}
	// Each 8 MiB append is more than a loopback socket's buffers take
	// while the peer reads nothing: the sender writes what fits and leaves
	// the rest to the writer goroutine; the appends after it queue.
	// A done context: a send that would wait for room fails.
	const sends = 6
	for i := 1; i <= sends; i++ {
		size := 16
		if i%2 == 1 {
			size = 8 << 20
		}
		if err := n[0].Send(nonBlockingCtx(), 2, wire.Message{Append: wiretest.Append(uint64(i), 1, size)}); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	for i := 1; i <= sends; i++ {
		body, err := fr.next()
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		m, err := decodeMessage(body)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if m.Append == nil || m.Append.PrevIndex != uint64(i) {
			t.Fatalf("frame %d is %v", i, m)
		}
	}
}

func nonBlockingCtx() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// TestTCPAcksEveryEighthOfTheWindow: the receiver acks a dialer with a
// window of 64 once 8 frames are delivered, not each one, and the acks
// give the window back.
func TestTCPAcksEveryEighthOfTheWindow(t *testing.T) {
	t.Parallel()
	n := newTCPNodes(t, 2, func(c *TCPConfig) { c.AppendWindow = 64 })
	held := func() int {
		n[0].mu.Lock()
		p := n[0].peers[2]
		n[0].mu.Unlock()
		return len(p.appends.window)
	}
	for i := range 7 {
		if err := n[0].Send(ctxT(t, 5*time.Second), 2, wire.Message{Append: wiretest.Append(uint64(i), 1, 16)}); err != nil {
			t.Fatal(err)
		}
		recv(t, n[1], 5*time.Second)
	}
	time.Sleep(50 * time.Millisecond) // an ack per frame would have come by now
	if h := held(); h != 7 {
		t.Fatalf("%d of the window held after 7 frames delivered, want 7 (no ack yet)", h)
	}
	if err := n[0].Send(ctxT(t, 5*time.Second), 2, wire.Message{Append: wiretest.Append(7, 1, 16)}); err != nil {
		t.Fatal(err)
	}
	recv(t, n[1], 5*time.Second)
	for deadline := time.Now().Add(5 * time.Second); held() != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of the window still held after the 8th frame was delivered", held())
		}
	}
}

// TestTCPAckWindowOfOne: a dialer with a window smaller than 8 is acked
// for every frame, so it never waits for an ack that does not come.
func TestTCPAckWindowOfOne(t *testing.T) {
	t.Parallel()
	n := newTCPNodes(t, 2, func(c *TCPConfig) { c.AppendWindow = 1 })
	for i := range 20 {
		if err := n[0].Send(ctxT(t, 5*time.Second), 2, wire.Message{Append: wiretest.Append(uint64(i), 1, 16)}); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		if m := recv(t, n[1], 5*time.Second); m.Append.PrevIndex != uint64(i) {
			t.Fatalf("got %v", m)
		}
	}
}

func TestHelloWindow(t *testing.T) {
	for _, tc := range []struct {
		h  hello
		ok bool
	}{
		{hello{Cluster: "c", From: 1, To: 2, Lane: uint8(laneBulk), Window: 64}, true},
		{hello{Cluster: "c", From: 1, To: 2, Lane: uint8(laneBulk)}, false},
		{hello{Cluster: "c", From: 1, To: 2, Lane: uint8(laneControl)}, true},
		{hello{Cluster: "c", From: 1, To: 2, Lane: uint8(laneControl), Window: 8}, false},
		{hello{Cluster: "c", From: 1, To: 2, Lane: uint8(laneSnapshot), Window: 8}, false},
	} {
		if err := tc.h.validate(); (err == nil) != tc.ok {
			t.Errorf("%+v: %v", tc.h, err)
		}
	}
	for w, want := range map[uint32]uint64{1: 1, 7: 1, 8: 1, 16: 2, 64: 8, 1 << 20: 1 << 17} {
		if got := ackEvery(w); got != want {
			t.Errorf("ackEvery(%d) = %d, want %d", w, got, want)
		}
	}
}

// TestTCPSenderWritesAfterIdle: a lane idle for longer than WriteTimeout
// still takes a sender's own write (the writer goroutine's deadline is
// not left standing), and nothing is lost.
func TestTCPSenderWritesAfterIdle(t *testing.T) {
	t.Parallel()
	n := newTCPNodes(t, 2, func(c *TCPConfig) { c.WriteTimeout = 50 * time.Millisecond })
	for i := range 3 {
		if err := n[0].Send(ctxT(t, 5*time.Second), 2, wire.Message{Append: wiretest.Append(uint64(i), 1, 16)}); err != nil {
			t.Fatal(err)
		}
		if m := recv(t, n[1], 5*time.Second); m.Append.PrevIndex != uint64(i) {
			t.Fatalf("got %v", m)
		}
		time.Sleep(150 * time.Millisecond) // past the deadline a write would have set
	}
	if strings.Contains(n[0].log.String(), "connection lost") {
		t.Fatalf("a connection was lost:\n%s", n[0].log.String())
	}
}
