package transport

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/edictlog/edictlog/edict"
)

// peer is the outbound side of one remote process: two lanes, each with
// its own connection and writer goroutine.
type peer struct {
	id      edict.ProcessID
	mu      sync.Mutex
	addr    string
	control *outLane
	appends *outLane
	// ctx ends when the peer is removed or the transport closes; it
	// aborts dials, and stop is its Done channel.
	ctx    context.Context
	cancel context.CancelFunc
	stop   <-chan struct{}
}

func newPeer(t *TCP, id edict.ProcessID, addr string) *peer {
	p := &peer{id: id, addr: addr}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.stop = p.ctx.Done()
	p.control = newOutLane(t, p, laneControl, t.cfg.ControlQueue, 0)
	p.appends = newOutLane(t, p, laneBulk, t.cfg.AppendWindow, t.cfg.AppendWindow)
	return p
}

func (p *peer) getAddr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.addr
}

func (p *peer) setAddr(addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.addr = addr
}

func (p *peer) close() { p.cancel() }

// outLane sends one lane's frames to one peer over a connection it dials
// on demand and keeps while it works.
//
// A frame sent while the lane is idle (connected, nothing queued or being
// written) is written by the sender itself, without waiting: handed to the
// writer goroutine it costs a wake-up, and the writer then waits for a
// processor behind whatever its waker readied last (a log's loop hands its
// batch to the persister in the same step, which then runs bbolt and
// fdatasync first: on 2 cores a leader's append waits 140 us or more at the
// median). The writer goroutine writes what is sent while it is busy, the
// rest of a frame the socket would not take whole, and dials, so a sender
// never blocks on the network.
type outLane struct {
	t     *TCP
	p     *peer
	kind  lane
	queue chan []byte
	// window holds a token per bulk frame between Send and the
	// receiver's ack (or the frame's loss); nil on the control lane.
	window chan struct{}
	// backlog counts the frames handed to the writer goroutine and not
	// yet written or dropped, the rest of a frame included: a sender
	// writes its frame itself only when it is 0, so that the frames of
	// one sender leave in the order it sent them.
	backlog atomic.Int64
	// kick wakes the writer goroutine for rest.
	kick chan struct{}

	// wmu is held by whoever writes to the connection: the writer
	// goroutine for a batch, a keepalive or a dial, a sender for its own
	// frame. It guards the fields below.
	wmu      sync.Mutex
	conn     *outConn
	failures int
	retryAt  time.Time
	// failedAddr is the address the failures are of: a new address is
	// dialed at once, not after the old one's back-off.
	failedAddr string
	lastWrite  time.Time
	// rest is what a sender's write left of its frame when the socket's
	// buffer was full; the writer goroutine writes it before anything
	// else on the connection.
	rest []byte
}

func newOutLane(t *TCP, p *peer, kind lane, queue, window int) *outLane {
	l := &outLane{t: t, p: p, kind: kind, queue: make(chan []byte, queue), kick: make(chan struct{}, 1)}
	if window > 0 {
		l.window = make(chan struct{}, window)
	}
	t.wg.Add(1)
	go l.run()
	return l
}

// enqueue queues frame f, waiting for room (and a window token) until ctx
// is done. Room that is there is always taken, even with ctx already done,
// so a caller that must never block (the edictlog.Node loop) passes a done
// context and loses a frame only when the window or queue is full.
func (l *outLane) enqueue(ctx context.Context, f []byte) error {
	if l.window != nil {
		select {
		case l.window <- struct{}{}:
		default:
			select {
			case l.window <- struct{}{}:
			case <-ctx.Done():
				return fmt.Errorf("transport: send append to %v: window of %d appends in flight is full: %w", l.p.id, cap(l.window), context.Cause(ctx))
			case <-l.p.stop:
				return l.gone()
			}
		}
	}
	if l.backlog.Load() == 0 && l.writeIdle(f) {
		return nil
	}
	l.backlog.Add(1)
	select {
	case l.queue <- f:
		return nil
	default:
	}
	select {
	case l.queue <- f:
		return nil
	case <-ctx.Done():
		l.backlog.Add(-1)
		l.release(1)
		return fmt.Errorf("transport: send to %v: %s queue full: %w", l.p.id, l.kind, context.Cause(ctx))
	case <-l.p.stop:
		l.backlog.Add(-1)
		l.release(1)
		return l.gone()
	}
}

