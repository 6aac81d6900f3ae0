package wire

import (
	"fmt"

	"github.com/edictlog/edictlog/edict"
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

// EncodeMembership encodes m with a version byte, after checking its
// configuration.
func EncodeMembership(m Membership) ([]byte, error) {
	if err := m.Config.Check(); err != nil {
		return nil, fmt.Errorf("wire: encode membership: %w: %v", ErrInvalid, err)
	}
	return EncodeRecord(MembershipVersion, m)
}

// DecodeMembership decodes and checks a membership payload.
func DecodeMembership(b []byte) (Membership, error) {
	var m Membership
	if err := DecodeRecord("membership payload", MembershipVersion, MaxEntrySize, b, &m); err != nil {
		return Membership{}, fmt.Errorf("wire: %v: %w", err, ErrCorrupt)
	}
	if err := m.Config.Check(); err != nil {
		return Membership{}, fmt.Errorf("wire: membership payload: %v: %w", err, ErrCorrupt)
	}
	return m, nil
}
