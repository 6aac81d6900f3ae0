package bully

import (
	"errors"
	"fmt"

	"github.com/edictlog/edictlog/edict"
	"github.com/hashicorp/go-msgpack/v2/codec"
)

// Type names a message as the slides do.
type Type uint8

// Bully's messages ("The Bully Election Algorithm", "The Actual Bully
// Algorithm") and Invitation's ("The Invitation Algorithm (1/2), (2/2)").
const (
	// MsgAreYouThere is ARE-U-THERE: a candidate's probe of stronger nodes
	// (Bully phase 1), a follower's probe of its coordinator.
	MsgAreYouThere Type = iota + 1
	// MsgAYTAnswer is the YES to ARE-U-THERE; OK says whether the answerer is
	// coordinator of the asked group (Invitation).
	MsgAYTAnswer
	// MsgHalt is Bully phase 2 step 1.
	MsgHalt
	// MsgHaltAck is the RPC reply to Halt that puts the node in Up.
	MsgHaltAck
	// MsgNewCoordinator is NEW-LEADER (phase 2 step 2).
	MsgNewCoordinator
	// Ready ends a reorganization: S(k).s := Normal.
	MsgReady
	// MsgAreYouNormal is Check's ARE-U-NORMAL; NormalAnswer its YES/NO (OK).
	MsgAreYouNormal
	MsgNormalAnswer
	// MsgAreYouCoordinator is ARE-U-LEADER; AYCAnswer its reply (OK: yes).
	MsgAreYouCoordinator
	MsgAYCAnswer
	// Invitation invites into group G (of coordinator G.Creator); a
	// coordinator forwards it to its members.
	MsgInvitation
	// Accept accepts the invitation to G.
	MsgAccept
)

var typeNames = [...]string{MsgAreYouThere: "AreYouThere", MsgAYTAnswer: "AYTAnswer", MsgHalt: "Halt", MsgHaltAck: "HaltAck",
	MsgNewCoordinator: "NewCoordinator", MsgReady: "Ready", MsgAreYouNormal: "AreYouNormal", MsgNormalAnswer: "NormalAnswer",
	MsgAreYouCoordinator: "AreYouCoordinator", MsgAYCAnswer: "AYCAnswer", MsgInvitation: "Invitation", MsgAccept: "Accept"}

func (t Type) String() string {
	if t >= MsgAreYouThere && t <= MsgAccept {
		return typeNames[t]
	}
	return fmt.Sprintf("Type(%d)", uint8(t))
}

// Message is one message of either algorithm. G is the election (Bully)
// or group (Invitation) it belongs to; replies echo the request's G.
type Message struct {
	Type Type
	G    Group
	OK   bool
}

// Version is the first byte of an encoded Message; others are refused.
const Version byte = 1

// maxMessage bounds a payload: a message is a handful of integers.
const maxMessage = 64

type wire struct {
	_struct bool `codec:",toarray"` //nolint:unused // msgpack array layout
	Type    uint8
	Creator uint64
	Inc     uint64
	Seq     uint64
	OK      bool
}

var mh = func() *codec.MsgpackHandle {
	h := &codec.MsgpackHandle{WriteExt: true}
	h.ErrorIfNoField = true
	h.MaxInitLen = 16
	return h
}()

// Encode returns the version byte and msgpack form of m.
func (m Message) Encode() []byte {
	var out []byte
	w := wire{Type: uint8(m.Type), Creator: uint64(m.G.Creator), Inc: m.G.Incarnation, Seq: m.G.Seq, OK: m.OK}
	if err := codec.NewEncoderBytes(&out, mh).Encode(&w); err != nil {
		panic("bully: encode: " + err.Error()) // a fixed struct of integers always encodes
	}
	return append([]byte{Version}, out...)
}

// Decode parses a payload written by Encode. It refuses unknown versions
// and types, and trailing bytes; it never panics.
func Decode(b []byte) (m Message, err error) {
	switch {
	case len(b) == 0:
		return Message{}, errors.New("bully: decode: empty")
	case len(b) > maxMessage:
		return Message{}, fmt.Errorf("bully: decode: %d bytes", len(b))
	case b[0] != Version:
		return Message{}, fmt.Errorf("bully: decode: unknown version %d", b[0])
	}
	defer func() { // belt and braces: the decoder is third-party code
		if r := recover(); r != nil {
			m, err = Message{}, fmt.Errorf("bully: decode: %v", r)
		}
	}()
	var w wire
	d := codec.NewDecoderBytes(b[1:], mh)
	if err := d.Decode(&w); err != nil {
		return Message{}, fmt.Errorf("bully: decode: %w", err)
	}
	if n := d.NumBytesRead(); n != len(b)-1 {
		return Message{}, fmt.Errorf("bully: decode: %d trailing bytes", len(b)-1-n)
	}
	m = Message{Type: Type(w.Type), G: Group{Creator: edict.ProcessID(w.Creator), Incarnation: w.Inc, Seq: w.Seq}, OK: w.OK}
	if m.Type < MsgAreYouThere || m.Type > MsgAccept {
		return Message{}, fmt.Errorf("bully: decode: unknown type %d", w.Type)
	}
	return m, nil
}
