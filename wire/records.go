package wire

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/mpack"
)

// Well-known stable keys: the schema of the stable store. The log keeps its
// durable protocol state under these; the codecs below encode each record
// with a version byte.
// Per-epoch keys start with EpochKeyPrefix and embed the epoch as 16 hex
// digits, so that Keys(EpochKeyPrefix) lists them in epoch order.
const (
	// KeyIncarnation holds the incarnation (a uint64 record). Only
	// BumpIncarnation writes it.
	KeyIncarnation = "incarnation"
	// KeyAcceptedReign holds the highest reign the process has accepted
	// appends for (a stamp record): the analogue of Raft's currentTerm
	// (docs/protocol.md, "The replicated log").
	KeyAcceptedReign = "reign/accepted"
	// KeyCurrentEpoch holds the newest epoch the process knows (a uint64
	// record).
	KeyCurrentEpoch = "current-epoch"
	// KeyCleanStop holds the incarnation of the last life that ended with
	// a clean stop (a uint64 record): every grant it made had lapsed by
	// its own clock when it was written. It speaks for the life right
	// after that one only; the next bump of the incarnation leaves it
	// naming an older life (docs/protocol.md, "A clean stop ends the
	// quarantine").
	KeyCleanStop = "clean-stop"
	// EpochKeyPrefix starts every per-epoch key.
	EpochKeyPrefix = "epochs/"
)

// EpochConfigKey is where the configuration of epoch e is kept (an
// EpochConfig record).
func EpochConfigKey(e uint64) string { return EpochKeyPrefix + fmt.Sprintf("%016x/config", e) }

// EpochWedgeKey is where the log layer records that epoch e is wedged:
// that it accepted grantRequest(⊥, ∞) (docs/protocol.md, "Epochs and wedging"), which must survive a
// restart (opaque to storage).
func EpochWedgeKey(e uint64) string { return EpochKeyPrefix + fmt.Sprintf("%016x/wedge", e) }

// RecordVersion is the first byte of every typed stable record.
const RecordVersion byte = 1

// EncodeUint64 encodes v as a record: the version byte and 8 bytes big-endian.
func EncodeUint64(v uint64) []byte {
	b := make([]byte, 9)
	b[0] = RecordVersion
	binary.BigEndian.PutUint64(b[1:], v)
	return b
}

// DecodeUint64 decodes a record written by EncodeUint64; key names it in
// errors.
func DecodeUint64(key string, b []byte) (uint64, error) {
	if len(b) != 9 {
		return 0, fmt.Errorf("wire: stable key %q: %d bytes, want 9 for a uint64 record: %w", key, len(b), ErrCorrupt)
	}
	if b[0] != RecordVersion {
		return 0, fmt.Errorf("wire: stable key %q: unknown version byte %d: %w", key, b[0], ErrCorrupt)
	}
	return binary.BigEndian.Uint64(b[1:]), nil
}

// EncodeStamp encodes a stamp record (edict's encoding, which carries its
// own version byte).
func EncodeStamp(st edict.Stamp) ([]byte, error) { return edict.EncodeStamp(st) }

// DecodeStamp decodes a stamp record; key names it in errors.
func DecodeStamp(key string, b []byte) (edict.Stamp, error) {
	st, err := edict.DecodeStamp(b)
	if err != nil {
		return edict.Stamp{}, fmt.Errorf("wire: stable key %q: %v: %w", key, err, ErrCorrupt)
	}
	return st, nil
}

// MaxConfigMembers bounds the members plus learners of a decoded
// configuration.
const MaxConfigMembers = 1024

