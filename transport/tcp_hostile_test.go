package transport

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
	"github.com/edictlog/edictlog/wire/wiretest"
)

// rawHandshake dials addr as process from and completes a hello for the
// given lane, returning the raw connection for a test to misbehave on.
func rawHandshake(t *testing.T, addr string, cluster string, from, to edict.ProcessID, ln lane) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	f, err := encodeFrame("hello", &hello{Cluster: cluster, From: uint64(from), To: uint64(to), Lane: uint8(ln)}, maxHandshakeFrame)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(f); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	body, err := newFrameReader(br, maxHandshakeFrame).next()
	if err != nil {
		t.Fatalf("reading hello reply: %v", err)
	}
	r, err := decodeHelloReply(body)
	if err != nil || !r.OK {
		t.Fatalf("handshake refused: %v %v", r, err)
	}
	return c, br
}

// expectClosed waits for the peer to close c.
func expectClosed(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 64)
	for {
		_, err := c.Read(buf)
		if err == nil {
			continue
		}
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatal("connection still open")
		}
		return
	}
}

func header(n uint32, version byte) []byte {
	h := make([]byte, 5)
	binary.BigEndian.PutUint32(h, n)
	h[4] = version
	return h
}

// TestTCPBadFramesCloseOnlyTheirConnection sends each kind of bad frame on
// an authenticated connection and checks that only that connection closes,
// with a log line naming the problem, while another peer's messages keep
// flowing.
func TestTCPBadFramesCloseOnlyTheirConnection(t *testing.T) {
	t.Parallel()
	const limit = 64 << 10
	cases := []struct {
		name string
		send func(c net.Conn)
		log  []string
	}{
		{"over the limit", func(c net.Conn) { c.Write(header(limit+1, FrameVersion)) },
			[]string{"closing connection", "peer=p3", "frame exceeds the size limit: frame of 65537 bytes, limit 65536"}},
		{"wrong version", func(c net.Conn) { c.Write(append(header(3, FrameVersion+1), 1, 2)) },
			[]string{"closing connection", "peer=p3", fmt.Sprintf("unknown frame version: version byte %d, want %d", FrameVersion+1, FrameVersion)}},
		{"truncated", func(c net.Conn) {
			c.Write(append(header(100, FrameVersion), make([]byte, 10)...))
			c.(*net.TCPConn).CloseWrite()
		}, []string{"closing connection", "peer=p3", "truncated frame: got 10 of 99 body bytes: unexpected EOF"}},
		{"stalled mid-frame", func(c net.Conn) { c.Write(append(header(100, FrameVersion), make([]byte, 10)...)) },
			[]string{"closing connection", "peer=p3", "truncated frame", "i/o timeout"}},
		{"garbage body", func(c net.Conn) { c.Write(append(header(4, FrameVersion), 0xc1, 0xc1, 0xc1)) },
			[]string{"closing connection", "peer=p3", "decode message"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			n := newTCPNodes(t, 2, func(c *TCPConfig) { c.MaxFrameSize = limit; c.FrameTimeout = 300 * time.Millisecond })
			// A healthy connection from 1, established before the attack.
			if err := n[0].Send(ctxT(t, time.Second), 2, wire.LeaseMessage(wiretest.Lease(1, 2))); err != nil {
				t.Fatal(err)
			}
			recv(t, n[1], 2*time.Second)
			c, _ := rawHandshake(t, n[1].LocalAddr(), "test", 3, 2, laneControl)
			tc.send(c)
			expectClosed(t, c)
			t.Log(n[1].log.waitLog(t, tc.log...))
			for i := range 3 {
				m := wire.LeaseMessage(wiretest.Lease(1, 2))
				m.Lease.Start.Nanos += int64(i)
				if err := n[0].Send(ctxT(t, time.Second), 2, m); err != nil {
					t.Fatal(err)
				}
				if got := recv(t, n[1], 2*time.Second); got.Lease == nil || got.Lease.Start != m.Lease.Start {
					t.Fatalf("healthy connection: got %v", got)
				}
			}
		})
	}
}

