package transport

import (
	"context"
	"errors"
	"io"
	"sync"

	"github.com/edictlog/edictlog/edict"
)

// Transport moves Messages and snapshot streams between the processes of a
// cluster. It is used by the log.Node runtime goroutine, not by the pure
// cores. Implementations are safe for concurrent use.
//
// Delivery is best effort, as the protocols above it assume: a message
// may be lost (a connection breaks, a peer is down, a queue is full), but
// it is never altered, never delivered to the wrong process, never
// accepted from a process other than its sender, and the lease protocol
// does not rely on order (it orders a sender's messages by the sender's
// own clock readings, DESIGN §4).
type Transport interface {
	// ID is the local process.
	ID() edict.ProcessID

	// Send validates m and queues it for to. It does not wait for the
	// network: it returns once m is encoded and queued, waiting only for
	// room in the queue (or, for an Append or FetchReply, in the window of
	// bulk messages in flight) until ctx is done. m.From and m.To may be left zero; they are
	// filled in with the local process and to. The caller may reuse m's
	// payload when Send returns.
	Send(ctx context.Context, to edict.ProcessID, m Message) error

	// Receive returns the channel of messages for this process. Lease and
	// other control messages are handed out before queued appends and
	// fetch replies. It is closed by Close.
	Receive() <-chan Message

	// SendSnapshot streams meta.Size bytes from r to the peer without
	// holding the snapshot in memory, and returns once the receiver has
	// reported its outcome (nil if it installed the snapshot). It blocks
	// until then or until ctx is done.
	SendSnapshot(ctx context.Context, to edict.ProcessID, meta SnapshotMeta, r io.Reader) error

	// Snapshots returns the channel of incoming snapshot streams. The
	// receiver reads each to its end and must call Finish. A stream that
	// no one takes from the channel soon (TCP: within HandshakeTimeout) is
	// refused as "receiver busy". It is closed by Close.
	Snapshots() <-chan *IncomingSnapshot

	// AddPeer sets the address of a peer (replacing an earlier one).
	AddPeer(id edict.ProcessID, addr string)
	// RemovePeer forgets a peer; messages queued for it are dropped.
	RemovePeer(id edict.ProcessID)
	// SetPeers replaces the whole peer table.
	SetPeers(peers map[edict.ProcessID]string)

	// LocalAddr is the address peers reach this process at.
	LocalAddr() string

	// Close stops the transport: connections close, queued messages are
	// dropped, Receive and Snapshots are closed. Later calls return nil.
	Close() error
}

var (
	// ErrClosed is returned by a Transport after Close.
	ErrClosed = errors.New("transport: closed")
	// ErrUnknownPeer is returned by Send to a process without an address.
	ErrUnknownPeer = errors.New("transport: unknown peer")
	// ErrUnreachable is returned when a peer cannot be reached.
	ErrUnreachable = errors.New("transport: peer unreachable")
	// ErrSnapshotRejected wraps the receiver's reason for refusing a
	// snapshot.
	ErrSnapshotRejected = errors.New("transport: snapshot rejected by receiver")
)

// IncomingSnapshot is a snapshot stream from a peer. Read yields exactly
// Meta.Size bytes, then io.EOF; a stream cut short yields an error
// instead, never a short snapshot that looks whole.
type IncomingSnapshot struct {
	From edict.ProcessID
	Meta SnapshotMeta

	r      io.Reader
	finish func(installErr error) error
	once   sync.Once
	err    error
}

func newIncomingSnapshot(from edict.ProcessID, meta SnapshotMeta, r io.Reader, finish func(error) error) *IncomingSnapshot {
	return &IncomingSnapshot{From: from, Meta: meta, r: r, finish: finish}
}

// Read reads the snapshot stream.
func (s *IncomingSnapshot) Read(p []byte) (int, error) { return s.r.Read(p) }

// Finish reports the outcome to the sender (nil: installed) and releases
// the stream. Only the first call counts; it returns the error, if any, of
// telling the sender.
func (s *IncomingSnapshot) Finish(installErr error) error {
	s.once.Do(func() { s.err = s.finish(installErr) })
	return s.err
}

// inbox hands received messages to the runtime, control messages first.
// Two queues, not one: a lease message that arrives behind a thousand
// queued appends must not wait for the runtime to work through them.
type inbox struct {
	control chan Message
	appends chan Message
	out     chan Message
	done    chan struct{}
	stop    sync.Once
}

func newInbox(controlCap, appendCap int) *inbox {
	b := &inbox{
		control: make(chan Message, controlCap),
		appends: make(chan Message, appendCap),
		// Unbuffered: the choice of which message goes next is made when
		// the runtime is ready for one, so priority holds.
		out:  make(chan Message),
		done: make(chan struct{}),
	}
	go b.run()
	return b
}

func (b *inbox) queue(m Message) chan Message {
	if m.Kind().bulk() {
		return b.appends
	}
	return b.control
}

// deliver queues m, waiting for room until stop or the inbox closes. It
// reports whether m was queued.
func (b *inbox) deliver(m Message, stop <-chan struct{}) bool {
	select {
	case b.queue(m) <- m:
		return true
	case <-stop:
		return false
	case <-b.done:
		return false
	}
}

// tryDeliver queues m if there is room.
func (b *inbox) tryDeliver(m Message) bool {
	select {
	case <-b.done:
		return false
	default:
	}
	select {
	case b.queue(m) <- m:
		return true
	default:
		return false
	}
}

func (b *inbox) run() {
	defer close(b.out)
	for {
		var m Message
		select {
		case m = <-b.control:
		default:
			select {
			case m = <-b.control:
			case m = <-b.appends:
			case <-b.done:
				return
			}
		}
		select {
		case b.out <- m:
		case <-b.done:
			return
		}
	}
}

func (b *inbox) close() { b.stop.Do(func() { close(b.done) }) }
