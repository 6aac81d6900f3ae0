package transport

import (
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
)

// lane is what a TCP connection carries, declared in its handshake. Each
// peer pair has a control lane and a bulk lane, so that lease messages
// never wait behind megabytes of entries, and one connection per snapshot
// stream.
type lane uint8

const (
	// laneControl carries every message but the bulk ones, one way.
	laneControl lane = iota + 1
	// laneBulk carries Append and FetchReply one way and cumulative acks
	// back, which bound the frames in flight to the window the dialer's
	// hello declares (TCPConfig.AppendWindow).
	laneBulk
	// laneSnapshot carries one SnapshotMeta, the stream, and the result.
	laneSnapshot
)

func (l lane) String() string {
	switch l {
	case laneControl:
		return "control"
	case laneBulk:
		return "bulk"
	case laneSnapshot:
		return "snapshot"
	}
	return fmt.Sprintf("lane(%d)", uint8(l))
}

// MaxClusterIDLen bounds a cluster id.
const MaxClusterIDLen = 255

// maxHandshakeFrame bounds frames before the peer is authenticated: until
// the handshake is accepted a connection may not make us buffer more.
const maxHandshakeFrame = 1024

// maxReasonLen bounds a refusal's reason and a snapshot result's error.
const maxReasonLen = 512

// hello is the first frame on every connection, from the dialer.
type hello struct {
	_struct bool `codec:",toarray"` // msgpack array, not map
	Cluster string
	From    uint64
	To      uint64 // whom the dialer believes it reached
	Lane    uint8
	// Window is, on the bulk lane, how many frames the dialer sends
	// before it waits for an ack (its AppendWindow); 0 on the others. The
	// receiver acks often enough for it (ackEvery).
	Window uint32
	// Addr is where the dialer listens for its peers (TCP.LocalAddr, when
	// peers can dial it), so that a process restarted on a new address is
	// found by the peers it connects to; empty when it listens on an
	// address no peer could dial (an unspecified host and no
	// TCPConfig.AdvertiseAddr). Incarnation is the dialer's life
	// (TCP.Announce), higher in every later life of the same store: a
	// receiver that heard a higher one for the same process ignores the
	// address, which is an earlier life's. 0 before Announce.
	Addr        string
	Incarnation uint64
}

func (h *hello) validate() error {
	switch {
	case h.Cluster == "":
		return errors.New("hello without a cluster id")
	case len(h.Cluster) > MaxClusterIDLen:
		return fmt.Errorf("hello with a cluster id of %d bytes, limit %d", len(h.Cluster), MaxClusterIDLen)
	case !utf8.ValidString(h.Cluster):
		return errors.New("hello with a cluster id that is not UTF-8")
	case h.From == uint64(edict.None):
		return errors.New("hello without a sender")
	case h.To == uint64(edict.None):
		return errors.New("hello without a receiver")
	case lane(h.Lane) < laneControl || lane(h.Lane) > laneSnapshot:
		return fmt.Errorf("hello for unknown lane %d", h.Lane)
	case lane(h.Lane) == laneBulk && h.Window == 0:
		return errors.New("hello for the bulk lane without a window")
	case lane(h.Lane) != laneBulk && h.Window != 0:
		return fmt.Errorf("hello for the %s lane with a window", lane(h.Lane))
	case len(h.Addr) > wire.MaxAddrLen:
		return fmt.Errorf("hello with an address of %d bytes, limit %d", len(h.Addr), wire.MaxAddrLen)
	case !utf8.ValidString(h.Addr):
		return errors.New("hello with an address that is not UTF-8")
	}
	return nil
}

// ackEvery is how many delivered bulk frames a receiver lets go unacked
// while more are coming, for a dialer whose window is window: an eighth
// of it. An ack per frame was a write and a read, and a wake-up of the
// dialer's ack reader, for every append; an eighth leaves the dialer at
// least seven eighths of its window, and a dialer that waits on a full
// window has sent more than that, so it always gets one.
func ackEvery(window uint32) uint64 { return max(1, uint64(window)/8) }

func decodeHello(body []byte) (hello, error) {
	var h hello
	if err := decodeBody("hello", body, &h); err != nil {
		return hello{}, err
	}
	if err := h.validate(); err != nil {
		return hello{}, fmt.Errorf("transport: decode hello: %w", err)
	}
	return h, nil
}

// helloReply answers a hello. A refusal says why, so the dialer's log
// names the problem (wrong cluster, wrong node) instead of "EOF".
type helloReply struct {
	_struct bool `codec:",toarray"` // msgpack array, not map
	OK      bool
	Reason  string
}

func decodeHelloReply(body []byte) (helloReply, error) {
	var r helloReply
	if err := decodeBody("hello reply", body, &r); err != nil {
		return helloReply{}, err
	}
	switch {
	case r.OK && r.Reason != "":
		return helloReply{}, errors.New("transport: decode hello reply: acceptance with a reason")
	case !r.OK && r.Reason == "":
		return helloReply{}, errors.New("transport: decode hello reply: refusal without a reason")
	case len(r.Reason) > maxReasonLen:
		return helloReply{}, fmt.Errorf("transport: decode hello reply: reason of %d bytes, limit %d", len(r.Reason), maxReasonLen)
	}
	return r, nil
}

// decodeAck decodes a bulk-lane ack: the number of bulk frames the
// receiver has delivered on this connection so far.
func decodeAck(body []byte) (uint64, error) {
	var n uint64
	if err := decodeBody("ack", body, &n); err != nil {
		return 0, err
	}
	return n, nil
}

// snapshotResult ends a snapshot stream: the receiver's verdict.
type snapshotResult struct {
	_struct bool `codec:",toarray"` // msgpack array, not map
	Err     string
}

func decodeSnapshotResult(body []byte) (snapshotResult, error) {
	var r snapshotResult
	if err := decodeBody("snapshot result", body, &r); err != nil {
		return snapshotResult{}, err
	}
	if len(r.Err) > maxReasonLen {
		return snapshotResult{}, fmt.Errorf("transport: decode snapshot result: error of %d bytes, limit %d", len(r.Err), maxReasonLen)
	}
	return r, nil
}

func truncateReason(s string) string {
	if len(s) <= maxReasonLen {
		return s
	}
	// Cut on a rune boundary so the result stays valid UTF-8.
	cut := maxReasonLen
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
