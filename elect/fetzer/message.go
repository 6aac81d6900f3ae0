package fetzer

import (
	"errors"
	"fmt"
	"slices"

	"github.com/edictlog/edictlog/edict"
	"github.com/hashicorp/go-msgpack/v2/codec"
)

// WireVersion is the first byte of every message; other versions are
// refused, not guessed at.
const WireVersion byte = 1

// maxMessageSize bounds an encoded message: two sets of MaxMembers ids of
// at most 9 bytes each, and a few stamps.
const maxMessageSize = 2*9*MaxMembers + 256

// Kind is a message type of Fig. 30.
type Kind uint8

const (
	// Election ("Election", request, alive): a candidate asks for support.
	Election Kind = iota + 1
	// Reply ("Reply", request, support): the answer to an Election.
	Reply
	// Release ("Release", request): a failed candidate frees its locks.
	Release
)

func (k Kind) String() string {
	switch k {
	case Election:
		return "Election"
	case Reply:
		return "Reply"
	case Release:
		return "Release"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Message is one message of the protocol. Kind, Request, Alive and
// Supportive are the paper's fields (Fig. 30). Support is the piggy-back of
// §X: a leader sends its support set, its logical partition, with its
// next Election, so that followers know it. SentAt, Echo and Held are the
// fail-aware datagram service's time stamps (§IV, [23]), see fast.go.
type Message struct {
	Kind Kind
	// Request identifies the Election (the candidate's clock reading when
	// it sent it) that a Reply or Release is about.
	Request edict.Time
	// Alive is the candidate's alive-set at Request (Election only).
	Alive []edict.ProcessID
	// Support is the candidate's support set if it was leader when it
	// sent the Election; empty otherwise.
	Support []edict.ProcessID
	// Supportive: the Reply supports the candidate (locks its sender).
	Supportive bool

	// SentAt is the sender's clock when it sent this message.
	SentAt edict.Time
	// Echo is the SentAt of the last message the sender received from the
	// receiver (zero if none), and Held how long, on the sender's clock,
	// it had held that message when it sent this one.
	Echo edict.Time
	Held int64
}

// wireMessage is Message as a msgpack array.
type wireMessage struct {
	_struct    bool `codec:",toarray"`
	Kind       uint8
	ReqInc     uint64
	ReqNanos   int64
	Alive      []uint64
	Support    []uint64
	Supportive bool
	SentInc    uint64
	SentNanos  int64
	EchoInc    uint64
	EchoNanos  int64
	Held       int64
}

var mh = func() *codec.MsgpackHandle {
	h := &codec.MsgpackHandle{WriteExt: true}
	h.ErrorIfNoField = true
	h.MaxInitLen = 64
	return h
}()

// ErrInvalid is wrapped by every decoding error.
var ErrInvalid = errors.New("fetzer: invalid message")

func (m *Message) validate() error {
	switch {
	case m.Kind < Election || m.Kind > Release:
		return fmt.Errorf("unknown kind %d", m.Kind)
	case len(m.Alive) > MaxMembers || len(m.Support) > MaxMembers:
		return fmt.Errorf("a set of more than %d members", MaxMembers)
	case m.Held < 0:
		return fmt.Errorf("negative hold time %d", m.Held)
	case m.Kind != Election && (len(m.Alive) > 0 || len(m.Support) > 0):
		return fmt.Errorf("%v carrying sets", m.Kind)
	case m.Kind != Reply && m.Supportive:
		return fmt.Errorf("%v marked supportive", m.Kind)
	}
	for _, set := range [][]edict.ProcessID{m.Alive, m.Support} {
		for i, p := range set {
			if p == edict.None || (i > 0 && set[i-1] >= p) {
				return errors.New("a set that is not strictly increasing ids ≥ 1")
			}
		}
	}
	return nil
}

func ids(in []edict.ProcessID) []uint64 {
	if len(in) == 0 {
		return nil
	}
	out := make([]uint64, len(in))
	for i, p := range in {
		out[i] = uint64(p)
	}
	return out
}

func pids(in []uint64) []edict.ProcessID {
	if len(in) == 0 {
		return nil
	}
	out := make([]edict.ProcessID, len(in))
	for i, p := range in {
		out[i] = edict.ProcessID(p)
	}
	return out
}

// Encode returns the version byte and msgpack form of m.
func (m Message) Encode() ([]byte, error) {
	if err := m.validate(); err != nil {
		return nil, fmt.Errorf("fetzer: encode: %w", err)
	}
	w := wireMessage{Kind: uint8(m.Kind), ReqInc: m.Request.Incarnation, ReqNanos: m.Request.Nanos,
		Alive: ids(m.Alive), Support: ids(m.Support), Supportive: m.Supportive,
		SentInc: m.SentAt.Incarnation, SentNanos: m.SentAt.Nanos,
		EchoInc: m.Echo.Incarnation, EchoNanos: m.Echo.Nanos, Held: m.Held}
	out := []byte{WireVersion}
	body := make([]byte, 0, 64)
	if err := codecEncode(&body, &w); err != nil {
		return nil, fmt.Errorf("fetzer: encode: %w", err)
	}
	return append(out, body...), nil
}

// Decode parses a message written by Encode. It refuses unknown versions,
// trailing bytes and invalid fields (wrapping ErrInvalid) and never panics.
func Decode(b []byte) (Message, error) {
	switch {
	case len(b) == 0:
		return Message{}, fmt.Errorf("%w: empty", ErrInvalid)
	case len(b) > maxMessageSize:
		return Message{}, fmt.Errorf("%w: %d bytes exceeds %d", ErrInvalid, len(b), maxMessageSize)
	case b[0] != WireVersion:
		return Message{}, fmt.Errorf("%w: version %d (want %d)", ErrInvalid, b[0], WireVersion)
	}
	var w wireMessage
	d := codec.NewDecoderBytes(b[1:], mh)
	if err := d.Decode(&w); err != nil {
		return Message{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if n := d.NumBytesRead(); n != len(b)-1 {
		return Message{}, fmt.Errorf("%w: %d trailing bytes", ErrInvalid, len(b)-1-n)
	}
	m := Message{Kind: Kind(w.Kind), Request: edict.Time{Incarnation: w.ReqInc, Nanos: w.ReqNanos},
		Alive: pids(w.Alive), Support: pids(w.Support), Supportive: w.Supportive,
		SentAt: edict.Time{Incarnation: w.SentInc, Nanos: w.SentNanos},
		Echo:   edict.Time{Incarnation: w.EchoInc, Nanos: w.EchoNanos}, Held: w.Held}
	if err := m.validate(); err != nil {
		return Message{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return m, nil
}

// equal reports whether two messages are the same (for round trips).
func (m Message) equal(o Message) bool {
	return m.Kind == o.Kind && m.Request == o.Request && slices.Equal(m.Alive, o.Alive) &&
		slices.Equal(m.Support, o.Support) && m.Supportive == o.Supportive &&
		m.SentAt == o.SentAt && m.Echo == o.Echo && m.Held == o.Held
}

// codecEncode is the bare msgpack encoding (for tests that forge input).
func codecEncode(out *[]byte, v any) error { return codec.NewEncoderBytes(out, mh).Encode(v) }
