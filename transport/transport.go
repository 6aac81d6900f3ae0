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
type inbox struct {
	control chan wire.Message
	appends chan wire.Message
	out     chan wire.Message
	done    chan struct{}
	stop    sync.Once
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
func (b *inbox) tryDeliver(m wire.Message) bool {
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
