// Package wire is the vocabulary edictlog's processes exchange and keep: the
// Message envelope with the lease and log payloads that cross the network
// (Lease, the lease protocol's message, among them), the log's Entry and
// its kinds, Position, EpochConfig, the lease protocol's EpochRecord,
// Membership (the payload of config and stop edicts), the Batch a store makes durable, the
// stable-key schema, and the codecs of the log's entries, stable records
// and membership payloads, written by hand (mpack). Messages are
// encoded by package transport, which sends them; wire holds the rules
// every message obeys (Message.Validate), which transport's decoder checks.
//
// It sits at the bottom of the import graph, on edict alone, below both
// cores: the lease core (elect) and the log's protocol (internal/replog)
// each speak it, and neither owns a type the other or the transport and
// storage must convert. Each thing is named once here — one Position, one
// EpochConfig (the lease core takes the log's configuration as it is and
// derives the epoch's quorums from it, EpochConfig.Quorum), one lease
// message, one epoch record — because what crosses the network or the
// disk has one encoding, and a second Go type for it would be a second
// place for that encoding to drift. It does no I/O: the log (package
// edictlog and the protocol under it, internal/replog) speaks it, and the I/O
// packages (storage, transport) implement the interfaces edictlog declares
// in its terms. So `go list -deps .` of the module's root package holds
// neither bbolt nor go-msgpack, net/http or crypto/tls (.ci/run checks it).
//
// Invariants:
//
//   - A decoder validates what it decodes and returns an error, never a
//     panic and never a half-valid value. It refuses unknown versions,
//     unknown kinds, unknown fields and trailing bytes, and bounds every
//     size before it allocates. Whether a stamp covers a quorum of its
//     epoch needs the epoch table and is left to the log
//     (edict.Stamp.Validate); every other structural rule is checked
//     here, once, at decode (Message.Validate).
//   - An encoder refuses what its decoder would refuse (ErrInvalid), so
//     nothing is sent or stored that cannot be read back.
//   - Every encoding carries a version byte: RecordVersion for stable
//     records, EntryVersion for entries, MembershipVersion for membership
//     payloads; messages travel in transport frames that carry theirs.
//     A change to an encoding changes its version.
package wire

import "errors"

var (
	// ErrInvalid reports a value an encoder refuses: an unknown entry
	// kind, a malformed stamp, a configuration no epoch can have, an entry
	// over MaxEntrySize.
	ErrInvalid = errors.New("wire: invalid value")
	// ErrCorrupt reports bytes that do not decode to a valid record; the
	// error names the record (the stable key, the payload).
	ErrCorrupt = errors.New("wire: corrupt record")
	// ErrNotFound reports a stable key that holds no value: what a stable
	// store's Get returns for a key never set (edictlog.StableStore).
	ErrNotFound = errors.New("not found")
)