// writeIdle writes f on the sender's goroutine if the lane is idle: its
// connection up, nothing queued, nothing being written. It never waits:
// what the socket does not take at once is left to the writer goroutine
// (rest). false: the lane is busy, and f must be queued.
func (l *outLane) writeIdle(f []byte) bool {
	if !l.wmu.TryLock() {
		return false
	}
	defer l.wmu.Unlock()
	oc := l.conn
	if l.backlog.Load() != 0 || oc == nil || oc.raw == nil || oc.addr != l.p.getAddr() {
		return false
	}
	if err := oc.count(); err != nil {
		return false // dead: the writer goroutine dials again
	}
	n, err := oc.writeNow(f)
	if err != nil {
		l.lost(oc, oc.cause(err)) // f was counted: kill releases its token
		return true
	}
	l.lastWrite = time.Now()
	if n < len(f) {
		l.rest = f[n:]
		l.backlog.Add(1)
		select {
		case l.kick <- struct{}{}:
		default:
		}
	}
	return true
}

// gone is the error for a send to a peer removed (or a transport closed)
// while the send waited.
func (l *outLane) gone() error {
	if l.t.isClosing() {
		return ErrClosed
	}
	return fmt.Errorf("%w %v (removed)", ErrUnknownPeer, l.p.id)
}

// release returns n window tokens.
func (l *outLane) release(n uint64) {
	if l.window == nil {
		return
	}
	for ; n > 0; n-- {
		select {
		case <-l.window:
		default:
			// Returning more tokens than were taken would be a bug in the
			// accounting above; say so rather than block the writer.
			l.t.log.Error("bulk window released below zero", "peer", l.p.id)
			return
		}
	}
}

func (l *outLane) run() {
	defer l.t.wg.Done()
	defer func() {
		l.wmu.Lock()
		defer l.wmu.Unlock()
		if l.conn != nil {
			l.conn.kill(nil)
		}
	}()
	keepalive := time.NewTicker(l.t.cfg.IdleTimeout / 3)
	defer keepalive.Stop()
	for {
		select {
		case <-l.p.stop:
			return
		case f := <-l.queue:
			l.sendBatch(f)
		case <-l.kick:
			l.sendBatch(nil)
		case <-keepalive.C:
			l.keepalive()
		}
	}
}

// maxBatch bounds the bytes one flush gathers from the queue.
const maxBatch = 1 << 20

// sendBatch writes the rest of a sender's frame, then f (nil: none) and
// whatever else is queued, then flushes: under load many frames share one
// write system call, and when idle a frame goes out at once.
func (l *outLane) sendBatch(f []byte) {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if f == nil && l.rest == nil {
		return // written meanwhile
	}
	taken := int64(0) // frames taken from the queue, each counted in backlog
	if f != nil {
		taken = 1
	}
	defer func() { l.backlog.Add(-taken) }()
	oc, err := l.connect()
	if err != nil {
		l.drop(taken)
		return
	}
	// A frame larger than the buffer goes straight to the socket inside
	// Write, so the deadline must be in force before the first Write, not
	// only at Flush.
	if err := oc.c.SetWriteDeadline(time.Now().Add(l.t.cfg.WriteTimeout)); err != nil {
		l.drop(taken)
		l.lost(oc, oc.cause(err))
		return
	}
	if l.rest != nil {
		// Counted when its sender wrote the start of it.
		_, err := oc.bw.Write(l.rest)
		l.clearRest()
		if err != nil {
			l.drop(taken)
			l.lost(oc, oc.cause(err))
			return
		}
	}
	size := 0
	for f != nil {
		if counted, err := oc.write(f); err != nil {
			if !counted {
				l.drop(1) // f still holds its own token
			}
			l.lost(oc, err)
			return
		}
		size += len(f)
		if size >= maxBatch {
			break
		}
		select {
		case f = <-l.queue:
			taken++
			continue
		default:
		}
		break
	}
	if err := oc.flush(l.t.cfg.WriteTimeout); err != nil {
		l.lost(oc, oc.cause(err))
		return
	}
	l.lastWrite = time.Now()
}

// connectNow dials the lane's connection if it has none (TCP.Announce).
func (l *outLane) connectNow() {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.connect() // a failure is logged, and retried with the next frame
}

func (l *outLane) keepalive() {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	oc := l.conn
	if oc == nil || oc.isDead() || time.Since(l.lastWrite) < l.t.cfg.IdleTimeout/3 {
		return
	}
	if err := oc.writeKeepalive(l.t.cfg.WriteTimeout); err != nil {
		l.lost(oc, oc.cause(err))
		return
	}
	l.lastWrite = time.Now()
}

// drop discards n frames already taken from the queue and every frame
// still in it: the peer cannot be reached now, and delivering stale
// messages later helps no one (the protocols above resend what matters).
// The caller holds wmu, and accounts in backlog for the n it took.
func (l *outLane) drop(n int64) {
	for {
		select {
		case <-l.queue:
			l.backlog.Add(-1)
			n++
			continue
		default:
		}
		break
	}
	l.release(uint64(n))
}