// EpochConfig is the process set of one epoch (docs/protocol.md, "Epochs and wedging"). Its codec tags
// name its fields in the records that hold it: the ones below write them
// by hand, storage's snapshot metadata through go-msgpack.
type EpochConfig struct {
	Epoch uint64 `codec:"e"`
	// Members vote in the epoch's quorums.
	Members []edict.ProcessID `codec:"m"`
	// Learners receive the log but are not counted in quorums.
	Learners []edict.ProcessID `codec:"l"`
	// Heard marks a configuration known only from a peer's word (the
	// epoch news every lease message carries, Lease.Newest), not from this
	// process's own log: the stop edict that began it may not be in the log
	// here, and Learners are unknown. The process grants and wedges in it,
	// but does not campaign in it: a leader's first reign in an epoch must
	// hold every entry its predecessor committed, and only a log that
	// holds the stop edict does (docs/protocol.md, "Epochs and wedging").
	// The same configuration made known again without Heard lifts the mark
	// (elect.Core.AddEpoch).
	Heard bool `codec:"h,omitempty"`
	// StopIndex and StopStamp name the committed stop edict that began the
	// epoch, where this process knows it (zero otherwise); the epoch news
	// carries them (Lease.NewestStopIndex). A process that knows the epoch
	// only as Heard learns from them what to fetch from any peer, and that
	// the entry, once its own log holds it, is committed (Log Matching).
	// The lease protocol never reads them. They are a process's own
	// record, never part of a membership payload, which cannot name its
	// own position.
	StopIndex uint64      `codec:"si,omitempty"`
	StopStamp edict.Stamp `codec:"ss,omitempty"`
	// Retiring is a member on its way out (Remove of the epoch's leader
	// by itself): a leader that is this member hands leadership to
	// another member, and a leader that is not ends the epoch without it.
	// So the leader's removal costs the cluster one leadership transfer,
	// and the removal is decided, durably, before the transfer: whoever
	// leads next carries it out (docs/protocol.md, "Membership changes
	// that keep the leader"). None when no member is retiring.
	Retiring edict.ProcessID `codec:"r,omitempty"`
}

// Quorum is the epoch's quorum system 𝒬_e: the majorities of Members
// (learners are never counted). It is the only quorum system an epoch
// has, because the epoch news names an epoch by its members alone and
// every process must agree on the quorums of an epoch it heard of.
func (c EpochConfig) Quorum() (*edict.Majority, error) {
	q, err := edict.NewMajority(c.Members...)
	if err != nil {
		return nil, fmt.Errorf("epoch %d: %w", c.Epoch, err)
	}
	return q, nil
}

// Check refuses a configuration no epoch can have: no members, process 0,
// duplicates, a process both member and learner, unsorted lists.
func (c EpochConfig) Check() error {
	if len(c.Members) == 0 {
		return fmt.Errorf("epoch %d: no members", c.Epoch)
	}
	if n := len(c.Members) + len(c.Learners); n > MaxConfigMembers {
		return fmt.Errorf("epoch %d: %d processes exceeds the limit of %d", c.Epoch, n, MaxConfigMembers)
	}
	for _, list := range [][]edict.ProcessID{c.Members, c.Learners} {
		for i, p := range list {
			if p == edict.None {
				return fmt.Errorf("epoch %d: process 0 (⊥) listed", c.Epoch)
			}
			if i > 0 && list[i-1] >= p {
				return fmt.Errorf("epoch %d: processes not sorted or duplicated at %v", c.Epoch, p)
			}
		}
	}
	for _, p := range c.Learners {
		if _, found := slices.BinarySearch(c.Members, p); found {
			return fmt.Errorf("epoch %d: %v is both member and learner", c.Epoch, p)
		}
	}
	if c.Retiring != edict.None {
		if _, found := slices.BinarySearch(c.Members, c.Retiring); !found {
			return fmt.Errorf("epoch %d: retiring %v is not a member", c.Epoch, c.Retiring)
		}
		if len(c.Members) == 1 {
			return fmt.Errorf("epoch %d: retiring %v is the only member", c.Epoch, c.Retiring)
		}
	}
	return nil
}

// MaxRecordSize bounds a stable record (decodeRecord's limit for them).
const MaxRecordSize = 64 << 10

// The records below are the version byte and one msgpack map: the bytes
// go-msgpack (github.com/hashicorp/go-msgpack/v2, WriteExt) writes for the
// types and their codec tags (field names where they have none), which
// wrote them until wire stopped importing it (mpack says why).
// Fields go in the order of their names, an omitempty field only when it
// is not empty; a nil list or map is nil, an empty one an empty array or
// map. They are decoded in mpack.Codec mode, so whatever go-msgpack could
// have written for the types still reads. Tests hold both directions to
// go-msgpack byte for byte, over every field the types have.

