package wire

import (
	"fmt"

	"github.com/edictlog/edictlog/edict"
)

// EntryKind says what a log entry is for. The set is closed: a decoder
// refuses a kind it does not know rather than passing it to a layer that
// would misread it.
type EntryKind uint8

const (
	// EntryCommand carries a client command for the FSM in Data.
	EntryCommand EntryKind = 1
	// EntryReignStart is the edict a new leader appends when its reign
	// starts (docs/protocol.md, "The replicated log"). It commits the entries before it; Data is empty or
	// leader metadata.
	EntryReignStart EntryKind = 2
	// EntryStop is the stop edict of docs/protocol.md, "Epochs and wedging": the last edict of its epoch.
	// Data is the encoded EpochConfig of the next epoch.
	EntryStop EntryKind = 3
	// EntryConfig records an epoch configuration that takes effect without a
	// stop edict: the bootstrap configuration of epoch 0 and learner changes.
	// Data is the encoded EpochConfig.
	EntryConfig EntryKind = 4

	maxEntryKind = EntryConfig
)

// Valid reports whether k is one of the kinds above.
func (k EntryKind) Valid() bool { return k >= EntryCommand && k <= maxEntryKind }

func (k EntryKind) String() string {
	switch k {
	case EntryCommand:
		return "command"
	case EntryReignStart:
		return "reign-start"
	case EntryStop:
		return "stop"
	case EntryConfig:
		return "config"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Entry is one edict of the replicated log.
type Entry struct {
	// Index is the entry's position in the log, from 1.
	Index uint64
	// Reign identifies the reign that created the entry: the stamp of that
	// reign's reign-start edict. Reigns are ordered by Stamp.Compare. It is
	// the zero stamp only for entries written before any reign (bootstrap).
	Reign edict.Stamp
	// Stamp is this edict's own stamp (epoch, QT, counter).
	Stamp edict.Stamp
	// Kind says how Data is to be read.
	Kind EntryKind
	// Data is the payload. An empty payload is stored as nil.
	Data []byte
}

// Check refuses entries that the decoder would refuse, so that nothing is
// written that cannot be read back.
func (e *Entry) Check() error {
	if !e.Kind.Valid() {
		return fmt.Errorf("%w: entry %d has unknown kind %d", ErrInvalid, e.Index, uint8(e.Kind))
	}
	if err := checkStamp(e.Reign); err != nil {
		return fmt.Errorf("%w: entry %d reign: %v", ErrInvalid, e.Index, err)
	}
	if err := checkStamp(e.Stamp); err != nil {
		return fmt.Errorf("%w: entry %d stamp: %v", ErrInvalid, e.Index, err)
	}
	return nil
}

// checkStamp applies edict's structural rules for a stamp embedded in an
// entry: the zero stamp, or a QT of at most edict.MaxQTSize readings sorted
// by process, without duplicates and without ⊥.
func checkStamp(s edict.Stamp) error { return s.WellFormed() }