// TestTCPBeforeHandshake: an unauthenticated peer gets 1 KiB frames at
// most, and one that says nothing is dropped at the handshake timeout.
func TestTCPBeforeHandshake(t *testing.T) {
	t.Parallel()
	n := newTCPNodes(t, 1, func(c *TCPConfig) { c.HandshakeTimeout = 300 * time.Millisecond })
	big, err := net.Dial("tcp", n[0].LocalAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer big.Close()
	big.Write(header(maxHandshakeFrame+1, FrameVersion))
	expectClosed(t, big)
	n[0].log.waitLog(t, "refusing connection", "reading hello", "frame of 1025 bytes, limit 1024")

	silent, err := net.Dial("tcp", n[0].LocalAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	expectClosed(t, silent)
	n[0].log.waitLog(t, "refusing connection", "reading hello", "i/o timeout")
}

// TestTCPSpoofedSender: a connection that said it is p3 cannot deliver a
// message from p1, nor an append on the control lane.
func TestTCPSpoofedSender(t *testing.T) {
	t.Parallel()
	n := newTCPNodes(t, 2, nil)
	c, _ := rawHandshake(t, n[1].LocalAddr(), "test", 3, 2, laneControl)
	f, err := encodeMessageFrame(wire.LeaseMessage(wiretest.Lease(1, 2)), DefaultMaxFrameSize)
	if err != nil {
		t.Fatal(err)
	}
	c.Write(f)
	expectClosed(t, c)
	n[1].log.waitLog(t, "closing connection", "message from p1 on a connection from p3")

	c2, _ := rawHandshake(t, n[1].LocalAddr(), "test", 3, 2, laneControl)
	f, err = encodeMessageFrame(wire.Message{From: 3, To: 2, Append: wiretest.Append(0, 1, 1)}, DefaultMaxFrameSize)
	if err != nil {
		t.Fatal(err)
	}
	c2.Write(f)
	expectClosed(t, c2)
	n[1].log.waitLog(t, "closing connection", "append message on the control lane")
	expectNothing(t, n[1], 100*time.Millisecond)
}

// TestTCPWrongClusterRawPipelined: a dialer from another cluster that does
// not wait for the reply and sends a message right behind its hello still
// gets nothing accepted.
func TestTCPWrongClusterRawPipelined(t *testing.T) {
	t.Parallel()
	n := newTCPNodes(t, 2, nil)
	c, err := net.Dial("tcp", n[1].LocalAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	h, _ := encodeFrame("hello", &hello{Cluster: "evil", From: 1, To: 2, Lane: uint8(laneControl)}, maxHandshakeFrame)
	m, _ := encodeMessageFrame(wire.LeaseMessage(wiretest.Lease(1, 2)), DefaultMaxFrameSize)
	c.Write(append(h, m...))
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	body, err := newFrameReader(bufio.NewReader(c), maxHandshakeFrame).next()
	if err != nil {
		t.Fatal(err)
	}
	r, err := decodeHelloReply(body)
	if err != nil || r.OK {
		t.Fatalf("reply %+v, %v: want a refusal", r, err)
	}
	if r.Reason != `cluster id mismatch: this node is not in cluster "evil"` {
		t.Fatalf("refusal reason %q", r.Reason)
	}
	expectClosed(t, c)
	n[1].log.waitLog(t, "refusing connection", "cluster id mismatch")
	expectNothing(t, n[1], 200*time.Millisecond)
}

func TestTCPWrongNodeRefused(t *testing.T) {
	t.Parallel()
	n := newTCPNodes(t, 2, nil)
	// 1 believes 3 lives at 2's address.
	n[0].AddPeer(3, n[1].LocalAddr())
	if err := n[0].Send(ctxT(t, time.Second), 3, wire.LeaseMessage(wiretest.Lease(1, 3))); err != nil {
		t.Fatal(err)
	}
	n[1].log.waitLog(t, "refusing connection", "wrong node: this is p2, not p3")
	n[0].log.waitLog(t, "cannot connect to peer", "wrong node")
	expectNothing(t, n[1], 100*time.Millisecond)
}

// TestTCPPeerThatStopsReading: a peer that accepts the handshake and then
// reads nothing cannot hang the sender. Its writes time out, the
// connection is dropped with a log line, and the window is given back.
func TestTCPPeerThatStopsReading(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			newFrameReader(c, maxHandshakeFrame).next()
			f, _ := encodeFrame("reply", &helloReply{OK: true}, maxHandshakeFrame)
			c.Write(f)
			// and never read again
		}
	}()
	n := newTCPNodes(t, 1, func(c *TCPConfig) { c.WriteTimeout = 300 * time.Millisecond; c.AppendWindow = 16 })
	n[0].AddPeer(2, ln.Addr().String())
	big := wire.Message{Append: wiretest.Append(0, 64, 16<<10)} // 1 MiB per append
	start := time.Now()
	for time.Since(start) < 3*time.Second {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		n[0].Send(ctx, 2, big)
		cancel()
		if strings.Contains(n[0].log.String(), "connection lost") {
			break
		}
	}
	t.Log(n[0].log.waitLog(t, "connection lost", "peer=p2", "lane=bulk", "i/o timeout"))
	// The window was given back: a send gets a slot again at once.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := n[0].Send(ctx, 2, wire.Message{Append: wiretest.Append(0, 1, 1)}); err != nil {
		t.Fatalf("send after the stuck connection was dropped: %v", err)
	}
}