// decodeRecord checks the version byte and size (at most limit bytes),
// reads one value with read and refuses trailing bytes. name says what is
// decoded, for errors.
func decodeRecord(name string, version byte, limit int, b []byte, read func(r *mpack.Reader)) error {
	switch {
	case len(b) == 0:
		return fmt.Errorf("%s: empty record", name)
	case len(b) > limit:
		return fmt.Errorf("%s: %d bytes exceeds the limit of %d", name, len(b), limit)
	case b[0] != version:
		return fmt.Errorf("%s: unknown version byte %d (want %d)", name, b[0], version)
	}
	r := mpack.NewReader(b, 1, mpack.Codec)
	read(&r)
	r.End()
	if err := r.Err(); err != nil {
		return fmt.Errorf("%s: %v", name, err)
	}
	return nil
}

var epochConfigFields = []string{"e", "h", "l", "m", "r", "si", "ss"}

func appendEpochConfig(dst []byte, c *EpochConfig) []byte {
	n := 3
	for _, set := range []bool{c.Heard, c.Retiring != edict.None, c.StopIndex != 0, !c.StopStamp.IsZero()} {
		if set {
			n++
		}
	}
	dst = mpack.AppendMapLen(dst, n)
	dst = mpack.AppendStr(dst, "e")
	dst = mpack.AppendUint(dst, c.Epoch)
	if c.Heard {
		dst = mpack.AppendStr(dst, "h")
		dst = mpack.AppendBool(dst, true)
	}
	dst = mpack.AppendStr(dst, "l")
	dst = appendIDs(dst, c.Learners)
	dst = mpack.AppendStr(dst, "m")
	dst = appendIDs(dst, c.Members)
	if c.Retiring != edict.None {
		dst = mpack.AppendStr(dst, "r")
		dst = mpack.AppendUint(dst, uint64(c.Retiring))
	}
	if c.StopIndex != 0 {
		dst = mpack.AppendStr(dst, "si")
		dst = mpack.AppendUint(dst, c.StopIndex)
	}
	if !c.StopStamp.IsZero() {
		dst = mpack.AppendStr(dst, "ss")
		dst = edict.AppendStampMsgpack(dst, &c.StopStamp)
	}
	return dst
}

func readEpochConfig(r *mpack.Reader, what string) EpochConfig {
	var c EpochConfig
	r.Fields(what, epochConfigFields, func(name string) {
		switch name {
		case "e":
			c.Epoch = r.Uint("epoch")
		case "h":
			c.Heard = r.Bool("heard")
		case "l":
			c.Learners = readIDs(r, "learners")
		case "m":
			c.Members = readIDs(r, "members")
		case "r":
			c.Retiring = edict.ProcessID(r.Uint("retiring"))
		case "si":
			c.StopIndex = r.Uint("stop index")
		case "ss":
			c.StopStamp = edict.ReadStampMsgpack(r, "stop stamp")
		}
	})
	return c
}

func appendIDs(dst []byte, ids []edict.ProcessID) []byte {
	if ids == nil {
		return mpack.AppendNil(dst)
	}
	dst = mpack.AppendArrayLen(dst, len(ids))
	for _, p := range ids {
		dst = mpack.AppendUint(dst, uint64(p))
	}
	return dst
}

// readIDs reads a list of processes, at most MaxConfigMembers (Check's
// limit for members and learners together).
func readIDs(r *mpack.Reader, what string) []edict.ProcessID {
	n, isNil := r.ArrayLen(what, MaxConfigMembers)
	if isNil || r.Err() != nil {
		return nil
	}
	ids := make([]edict.ProcessID, n)
	for i := range ids {
		ids[i] = edict.ProcessID(r.Uint(what))
	}
	return ids
}

