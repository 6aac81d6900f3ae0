package wire

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/hashicorp/go-msgpack/v2/codec"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect"
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
	// (DESIGN §6).
	KeyAcceptedReign = "reign/accepted"
	// KeyCurrentEpoch holds the newest epoch the process knows (a uint64
	// record).
	KeyCurrentEpoch = "current-epoch"
	// EpochKeyPrefix starts every per-epoch key.
	EpochKeyPrefix = "epochs/"
)

// EpochConfigKey is where the configuration of epoch e is kept (an
// EpochConfig record).
func EpochConfigKey(e uint64) string { return EpochKeyPrefix + fmt.Sprintf("%016x/config", e) }

// EpochWedgeKey is where the log layer records that epoch e is wedged:
// that it accepted grantRequest(⊥, ∞) (DESIGN §7), which must survive a
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

// EpochConfig is the process set of one epoch (DESIGN §7).
type EpochConfig struct {
	Epoch uint64 `codec:"e"`
	// Members vote in the epoch's quorums.
	Members []edict.ProcessID `codec:"m"`
	// Learners receive the log but are not counted in quorums.
	Learners []edict.ProcessID `codec:"l"`
	// Heard marks a configuration known only from a peer's epoch news
	// (elect.EpochConfig.Heard), not from this process's log: Learners are
	// unknown, and the process may not lead the epoch until its log holds
	// the stop edict that began it.
	Heard bool `codec:"h,omitempty"`
	// StopIndex and StopStamp name the committed stop edict that began the
	// epoch, where this process knows it (elect.EpochConfig.StopIndex): a
	// process's own record, never part of a membership payload, which
	// cannot name its own position.
	StopIndex uint64      `codec:"si,omitempty"`
	StopStamp edict.Stamp `codec:"ss,omitempty"`
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
	return nil
}

var recordHandle = func() *codec.MsgpackHandle {
	h := &codec.MsgpackHandle{WriteExt: true}
	h.ErrorIfNoField = true
	h.MaxInitLen = 64
	return h
}()

// MaxRecordSize bounds a stable record (DecodeRecord's limit for them).
const MaxRecordSize = 64 << 10

// encodeRecord writes the version byte and the msgpack form of v.
func EncodeRecord(version byte, v any) ([]byte, error) {
	// NewEncoderBytes writes from the start of the slice it is given (it
	// does not append), so the version byte goes in front afterwards.
	var body []byte
	if err := codec.NewEncoderBytes(&body, recordHandle).Encode(v); err != nil {
		return nil, fmt.Errorf("wire: encode %T: %w", v, err)
	}
	return append([]byte{version}, body...), nil
}

// decodeRecord checks the version byte and size (at most limit bytes),
// decodes one msgpack value and refuses trailing bytes. name says what is
// decoded, for errors.
func DecodeRecord(name string, version byte, limit int, b []byte, v any) (err error) {
	switch {
	case len(b) == 0:
		return fmt.Errorf("%s: empty record", name)
	case len(b) > limit:
		return fmt.Errorf("%s: %d bytes exceeds the limit of %d", name, len(b), limit)
	case b[0] != version:
		return fmt.Errorf("%s: unknown version byte %d (want %d)", name, b[0], version)
	}
	d := codec.NewDecoderBytes(b[1:], recordHandle)
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("%s: %v", name, err)
	}
	if n := d.NumBytesRead(); n != len(b)-1 {
		return fmt.Errorf("%s: %d trailing bytes", name, len(b)-1-n)
	}
	return nil
}

// EncodeEpochConfig encodes an EpochConfig record after checking it.
func EncodeEpochConfig(c EpochConfig) ([]byte, error) {
	if err := c.Check(); err != nil {
		return nil, fmt.Errorf("wire: encode epoch config: %w: %v", ErrInvalid, err)
	}
	return EncodeRecord(RecordVersion, c)
}

// DecodeEpochConfig decodes and checks an EpochConfig record; key names it
// in errors.
func DecodeEpochConfig(key string, b []byte) (EpochConfig, error) {
	var c EpochConfig
	if err := DecodeRecord("epoch config", RecordVersion, MaxRecordSize, b, &c); err != nil {
		return EpochConfig{}, fmt.Errorf("wire: stable key %q: %v: %w", key, err, ErrCorrupt)
	}
	if err := c.Check(); err != nil {
		return EpochConfig{}, fmt.Errorf("wire: stable key %q: %v: %w", key, err, ErrCorrupt)
	}
	return c, nil
}

// EncodeEpochRecord encodes the lease core's per-epoch record (kept under
// EpochWedgeKey) with a version byte.
func EncodeEpochRecord(r elect.EpochRecord) ([]byte, error) {
	return EncodeRecord(RecordVersion, r)
}

// DecodeEpochRecord reads a record written by EncodeEpochRecord; key names
// it in errors.
func DecodeEpochRecord(key string, b []byte) (elect.EpochRecord, error) {
	var r elect.EpochRecord
	if err := DecodeRecord("epoch record", RecordVersion, MaxRecordSize, b, &r); err != nil {
		return elect.EpochRecord{}, fmt.Errorf("wire: stable key %q: %v: %w", key, err, ErrCorrupt)
	}
	return r, nil
}
