package edictlog

import (
	"context"
	"io"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
)

// Transport moves Messages and snapshot streams between the processes of a
// cluster. It is used by the Node runtime goroutine, not by the pure
// cores; package transport's TCP is the production implementation. Implementations are safe for concurrent use.
//
// Delivery is best effort, as the protocols above it assume: a message
// may be lost (a connection breaks, a peer is down, a queue is full), but
// it is never altered, never delivered to the wrong process, never
// accepted from a process other than its sender, and the lease protocol
// does not rely on order (it orders a sender's messages by the sender's
// own clock readings, docs/protocol.md, "Leases").
type Transport interface {
	// ID is the local process.
	ID() edict.ProcessID

	// Send validates m and queues it for to. It does not wait for the
	// network: it returns once m is encoded and queued, waiting only for
	// room in the queue (or, for an Append or FetchReply, in the window of
	// bulk messages in flight) until ctx is done. m.From and m.To may be left zero; they are
	// filled in with the local process and to. The caller may reuse m's
	// payload when Send returns.
	Send(ctx context.Context, to edict.ProcessID, m wire.Message) error

	// Receive returns the channel of messages for this process. Lease and
	// other control messages are handed out before queued appends and
	// fetch replies. It is closed by Close.
	Receive() <-chan wire.Message

	// SendSnapshot streams header.Size bytes from r to the peer without
	// holding the snapshot in memory, and returns once the receiver has
	// reported its outcome (nil if it installed the snapshot). It blocks
	// until then or until ctx is done.
	SendSnapshot(ctx context.Context, to edict.ProcessID, meta wire.SnapshotHeader, r io.Reader) error

	// Snapshots returns the channel of incoming snapshot streams. The
	// receiver reads each to its end and must call Finish. A stream that
	// no one takes from the channel soon (TCP: within HandshakeTimeout) is
	// refused as "receiver busy". It is closed by Close.
	Snapshots() <-chan *wire.IncomingSnapshot

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

// AddressAnnouncer is a Transport whose connections say where their
// dialer listens (transport.TCP is one). A Node whose Transport is one
// announces itself when it starts, and learns where a peer restarted on a
// new address listens as soon as the peer connects: it reaches the peer
// there at once, and, while it leads, makes the address the cluster's
// (Node.SetAddress), so that a member restarted on a new address serves
// again without an operator's call.
type AddressAnnouncer interface {
	// Announce sets the incarnation sent with this process's address to
	// the peers it connects to, and connects to each known peer now.
	Announce(incarnation uint64)
	// WatchAddresses has f called with each address a peer announces
	// and the incarnation it announces it in, only for a peer that proves
	// its id (with TLS, by its certificate) and never for an incarnation
	// below one heard from it. f must be quick and must not call the
	// transport.
	WatchAddresses(f func(id edict.ProcessID, addr string, incarnation uint64))
}
