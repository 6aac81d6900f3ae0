package stoller

import (
	"errors"
	"fmt"

	"github.com/hashicorp/go-msgpack/v2/codec"

	"github.com/edictlog/edictlog/edict"
)

// WireVersion is the first byte of every encoded Message; Decode refuses
// any other.
const WireVersion byte = 1

// Decoder bounds against hostile input: a message is small (the ring
// token, the largest, carries one stamp per member).
const (
	MaxMessageSize = 64 << 10
	MaxMembers     = 1024
)

// Kind names a message as the paper does (Figures 1 and 3, §2).
type Kind uint8

const (
	// Election messages, Figures 1 and 3.
	Halt    Kind = iota + 1 // ⟨Halt, elid⟩: prepare for a new leader
	Ack                     // ⟨Ack, elid⟩: halted
	Rej                     // ⟨Rej, elid⟩: refuses a lower-priority leader (Fig. 3 only)
	Ldr                     // ⟨Ldr, elid⟩: the organiser is the leader
	NormQ                   // ⟨Norm?, elid⟩: the leader's periodic check
	NotNorm                 // ⟨NotNorm, elid⟩: reply to Norm? asking for an election
	// Failure-detector messages, §2's three sketches.
	AreYouAlive // ping FD: "Are you alive?"
	Yes         // ping FD: the reply
	SendAlive   // I'm-alive FD: "send me I'm alive messages"
	ImAlive     // I'm-alive FD: the periodic message
	StopAlive   // I'm-alive FD: stop sending them
	Token       // ring FD: the circulating attendance list
	TokenAck    // ring FD: the successor took the token
	maxKind
)

var kindNames = [...]string{"?", "Halt", "Ack", "Rej", "Ldr", "Norm?", "NotNorm",
	"AreYouAlive", "Yes", "SendAlive", "ImAlive", "StopAlive", "Token", "TokenAck"}

func (k Kind) String() string {
	if k < maxKind {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Election reports whether k is one of the election algorithm's own
// messages (as opposed to the failure detector's), for message counts.
func (k Kind) Election() bool { return k >= Halt && k <= NotNorm }

// Elid is an election identifier (§4): the organiser, its incarnation and
// a sequence number. In §7 it is also the group identifier grp.
type Elid struct {
	Node   edict.ProcessID `codec:"n"`
	Incarn uint64          `codec:"i"`
	Seq    uint64          `codec:"s"`
}

// Stamp is one member's entry in the ring FD's attendance list: how often
// it has held the token, and to whom it is playing dead (§7's PlayDead).
type Stamp struct {
	Node   edict.ProcessID   `codec:"n"`
	Visits uint64            `codec:"v"`
	Hidden []edict.ProcessID `codec:"h"`
}

// Message is every message of both algorithms and the three FDs. Inc, the
// sender's incarnation, is on every message: the oracle FD uses it to
// learn of a recovery (§2: "recoveries ... are easily detected by the
// application when it receives a message from a recovering node").
type Message struct {
	Kind Kind   `codec:"k"`
	Inc  uint64 `codec:"c"`
	// Link is the per-link sequence number of the FIFO layer (fifo.go).
	Link uint64 `codec:"l"`
	Elid Elid   `codec:"e"`
	// Seq numbers FD probes and token hops.
	Seq uint64 `codec:"q"`
	// Epoch and Origin order ring tokens: a regenerated token has a
	// higher (Epoch, Origin) and supersedes the old one.
	Epoch  uint64          `codec:"p"`
	Origin edict.ProcessID `codec:"o"`
	Stamps []Stamp         `codec:"a"`
}

// ErrInvalid is wrapped by every Decode error.
var ErrInvalid = errors.New("stoller: invalid message")

var mh = func() *codec.MsgpackHandle {
	h := &codec.MsgpackHandle{WriteExt: true}
	h.ErrorIfNoField = true
	h.MaxInitLen = 64
	return h
}()

// Encode writes the version byte and the msgpack form of m.
func Encode(m Message) []byte {
	var buf []byte
	if err := codec.NewEncoderBytes(&buf, mh).Encode(&m); err != nil {
		// Only a programming error (an unencodable type) gets here.
		panic(fmt.Sprintf("stoller: encode %v: %v", m.Kind, err))
	}
	return append([]byte{WireVersion}, buf...)
}

// Decode checks the version byte and size, decodes exactly one Message,
// refuses trailing bytes and validates it. It never panics.
func Decode(b []byte) (m Message, err error) {
	switch {
	case len(b) == 0:
		return Message{}, fmt.Errorf("%w: empty", ErrInvalid)
	case len(b) > MaxMessageSize:
		return Message{}, fmt.Errorf("%w: %d bytes", ErrInvalid, len(b))
	case b[0] != WireVersion:
		return Message{}, fmt.Errorf("%w: unknown version %d", ErrInvalid, b[0])
	}
	defer func() {
		// go-msgpack is not trusted never to panic on hostile input.
		if r := recover(); r != nil {
			m, err = Message{}, fmt.Errorf("%w: %v", ErrInvalid, r)
		}
	}()
	d := codec.NewDecoderBytes(b[1:], mh)
	if err := d.Decode(&m); err != nil {
		return Message{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if n := d.NumBytesRead(); n != len(b)-1 {
		return Message{}, fmt.Errorf("%w: %d trailing bytes", ErrInvalid, len(b)-1-n)
	}
	if m.Kind == 0 || m.Kind >= maxKind {
		return Message{}, fmt.Errorf("%w: kind %d", ErrInvalid, m.Kind)
	}
	if len(m.Stamps) > MaxMembers {
		return Message{}, fmt.Errorf("%w: %d stamps", ErrInvalid, len(m.Stamps))
	}
	for _, s := range m.Stamps {
		if len(s.Hidden) > MaxMembers {
			return Message{}, fmt.Errorf("%w: %d hidden", ErrInvalid, len(s.Hidden))
		}
	}
	return m, nil
}
