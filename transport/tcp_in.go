package transport

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"time"

	"github.com/edictlog/edictlog/edict"
)

func (t *TCP) acceptLoop() {
	defer t.wg.Done()
	for {
		c, err := t.ln.Accept()
		if err != nil {
			if t.isClosing() {
				return
			}
			// Out of descriptors and the like: wait rather than spin.
			t.log.Warn("accept failed", "err", err)
			select {
			case <-t.closing:
				return
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		select {
		case t.inbound <- struct{}{}:
		default:
			t.log.Warn("refusing connection: too many inbound connections", "remote", c.RemoteAddr(), "limit", t.cfg.MaxInboundConns)
			c.Close()
			continue
		}
		if !t.track(c) {
			c.Close()
			return
		}
		t.wg.Add(1)
		go t.serve(c)
	}
}

// deadlineConn sets a read deadline before every read that reaches the
// network: the idle timeout between frames, the frame timeout inside one.
// Reads served from a buffer cost nothing. Until armed (during the
// handshake) the connection's absolute deadline applies instead.
type deadlineConn struct {
	net.Conn
	idle, frame time.Duration
	armed       atomic.Bool
	inFrame     atomic.Bool
	aborted     atomic.Bool
}

// errAborted is a read of a connection its reader gave up on (abort).
var errAborted = errors.New("transport: the receiver gave up on the stream")

func (d *deadlineConn) Read(p []byte) (int, error) {
	if !d.armed.Load() {
		return d.Conn.Read(p)
	}
	t := d.idle
	if d.inFrame.Load() {
		t = d.frame
	}
	if err := d.Conn.SetReadDeadline(time.Now().Add(t)); err != nil {
		return 0, err
	}
	// After the deadline is set, so that an abort between the two is
	// seen here, and one after unblocks the read below.
	if d.aborted.Load() {
		return 0, errAborted
	}
	return d.Conn.Read(p)
}

// abort makes a read blocked on the connection, and every later one,
// fail at once.
func (d *deadlineConn) abort() {
	d.aborted.Store(true)
	_ = d.Conn.SetReadDeadline(time.Now())
}

// inConn is an accepted connection after its handshake.
type inConn struct {
	c      net.Conn
	dc     *deadlineConn
	br     *bufio.Reader
	fr     *frameReader
	from   edict.ProcessID
	lane   lane
	window uint32 // the dialer's, on the bulk lane
	remote string
}

func (t *TCP) serve(raw net.Conn) {
	defer t.wg.Done()
	defer func() { <-t.inbound }()
	defer t.untrack(raw)
	defer raw.Close()
	remote := raw.RemoteAddr().String()
	ic, err := t.handshake(raw, remote)
	if err != nil {
		if !t.isClosing() {
			t.log.Warn("refusing connection", "remote", remote, "err", err)
		}
		return
	}
	switch ic.lane {
	case laneSnapshot:
		err = t.receiveSnapshot(ic)
	default:
		err = t.readMessages(ic)
	}
	switch {
	case t.isClosing():
	case err == nil || errors.Is(err, io.EOF):
		t.log.Debug("connection closed by peer", "peer", ic.from, "remote", remote, "lane", ic.lane)
	default:
		t.log.Warn("closing connection", "peer", ic.from, "remote", remote, "lane", ic.lane, "err", err)
	}
}

// handshake runs TLS (if configured) and the hello exchange under one
// deadline, with frames limited to maxHandshakeFrame. A refusal is sent
// back with its reason before the error is returned.
func (t *TCP) handshake(raw net.Conn, remote string) (*inConn, error) {
	if err := raw.SetDeadline(time.Now().Add(t.cfg.HandshakeTimeout)); err != nil {
		return nil, err
	}
	c := raw
	if t.tls != nil {
		tc := tls.Server(raw, t.tls.server)
		ctx, cancel := context.WithTimeout(context.Background(), t.cfg.HandshakeTimeout)
		err := tc.HandshakeContext(ctx)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("TLS handshake failed: %w", err)
		}
		c = tc
	}
	dc := &deadlineConn{Conn: c, idle: t.cfg.IdleTimeout, frame: t.cfg.FrameTimeout}
	br := bufio.NewReaderSize(dc, 64<<10)
	body, err := newFrameReader(br, maxHandshakeFrame).next()
	if err != nil {
		return nil, fmt.Errorf("reading hello: %w", err)
	}
	h, err := decodeHello(body)
	if err != nil {
		return nil, err
	}
	pi := identityOf(c)
	if reason := t.checkHello(h, pi); reason != "" {
		if f, err := encodeFrame("hello reply", &helloReply{Reason: truncateReason(reason)}, maxHandshakeFrame); err == nil {
			c.Write(f) // best effort: the refusal is logged here either way
		}
		return nil, fmt.Errorf("handshake from %v (%s lane): %s", edict.ProcessID(h.From), lane(h.Lane), reason)
	}
	f, err := encodeFrame("hello reply", &helloReply{OK: true}, maxHandshakeFrame)
	if err != nil {
		return nil, err
	}
	if _, err := c.Write(f); err != nil {
		return nil, fmt.Errorf("sending hello reply: %w", err)
	}
	if err := raw.SetDeadline(time.Time{}); err != nil {
		return nil, err
	}
	t.heardAddress(h, pi)
	// From here on dc sets its own deadlines, and frames may be full size.
	dc.armed.Store(true)
	fr := newFrameReader(br, t.cfg.MaxFrameSize)
	fr.onFrame = func(in bool) { dc.inFrame.Store(in) }
	return &inConn{c: c, dc: dc, br: br, fr: fr, from: edict.ProcessID(h.From), lane: lane(h.Lane), window: h.Window, remote: remote}, nil
}

// checkHello returns why a hello from a peer of identity pi is refused,
// or "".
func (t *TCP) checkHello(h hello, pi peerIdentity) string {
	switch {
	case h.Cluster != t.cfg.ClusterID:
		// The log line on this side names both; the reply only tells the
		// dialer what it already knows.
		t.log.Warn("cluster id mismatch", "peer", edict.ProcessID(h.From), "peer_cluster", h.Cluster, "cluster", t.cfg.ClusterID)
		return fmt.Sprintf("cluster id mismatch: this node is not in cluster %q", h.Cluster)
	case edict.ProcessID(h.To) != t.cfg.ID:
		return fmt.Sprintf("wrong node: this is %v, not %v", t.cfg.ID, edict.ProcessID(h.To))
	case edict.ProcessID(h.From) == t.cfg.ID:
		return fmt.Sprintf("peer claims this node's own id %v", t.cfg.ID)
	case !pi.mayClaim(edict.ProcessID(h.From)):
		return fmt.Sprintf("the certificate names nodes %v, not %v", pi.ids, edict.ProcessID(h.From))
	}
	return ""
}

// readMessages delivers the messages of a control or bulk lane. On the
// bulk lane it acks delivered frames once ackEvery of the dialer's window
// are unacked and it has drained what the network gave it, or at once at
// half the window: a dialer whose window is full has sent more than that,
// so it always gets an ack once the receiver catches up.
func (t *TCP) readMessages(ic *inConn) error {
	var delivered, ackedSent uint64
	every := ackEvery(ic.window)
	for {
		if ic.lane == laneBulk && (delivered-ackedSent >= every && ic.br.Buffered() == 0 || delivered-ackedSent >= 4*every) {
			if err := t.sendAck(ic, delivered); err != nil {
				return err
			}
			ackedSent = delivered
		}
		body, err := ic.fr.next()
		if err != nil {
			return err
		}
		if len(body) == 0 {
			continue // keepalive
		}
		m, err := decodeMessage(body)
		if err != nil {
			return err
		}
		switch {
		case m.From != ic.from:
			return fmt.Errorf("message from %v on a connection from %v", m.From, ic.from)
		case m.To != t.cfg.ID:
			return fmt.Errorf("message for %v delivered to %v", m.To, t.cfg.ID)
		case m.Kind().Bulk() != (ic.lane == laneBulk):
			return fmt.Errorf("%v message on the %s lane", m.Kind(), ic.lane)
		}
		if !t.inbox.deliver(m, t.closing) {
			return nil
		}
		delivered++
	}
}

func (t *TCP) sendAck(ic *inConn, n uint64) error {
	f, err := encodeFrame("ack", n, maxHandshakeFrame)
	if err != nil {
		return err
	}
	if err := ic.c.SetWriteDeadline(time.Now().Add(t.cfg.WriteTimeout)); err != nil {
		return err
	}
	if _, err := ic.c.Write(f); err != nil {
		return fmt.Errorf("sending ack: %w", err)
	}
	return nil
}