// clearRest forgets the rest of a frame, written or lost with its
// connection (whose kill released the frame's token).
func (l *outLane) clearRest() {
	if l.rest != nil {
		l.rest = nil
		l.backlog.Add(-1)
	}
}

func (l *outLane) lost(oc *outConn, err error) {
	oc.kill(err)
	if l.conn == oc {
		l.conn = nil
		l.clearRest()
	}
	select {
	case <-l.t.closing:
	default:
		l.t.log.Warn("connection lost", "peer", l.p.id, "lane", l.kind, "err", err)
	}
	l.drop(0)
}

// connect returns a working connection, dialing if needed. Dial failures
// back off exponentially (50ms to 1s); while backing off, frames are
// dropped rather than queued behind a dead peer.
func (l *outLane) connect() (*outConn, error) {
	addr := l.p.getAddr()
	if oc := l.conn; oc != nil {
		if !oc.isDead() && oc.addr == addr {
			return oc, nil
		}
		oc.kill(nil)
		l.conn = nil
		l.clearRest()
	}
	if addr != l.failedAddr {
		l.failures, l.retryAt = 0, time.Time{}
	}
	if time.Now().Before(l.retryAt) {
		return nil, ErrUnreachable
	}
	c, br, err := l.t.dial(l.p.ctx, l.p.id, addr, l.kind)
	if err != nil {
		l.failures++
		l.failedAddr = addr
		l.retryAt = time.Now().Add(min(50*time.Millisecond<<min(l.failures-1, 5), time.Second))
		level := l.t.log.Debug
		if l.failures == 1 {
			level = l.t.log.Warn // say it once per outage, not once per retry
		}
		select {
		case <-l.t.closing:
		default:
			level("cannot connect to peer", "peer", l.p.id, "addr", addr, "lane", l.kind, "err", err)
		}
		return nil, err
	}
	if l.failures > 0 {
		l.t.log.Info("connected to peer", "peer", l.p.id, "addr", addr, "lane", l.kind, "after_failures", l.failures)
	}
	l.failures = 0
	oc := newOutConn(c, addr, l)
	l.conn = oc
	l.t.wg.Add(1)
	go oc.readBack(l, br)
	return oc, nil
}

// dial connects to addr and performs the handshake for the given lane.
// It returns the connection and a reader positioned after the reply.
func (t *TCP) dial(ctx context.Context, to edict.ProcessID, addr string, ln lane) (net.Conn, *bufio.Reader, error) {
	d := net.Dialer{Timeout: t.cfg.DialTimeout, KeepAlive: 15 * time.Second}
	raw, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	c := raw
	if err := c.SetDeadline(time.Now().Add(t.cfg.HandshakeTimeout)); err != nil {
		raw.Close()
		return nil, nil, err
	}
	if t.tls != nil {
		tc := tls.Client(raw, t.tls.clientFor(addr))
		if err := tc.HandshakeContext(ctx); err != nil {
			raw.Close()
			return nil, nil, fmt.Errorf("TLS handshake with %s: %w", addr, err)
		}
		c = tc
		if pi := identityOf(tc); !pi.mayClaim(to) {
			raw.Close()
			return nil, nil, fmt.Errorf("%s's certificate names nodes %v, not %v", addr, pi.ids, to)
		}
	}
	h := hello{Cluster: t.cfg.ClusterID, From: uint64(t.cfg.ID), To: uint64(to), Lane: uint8(ln),
		Addr: t.announced, Incarnation: t.incarnation.Load()}
	if ln == laneBulk {
		h.Window = uint32(min(t.cfg.AppendWindow, math.MaxUint32))
	}
	f, err := encodeFrame("hello", &h, maxHandshakeFrame)
	if err == nil {
		_, err = c.Write(f)
	}
	if err != nil {
		c.Close()
		return nil, nil, fmt.Errorf("sending hello to %s: %w", addr, err)
	}
	br := bufio.NewReaderSize(c, 64<<10)
	body, err := newFrameReader(br, maxHandshakeFrame).next()
	var reply helloReply
	if err == nil {
		reply, err = decodeHelloReply(body)
	}
	if err != nil {
		c.Close()
		return nil, nil, fmt.Errorf("reading hello reply from %s: %w", addr, err)
	}
	if !reply.OK {
		c.Close()
		return nil, nil, fmt.Errorf("%v at %s refused the connection: %s", to, addr, reply.Reason)
	}
	if err := c.SetDeadline(time.Time{}); err != nil {
		c.Close()
		return nil, nil, err
	}
	return c, br, nil
}

// outConn is one outbound connection and its window accounting: every
// bulk frame written holds a window token until the receiver acks it or
// the connection dies.
type outConn struct {
	c    net.Conn
	bw   *bufio.Writer
	addr string
	lane *outLane
	// raw writes without waiting (writeNow); nil where that is not
	// possible (TLS).
	raw syscall.RawConn

	mu      sync.Mutex
	dead    bool
	err     error  // why it died, if known
	written uint64 // bulk frames written on this connection
	acked   uint64
}

