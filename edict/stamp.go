package edict

import (
	"errors"
	"fmt"
	"sync"
)

// Stamp is an edict timestamp extended with the epoch (§7, §10.6): the
// quorum timestamp QT_p of the lease under which the edict was created and
// the edict counter EC_p, prefixed by the epoch whose quorum system QT
// belongs to. Stamps are ordered lexicographically (epoch, QT by eq. 21,
// counter); by Lemma 7.1 that order is the real-time order of creation
// (eq. 3). The zero Stamp stands for "no edict" and precedes every other.
type Stamp struct {
	Epoch   uint64 `codec:"e"`
	QT      QT     `codec:"q"`
	Counter uint64 `codec:"c"`
}

// IsZero reports whether s is the zero stamp.
func (s Stamp) IsZero() bool { return s.Epoch == 0 && len(s.QT) == 0 && s.Counter == 0 }

// WellFormed checks a stamp's structure: the zero stamp, or a well-formed
// QT. Decoders of messages that embed a stamp call it.
func (s Stamp) WellFormed() error {
	if s.IsZero() {
		return nil
	}
	if len(s.QT) == 0 {
		return errors.New("edict: non-zero stamp without a quorum timestamp")
	}
	return s.QT.WellFormed()
}

// Validate checks that s belongs to an epoch that epochs knows and that its
// QT covers a quorum of that epoch. The zero stamp is valid.
func (s Stamp) Validate(epochs Epochs) error {
	if s.IsZero() {
		return nil
	}
	qs, ok := epochs.QuorumSystem(s.Epoch)
	if !ok {
		return fmt.Errorf("edict: stamp of unknown epoch %d", s.Epoch)
	}
	if err := s.QT.Validate(qs); err != nil {
		return fmt.Errorf("stamp of epoch %d: %w", s.Epoch, err)
	}
	return nil
}

// Compare orders stamps (epoch, QT, counter) lexicographically, with QTs
// ordered by eq. 21. It returns ErrInconsistent for QTs of one epoch that no
// correct run produces. Both stamps should have been validated.
func (s Stamp) Compare(o Stamp) (int, error) {
	switch sz, oz := s.IsZero(), o.IsZero(); {
	case sz && oz:
		return 0, nil
	case sz:
		return -1, nil
	case oz:
		return 1, nil
	}
	switch {
	case s.Epoch < o.Epoch:
		return -1, nil
	case s.Epoch > o.Epoch:
		return 1, nil
	}
	c, err := s.QT.Compare(o.QT)
	if err != nil || c != 0 {
		return c, err
	}
	switch {
	case s.Counter < o.Counter:
		return -1, nil
	case s.Counter > o.Counter:
		return 1, nil
	}
	return 0, nil
}

// Equal reports whether s and o are the same stamp.
func (s Stamp) Equal(o Stamp) bool {
	return s.Epoch == o.Epoch && s.Counter == o.Counter && s.QT.Equal(o.QT)
}

func (s Stamp) String() string {
	if s.IsZero() {
		return "stamp(none)"
	}
	return fmt.Sprintf("stamp(e%d %v #%d)", s.Epoch, s.QT, s.Counter)
}

// ErrStale is returned by Fence.Admit for an edict that is not newer than
// one already acted on: it was created earlier (eq. 3), possibly by a leader
// that has since been deposed.
var ErrStale = errors.New("edict: stale edict")

// Fence is the receiver's side of Edict Ordering used as a fencing token
// (Kleppmann): it remembers the highest stamp acted on and refuses any edict
// that is not newer, without asking any other process. It is safe for
// concurrent use.
type Fence struct {
	mu      sync.Mutex
	epochs  Epochs
	highest Stamp
}

// NewFence returns a Fence that validates stamps against epochs.
func NewFence(epochs Epochs) *Fence { return &Fence{epochs: epochs} }

// Admit validates s and records it as the highest stamp if it is newer than
// every stamp admitted before; otherwise it returns an error wrapping
// ErrStale (or the validation error) and records nothing.
func (f *Fence) Admit(s Stamp) error {
	if s.IsZero() {
		return errors.New("edict: fence: zero stamp is not an edict")
	}
	if err := s.Validate(f.epochs); err != nil {
		return fmt.Errorf("fence: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := f.highest.Compare(s)
	if err != nil {
		return fmt.Errorf("fence: %w", err)
	}
	if c >= 0 {
		return fmt.Errorf("%w: %v is not newer than %v", ErrStale, s, f.highest)
	}
	f.highest = s
	return nil
}

// Highest returns the highest stamp admitted so far.
func (f *Fence) Highest() Stamp {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.highest
}
