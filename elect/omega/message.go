package omega

import (
	"errors"
	"fmt"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

// Kind is a message type of the figures.
type Kind uint8

const (
	// OK (k): the leader of round k is alive (task 0 of every figure).
	OK Kind = iota + 1
	// Start (k): move to round k (Fig. 1 line 2 to the round's leader;
	// Figs. 3, 4 line 2 to all; Fig. 4 line 24 in reply to an old round).
	Start
	// Stop (k): the sender timed out on round k; its leader abdicates
	// (Fig. 2 lines 19, 21).
	Stop
	// Alert (k): someone started round k; do not elect for AlertWindow
	// (Fig. 4 lines 1, 25; Fig. 5 line 20).
	Alert
	// Ping (k): who is alive? (Fig. 5 line 20.1.)
	Ping
	// Pong (k): I am (Fig. 5 line 20.8).
	Pong
)

func (k Kind) String() string {
	switch k {
	case OK:
		return "OK"
	case Start:
		return "START"
	case Stop:
		return "STOP"
	case Alert:
		return "ALERT"
	case Ping:
		return "PING"
	case Pong:
		return "PONG"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Message is (Kind, Round), as every figure writes its messages.
type Message struct {
	Kind  Kind   `codec:"k"`
	Round uint64 `codec:"r"`
}

// WireVersion is the first byte of every encoded message; a decoder
// refuses any other.
const WireVersion byte = 1

// maxMessageSize bounds an encoded message: a version byte and a two-field
// map is at most 1+1+2+2+9 bytes.
const maxMessageSize = 32

// MaxRound bounds a message's round. Rounds grow by one per timeout, so
// an honest process never nears it; refusing more keeps r+1, k+1 and
// Fig. 5's r+n from wrapping around on a forged round.
const MaxRound = 1 << 62

// ErrInvalid is wrapped by every decoding error.
var ErrInvalid = errors.New("omega: invalid message")

var mh = func() *codec.MsgpackHandle {
	h := &codec.MsgpackHandle{}
	h.ErrorIfNoField = true
	h.MaxInitLen = 8
	return h
}()

// Encode returns the version byte followed by m in msgpack.
func Encode(m Message) []byte {
	var b []byte
	// Encoding a struct of two scalars into a byte slice cannot fail.
	if err := codec.NewEncoderBytes(&b, mh).Encode(&m); err != nil {
		panic(fmt.Sprintf("omega: encode %v: %v", m, err))
	}
	return append([]byte{WireVersion}, b...)
}

// Decode parses a message written by Encode. It refuses an unknown version
// or kind, an oversized input and trailing bytes, and never panics.
func Decode(b []byte) (Message, error) {
	switch {
	case len(b) == 0:
		return Message{}, fmt.Errorf("%w: empty", ErrInvalid)
	case len(b) > maxMessageSize:
		return Message{}, fmt.Errorf("%w: %d bytes", ErrInvalid, len(b))
	case b[0] != WireVersion:
		return Message{}, fmt.Errorf("%w: version %d", ErrInvalid, b[0])
	}
	var m Message
	d := codec.NewDecoderBytes(b[1:], mh)
	if err := d.Decode(&m); err != nil {
		return Message{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if n := d.NumBytesRead(); n != len(b)-1 {
		return Message{}, fmt.Errorf("%w: %d trailing bytes", ErrInvalid, len(b)-1-n)
	}
	if m.Kind < OK || m.Kind > Pong {
		return Message{}, fmt.Errorf("%w: kind %d", ErrInvalid, m.Kind)
	}
	if m.Round > MaxRound {
		return Message{}, fmt.Errorf("%w: round %d", ErrInvalid, m.Round)
	}
	return m, nil
}
