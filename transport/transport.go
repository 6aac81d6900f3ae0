package transport

import (
	"errors"
	"sync"

	"github.com/edictlog/edictlog/wire"
)

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

// inbox hands received messages to the runtime, control messages first.
// Two queues, not one: a lease message that arrives behind a thousand
// queued appends must not wait for the runtime to work through them.
//
// A message that finds the runtime waiting on out and nothing queued
// before it is handed over at once by its receiving goroutine (handOver):
// through the queues and the goroutine that drains them it costs one more
// goroutine switch, on the path of every append and every reply.
type inbox struct {
	control chan wire.Message
	appends chan wire.Message
	out     chan wire.Message
	done    chan struct{}
	stop    sync.Once
	// outMu keeps a hand-over from sending on out once run closes it.
	outMu     sync.RWMutex
	outClosed bool
}

func newInbox(controlCap, appendCap int) *inbox {
	b := &inbox{
		control: make(chan wire.Message, controlCap),
		appends: make(chan wire.Message, appendCap),
		// Unbuffered: the choice of which message goes next is made when
		// the runtime is ready for one, so priority holds.
		out:  make(chan wire.Message),
		done: make(chan struct{}),
	}
	go b.run()
	return b
}

func (b *inbox) queue(m wire.Message) chan wire.Message {
	if m.Kind().Bulk() {
		return b.appends
	}
	return b.control
}

// deliver queues m, waiting for room until stop or the inbox closes. It
// reports whether m was queued.
func (b *inbox) deliver(m wire.Message, stop <-chan struct{}) bool {
	if b.handOver(m) {
		return true
	}
	select {
	case b.queue(m) <- m:
		return true
	case <-stop:
		return false
	case <-b.done:
		return false
	}
}

// handOver gives m to the runtime if it is waiting for a message and
// none that should go first is queued: a control message goes before any
// append, and neither before one of its own kind queued earlier. The
// drainer may hold one message it took, on its way to out; a message
// handed over now passes it, as it could pass a message that arrived a
// moment later.
func (b *inbox) handOver(m wire.Message) bool {
	if len(b.control) > 0 || m.Kind().Bulk() && len(b.appends) > 0 {
		return false
	}
	b.outMu.RLock()
	defer b.outMu.RUnlock()
	if b.outClosed {
		return false
	}
	select {
	case b.out <- m:
		return true
	default:
		return false
	}
}

// tryDeliver queues m if there is room.
func (b *inbox) tryDeliver(m wire.Message) bool {
	select {
	case <-b.done:
		return false
	default:
	}
	if b.handOver(m) {
		return true
	}
	select {
	case b.queue(m) <- m:
		return true
	default:
		return false
	}
}

func (b *inbox) run() {
	defer func() {
		b.outMu.Lock()
		b.outClosed = true
		close(b.out)
		b.outMu.Unlock()
	}()
	for {
		var m wire.Message
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
