package wire

import (
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/mpack"
)

// Membership is the payload of config and stop edicts (EntryConfig,
// EntryStop): an epoch's configuration and the transport addresses of its
// processes, so that every process learns how to reach a new one from the
// log itself.
type Membership struct {
	Config EpochConfig
	Addrs  map[edict.ProcessID]string
}

// MembershipVersion is the first byte of an encoded Membership.
const MembershipVersion byte = 1

var membershipFields = []string{"Addrs", "Config"}

// appendMembership writes the fields under their Go names (Membership has
// no codec tags) and Addrs in process order, which is go-msgpack's
// Canonical order; without Canonical go-msgpack wrote them in Go's map
// order, which the decoder reads as well.
func appendMembership(dst []byte, m *Membership) []byte {
	dst = mpack.AppendMapLen(dst, 2)
	dst = mpack.AppendStr(dst, "Addrs")
	if m.Addrs == nil {
		dst = mpack.AppendNil(dst)
	} else {
		dst = mpack.AppendMapLen(dst, len(m.Addrs))
		for _, p := range slices.Sorted(maps.Keys(m.Addrs)) {
			dst = mpack.AppendUint(dst, uint64(p))
			dst = mpack.AppendStr(dst, m.Addrs[p])
		}
	}
	dst = mpack.AppendStr(dst, "Config")
	return appendEpochConfig(dst, &m.Config)
}

func readMembership(r *mpack.Reader) Membership {
	var m Membership
	r.Fields("membership", membershipFields, func(name string) {
		switch name {
		case "Addrs":
			m.Addrs = readAddrs(r)
		case "Config":
			m.Config = readEpochConfig(r, "config")
		}
	})
	return m
}

func readAddrs(r *mpack.Reader) map[edict.ProcessID]string {
	n, isNil := r.MapLen("addrs", math.MaxInt32)
	if isNil || r.Err() != nil {
		return nil
	}
	// The map grows with the pairs actually read, not the count claimed.
	addrs := make(map[edict.ProcessID]string, min(n, 64))
	for range n {
		p := edict.ProcessID(r.Uint("process"))
		a := r.Str("address")
		if r.Err() != nil {
			return nil
		}
		if _, dup := addrs[p]; dup {
			r.Fail("addrs: %v listed twice", p)
			return nil
		}
		addrs[p] = a
	}
	return addrs
}

// EncodeMembership encodes m with a version byte, after checking its
// configuration.
func EncodeMembership(m Membership) ([]byte, error) {
	if err := m.Config.Check(); err != nil {
		return nil, fmt.Errorf("wire: encode membership: %w: %v", ErrInvalid, err)
	}
	return appendMembership([]byte{MembershipVersion}, &m), nil
}

// DecodeMembership decodes and checks a membership payload.
func DecodeMembership(b []byte) (Membership, error) {
	var m Membership
	if err := decodeRecord("membership payload", MembershipVersion, MaxEntrySize, b, func(r *mpack.Reader) { m = readMembership(r) }); err != nil {
		return Membership{}, fmt.Errorf("wire: %v: %w", err, ErrCorrupt)
	}
	if err := m.Config.Check(); err != nil {
		return Membership{}, fmt.Errorf("wire: membership payload: %v: %w", err, ErrCorrupt)
	}
	return m, nil
}