// EncodeEpochConfig encodes an EpochConfig record after checking it.
func EncodeEpochConfig(c EpochConfig) ([]byte, error) {
	if err := c.Check(); err != nil {
		return nil, fmt.Errorf("wire: encode epoch config: %w: %v", ErrInvalid, err)
	}
	return appendEpochConfig([]byte{RecordVersion}, &c), nil
}

// DecodeEpochConfig decodes and checks an EpochConfig record; key names it
// in errors.
func DecodeEpochConfig(key string, b []byte) (EpochConfig, error) {
	var c EpochConfig
	err := decodeRecord("epoch config", RecordVersion, MaxRecordSize, b, func(r *mpack.Reader) { c = readEpochConfig(r, "epoch config") })
	if err != nil {
		return EpochConfig{}, fmt.Errorf("wire: stable key %q: %v: %w", key, err, ErrCorrupt)
	}
	if err := c.Check(); err != nil {
		return EpochConfig{}, fmt.Errorf("wire: stable key %q: %v: %w", key, err, ErrCorrupt)
	}
	return c, nil
}

// EpochRecord is the per-epoch state a process must not forget across a
// restart: whether it is wedged (A=⊥, F=∞, §10.6) and whether it knows the
// epoch TERMINATED. Everything else of the lease protocol may be lost: the
// restart quarantine covers forgotten grants. The lease core (package
// elect) asks for it to be persisted (elect.Ready.Persist) and reads it
// back at start (elect.New), and the log keeps it under EpochWedgeKey.
type EpochRecord struct {
	Epoch      uint64 `codec:"e"`
	Wedged     bool   `codec:"w"`
	Terminated bool   `codec:"t"`
	// Runs: every epoch below this one is TERMINATED, those this process
	// never knew included.
	Runs bool `codec:"r,omitempty"`
}

// The codec of EpochRecord below names each of its fields. This
// conversion stops compiling when one is added or changed there: extend
// appendEpochRecord and readEpochRecord with it (under its codec tag, in
// name order), then this line.
var _ = struct {
	Epoch      uint64
	Wedged     bool
	Terminated bool
	Runs       bool
}(EpochRecord{})

var epochRecordFields = []string{"e", "r", "t", "w"}

func appendEpochRecord(dst []byte, rec *EpochRecord) []byte {
	n := 3
	if rec.Runs {
		n++
	}
	dst = mpack.AppendMapLen(dst, n)
	dst = mpack.AppendStr(dst, "e")
	dst = mpack.AppendUint(dst, rec.Epoch)
	if rec.Runs {
		dst = mpack.AppendStr(dst, "r")
		dst = mpack.AppendBool(dst, true)
	}
	dst = mpack.AppendStr(dst, "t")
	dst = mpack.AppendBool(dst, rec.Terminated)
	dst = mpack.AppendStr(dst, "w")
	return mpack.AppendBool(dst, rec.Wedged)
}

func readEpochRecord(r *mpack.Reader) EpochRecord {
	var rec EpochRecord
	r.Fields("epoch record", epochRecordFields, func(name string) {
		switch name {
		case "e":
			rec.Epoch = r.Uint("epoch")
		case "r":
			rec.Runs = r.Bool("runs")
		case "t":
			rec.Terminated = r.Bool("terminated")
		case "w":
			rec.Wedged = r.Bool("wedged")
		}
	})
	return rec
}

// EncodeEpochRecord encodes the lease core's per-epoch record (kept under
// EpochWedgeKey) with a version byte.
func EncodeEpochRecord(r EpochRecord) ([]byte, error) {
	return appendEpochRecord([]byte{RecordVersion}, &r), nil
}

// DecodeEpochRecord reads a record written by EncodeEpochRecord; key names
// it in errors.
func DecodeEpochRecord(key string, b []byte) (EpochRecord, error) {
	var rec EpochRecord
	if err := decodeRecord("epoch record", RecordVersion, MaxRecordSize, b, func(r *mpack.Reader) { rec = readEpochRecord(r) }); err != nil {
		return EpochRecord{}, fmt.Errorf("wire: stable key %q: %v: %w", key, err, ErrCorrupt)
	}
	return rec, nil
}
