package gossip

import (
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/edictlog/edictlog/edict"
	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/memberlist"
)

// MetaVersion is the first byte of encoded metadata; other versions are
// refused, not guessed at.
const MetaVersion byte = 1

// MaxAddrLen bounds each address in Meta, so that the whole always fits
// memberlist's limit (memberlist.MetaMaxSize, 512 bytes) with room to spare.
const MaxAddrLen = 200

// Meta is what a node tells the others about itself through memberlist.
type Meta struct {
	ID            edict.ProcessID
	Epoch         uint64
	TransportAddr string // where its transport listens
	APIAddr       string // where its client API listens (for redirects)
	// Leader is the process this node believes holds the lease — itself
	// while it is the leader — or None. It is a hint: stale by up to the
	// hint TTL, and wrong during a takeover.
	Leader edict.ProcessID
}

// wireMeta is Meta as a msgpack array: field names would cost bytes of
// the 512 memberlist allows, and the layout stays this package's own.
type wireMeta struct {
	_struct   bool `codec:",toarray"` // msgpack array, not map
	ID        uint64
	Epoch     uint64
	Transport string
	API       string
	Leader    uint64
}

func handle() *codec.MsgpackHandle {
	h := &codec.MsgpackHandle{WriteExt: true}
	h.ErrorIfNoField = true
	h.MaxInitLen = 64
	return h
}

var mh = handle()

func (m Meta) validate() error {
	switch {
	case m.ID == edict.None:
		return errors.New("metadata without a node id")
	case len(m.TransportAddr) > MaxAddrLen || len(m.APIAddr) > MaxAddrLen:
		return fmt.Errorf("metadata address longer than %d bytes", MaxAddrLen)
	case !utf8.ValidString(m.TransportAddr) || !utf8.ValidString(m.APIAddr):
		return errors.New("metadata address is not UTF-8")
	}
	return nil
}

// Encode returns the version byte and msgpack form of m, checked against
// memberlist's metadata limit (memberlist panics on oversized metadata, so
// it is refused here, where the caller can handle it).
func (m Meta) Encode() ([]byte, error) {
	if err := m.validate(); err != nil {
		return nil, fmt.Errorf("gossip: encode metadata: %w", err)
	}
	out := make([]byte, 0, 64)
	w := wireMeta{ID: uint64(m.ID), Epoch: m.Epoch, Transport: m.TransportAddr, API: m.APIAddr, Leader: uint64(m.Leader)}
	if err := codec.NewEncoderBytes(&out, mh).Encode(&w); err != nil {
		return nil, fmt.Errorf("gossip: encode metadata: %w", err)
	}
	b := append([]byte{MetaVersion}, out...)
	if len(b) > memberlist.MetaMaxSize {
		return nil, fmt.Errorf("gossip: metadata of %d bytes exceeds memberlist's limit of %d", len(b), memberlist.MetaMaxSize)
	}
	return b, nil
}

// DecodeMeta parses metadata written by Encode. Gossip is input from the
// network: anything malformed is an error, never a panic.
func DecodeMeta(b []byte) (Meta, error) {
	switch {
	case len(b) == 0:
		return Meta{}, errors.New("gossip: decode metadata: empty")
	case len(b) > memberlist.MetaMaxSize:
		return Meta{}, fmt.Errorf("gossip: decode metadata: %d bytes exceeds the limit of %d", len(b), memberlist.MetaMaxSize)
	case b[0] != MetaVersion:
		return Meta{}, fmt.Errorf("gossip: decode metadata: unknown version byte %d (want %d)", b[0], MetaVersion)
	}
	var w wireMeta
	d := codec.NewDecoderBytes(b[1:], mh)
	if err := d.Decode(&w); err != nil {
		return Meta{}, fmt.Errorf("gossip: decode metadata: %w", err)
	}
	if n := d.NumBytesRead(); n != len(b)-1 {
		return Meta{}, fmt.Errorf("gossip: decode metadata: %d trailing bytes", len(b)-1-n)
	}
	m := Meta{ID: edict.ProcessID(w.ID), Epoch: w.Epoch, TransportAddr: w.Transport, APIAddr: w.API, Leader: edict.ProcessID(w.Leader)}
	if err := m.validate(); err != nil {
		return Meta{}, fmt.Errorf("gossip: decode metadata: %w", err)
	}
	return m, nil
}
