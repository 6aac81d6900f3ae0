package wire

import (
	"errors"
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
// log itself. Addrs names the processes whose address the edict sets: the
// learner a config edict adds, or the member or learner whose address a
// config edict of the configuration in force changes
// (replog.Core.ChangeAddress); a process it leaves out keeps the address it
// had.
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

// MaxAddrLen bounds a transport address carried beside a configuration
// (SnapshotHeader.Addrs, SnapshotMeta.Addrs): a DNS name of 253 bytes and
// a port fit with room to spare. MaxAddrsLen bounds them all together, so
// that a snapshot's metadata with its configuration and stamps stays
// within a stable record (MaxRecordSize) and a hostile header cannot make
// a receiver keep hundreds of large strings.
const (
	MaxAddrLen  = 512
	MaxAddrsLen = 16 << 10
)

// CheckAddr refuses an address no process can be reached at: empty, or
// longer than MaxAddrLen.
func CheckAddr(addr string) error {
	switch {
	case addr == "":
		return errors.New("empty")
	case len(addr) > MaxAddrLen:
		return fmt.Errorf("%d bytes, limit %d", len(addr), MaxAddrLen)
	}
	return nil
}

// CheckAddrs checks the addresses carried with a configuration of members
// and learners: each is of one of them and passes CheckAddr, and together
// they are at most MaxAddrsLen bytes. The error names the process and
// what is wrong.
func CheckAddrs(addrs map[edict.ProcessID]string, members, learners []edict.ProcessID) error {
	total := 0
	for _, p := range slices.Sorted(maps.Keys(addrs)) {
		if !slices.Contains(members, p) && !slices.Contains(learners, p) {
			return fmt.Errorf("address of %v, which is neither a member nor a learner", p)
		}
		if err := CheckAddr(addrs[p]); err != nil {
			return fmt.Errorf("address of %v: %w", p, err)
		}
		if total += len(addrs[p]); total > MaxAddrsLen {
			return fmt.Errorf("addresses of %d bytes or more, limit %d", total, MaxAddrsLen)
		}
	}
	return nil
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