func newOutConn(c net.Conn, addr string, l *outLane) *outConn {
	oc := &outConn{c: c, bw: bufio.NewWriterSize(c, 64<<10), addr: addr, lane: l}
	if sc, ok := c.(syscall.Conn); ok && canWriteNow {
		if raw, err := sc.SyscallConn(); err == nil {
			oc.raw = raw
		}
	}
	return oc
}

func (oc *outConn) isDead() bool {
	oc.mu.Lock()
	defer oc.mu.Unlock()
	return oc.dead
}

// kill closes the connection, remembering why (the first cause given),
// and returns the tokens of frames it will never have acked. It is
// idempotent.
func (oc *outConn) kill(cause error) {
	oc.mu.Lock()
	if !oc.dead {
		oc.dead = true
		oc.err = cause
		oc.lane.release(oc.written - oc.acked)
		oc.acked = oc.written
	}
	oc.mu.Unlock()
	oc.c.Close()
}

// cause returns why the connection died if that is known, else err: a
// write on a connection that the ack reader closed fails with "use of
// closed network connection", which explains nothing.
func (oc *outConn) cause(err error) error {
	oc.mu.Lock()
	defer oc.mu.Unlock()
	if oc.err != nil {
		return oc.err
	}
	return err
}

var errConnDead = errors.New("connection closed")

// count takes a frame about to be written into the window accounting, as
// write does; errConnDead (or why it died) if the connection is dead.
func (oc *outConn) count() error {
	oc.mu.Lock()
	defer oc.mu.Unlock()
	if oc.dead {
		if oc.err != nil {
			return oc.err
		}
		return errConnDead
	}
	if oc.lane.window != nil {
		oc.written++
	}
	return nil
}

// write buffers frame f. On error, counted says whether f's token was
// taken over by the connection's accounting (and already released) or is
// still the caller's.
func (oc *outConn) write(f []byte) (counted bool, err error) {
	oc.mu.Lock()
	if oc.dead {
		err := oc.err
		oc.mu.Unlock()
		if err == nil {
			err = errConnDead
		}
		return false, err
	}
	if oc.lane.window != nil {
		oc.written++ // counted before the bytes leave, so an ack never exceeds it
	}
	oc.mu.Unlock()
	if _, err := oc.bw.Write(f); err != nil {
		oc.kill(err)
		return true, err
	}
	return true, nil
}

func (oc *outConn) flush(timeout time.Duration) error {
	if err := oc.c.SetWriteDeadline(time.Now().Add(timeout)); err != nil {
		return err
	}
	if err := oc.bw.Flush(); err != nil {
		return err
	}
	// No deadline while the writer goroutine is not writing: a sender's
	// own write (writeNow) would find it passed and fail.
	return oc.c.SetWriteDeadline(time.Time{})
}

func (oc *outConn) writeKeepalive(timeout time.Duration) error {
	var f [frameHeaderSize]byte
	putFrameHeader(f[:], 0)
	if _, err := oc.bw.Write(f[:]); err != nil {
		return err
	}
	return oc.flush(timeout)
}

// readBack reads what the receiver sends back: acks on the bulk lane,
// nothing on the control lane. Either way it notices at once when the peer
// closes, so the next message redials instead of vanishing into a dead
// socket.
func (oc *outConn) readBack(l *outLane, br *bufio.Reader) {
	defer l.t.wg.Done()
	fr := newFrameReader(br, maxHandshakeFrame)
	var err error
	for {
		var body []byte
		if body, err = fr.next(); err != nil {
			break
		}
		if l.window == nil {
			err = errors.New("unexpected frame on the control lane")
			break
		}
		var n uint64
		if n, err = decodeAck(body); err != nil {
			break
		}
		if err = oc.ack(n); err != nil {
			break
		}
	}
	if !oc.isDead() {
		select {
		case <-l.t.closing:
		default:
			l.t.log.Debug("outbound connection closed", "peer", l.p.id, "lane", l.kind, "err", err)
		}
	}
	if errors.Is(err, io.EOF) {
		err = errors.New("connection closed by peer")
	}
	oc.kill(err)
}

func (oc *outConn) ack(n uint64) error {
	oc.mu.Lock()
	defer oc.mu.Unlock()
	if oc.dead {
		return nil
	}
	if n < oc.acked || n > oc.written {
		return fmt.Errorf("ack of %d frames, but %d written and %d acked before", n, oc.written, oc.acked)
	}
	oc.lane.release(n - oc.acked)
	oc.acked = n
	return nil
}
