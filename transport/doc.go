// Package transport carries edictlog's messages between processes: [TCP],
// the production implementation of edictlog.Transport (the interface is declared
// where the log consumes it). The messages themselves, one wire.Message
// envelope holding either a lease message of package elect or a log
// message, are package wire's, with the structural rules every message
// obeys (wire.Message.Validate); this package encodes them (message_wire.go,
// by hand; message_codec.go and msgpack.go, the snapshot header, with
// go-msgpack), frames, routes and delivers them. The encoding lives here,
// not in wire, because the handshake and the snapshot header use
// go-msgpack, whose codec package imports net/rpc and so net/http and
// crypto/tls: the log, which imports wire, does not encode messages and
// should not link them. (The simulator, internal/sim, has its own
// network.)
//
// # Guarantees
//
// Delivery is best effort — the lease protocol and the log tolerate loss
// and do not rely on order — but what is delivered can be trusted as far as
// structure goes:
//
//   - A message is delivered whole or not at all, to the process it is
//     addressed to, and only from the process that sent it: a connection's
//     messages must name the sender its handshake named.
//   - Every decoder validates what it decodes (unknown kinds, missing
//     sender or receiver, malformed stamps, bad sizes) and returns an
//     error, never a panic and never a half-valid value. Whether a stamp
//     covers a quorum of its epoch needs the epoch table and is left to
//     the log layer (edict.Stamp.Validate).
//   - Lease and other control messages never queue behind appends, on the
//     wire (their own connection) or in the receiver's inbox.
//   - A slow or hostile peer costs bounded memory and cannot hang a node:
//     frames are bounded, reads time out, a bad frame closes only its
//     connection, with a log line saying why.
//
// # Wire format (FrameVersion 10)
//
// Every frame is a 4-byte big-endian length n, then n bytes: the version
// byte FrameVersion and a body. The body is msgpack, with structs as
// arrays (what github.com/hashicorp/go-msgpack/v2 writes for the forms in
// msgpack.go and the layout in message_wire.go), except for snapshot
// chunks (raw bytes) and keepalives (empty). n is at most
// TCPConfig.MaxFrameSize, and at most 1 KiB until the handshake is done.
//
// A dialer opens a connection per lane and sends a hello (cluster id,
// sender, intended receiver, lane, on the bulk lane its window, and the
// address it listens at with its incarnation); the acceptor answers with
// acceptance or a refusal and its reason. Then:
//
//   - control lane: message frames, one way;
//   - bulk lane: Append and FetchReply frames one way, cumulative acks (the
//     count of frames delivered so far) the other, bounding the frames in
//     flight to the window the hello declared (TCPConfig.AppendWindow); the
//     receiver acks once an eighth of it is delivered unacked and its
//     input is drained, and at half of it at once;
//   - snapshot lane: a SnapshotMeta frame, chunk frames, an empty end
//     frame; then the receiver's result frame.
//
// # Addresses
//
// A hello says where its dialer listens, so that a process restarted on a
// new address is found again by every peer it connects to, before any
// operator or replicated change names the address: the acceptor reports
// it (TCP.WatchAddresses; edictlog.Node re-dials the peer there at once and,
// while it leads, makes the address the cluster's, Node.SetAddress). An
// address is reported only from a peer that proves its identity as far as
// the transport can: with mutual TLS, only when the peer's certificate
// names the node id the hello claims (TLSFiles, node ids in certificates);
// without TLS, from any peer that knows the cluster id, as etcd's members
// trust their network without TLS. A peer's address from an earlier life
// (a lower incarnation than one heard from it) is not reported.
//
// Any change to a message encoding (message_wire.go, msgpack.go) or to
// this layout bumps FrameVersion; peers of different versions refuse each
// other's frames.
package transport
