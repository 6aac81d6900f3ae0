package edict

import (
	"errors"
	"fmt"
	"strings"
)

// Reading is one element (q, T_q) of a quorum timestamp: the time T_q at which
// granter q granted the lease (§7, step 4 of OQwBD).
type Reading struct {
	Process ProcessID `codec:"p"`
	T       Time      `codec:"t"`
}

// QT is a quorum timestamp (§7): the readings of the quorum whose grants
// completed one OQwBD instance, sorted by process. Use NewQT to build one.
type QT []Reading

// ErrInconsistent reports two QTs that no correct run produces: a process
// they share orders them one way and another process the other way, or they
// share no process at all. Seeing it means a quorum system was violated or a
// clock broke the model (drift beyond ρ, a grant forgotten without quarantine).
var ErrInconsistent = errors.New("edict: inconsistent quorum timestamps")

// NewQT builds a QT from readings in any order. Duplicates of a process are
// refused.
func NewQT(readings ...Reading) (QT, error) {
	qt := QT(append([]Reading(nil), readings...))
	// Insertion sort: quorums are small and this keeps the package free of
	// sort closures on a hot path.
	for i := 1; i < len(qt); i++ {
		for j := i; j > 0 && qt[j].Process < qt[j-1].Process; j-- {
			qt[j], qt[j-1] = qt[j-1], qt[j]
		}
	}
	if err := qt.WellFormed(); err != nil {
		return nil, err
	}
	return qt, nil
}

// WellFormed checks the structure a QT must have whatever its epoch: at
// least one and at most MaxQTSize readings, sorted by process, no process
// twice, no ⊥. Decoders of messages that embed a QT call it.
func (qt QT) WellFormed() error {
	if len(qt) == 0 {
		return errors.New("edict: empty quorum timestamp")
	}
	if len(qt) > MaxQTSize {
		return fmt.Errorf("edict: quorum timestamp of %d readings exceeds the limit of %d", len(qt), MaxQTSize)
	}
	for i, r := range qt {
		if r.Process == None {
			return fmt.Errorf("edict: quorum timestamp names process 0 (⊥) at position %d", i)
		}
		if i > 0 && qt[i-1].Process >= r.Process {
			if qt[i-1].Process == r.Process {
				return fmt.Errorf("edict: quorum timestamp names %v twice", r.Process)
			}
			return fmt.Errorf("edict: quorum timestamp not sorted at position %d", i)
		}
	}
	return nil
}

// Validate checks that qt is well formed and that its processes are members
// of qs forming a quorum. Only validated QTs may be compared: eq. 21 decides
// the order only because two quorums intersect (eq. 7).
func (qt QT) Validate(qs QuorumSystem) error {
	if err := qt.WellFormed(); err != nil {
		return err
	}
	set := make([]ProcessID, len(qt))
	for i, r := range qt {
		if !qs.IsMember(r.Process) {
			return fmt.Errorf("edict: quorum timestamp names %v, not a member of %v", r.Process, qs)
		}
		set[i] = r.Process
	}
	if !qs.IsQuorum(set) {
		return fmt.Errorf("edict: quorum timestamp %v does not cover a quorum of %v", qt, qs)
	}
	return nil
}

// Compare orders two QTs of one epoch by eq. 21: QT1 < QT2 iff some process
// appears in both with a smaller time in QT1. It returns -1, 0 or +1, and
// ErrInconsistent when the shared processes disagree or there are none.
// Equal readings at every shared process mean the same OQwBD instance: a
// granter never returns one reading twice.
func (qt QT) Compare(other QT) (int, error) {
	less, greater, shared := false, false, false
	i, j := 0, 0
	for i < len(qt) && j < len(other) {
		a, b := qt[i], other[j]
		switch {
		case a.Process < b.Process:
			i++
			continue
		case a.Process > b.Process:
			j++
			continue
		}
		shared = true
		switch a.T.Compare(b.T) {
		case -1:
			less = true
		case 1:
			greater = true
		}
		i++
		j++
	}
	switch {
	case !shared:
		return 0, fmt.Errorf("%w: %v and %v share no process", ErrInconsistent, qt, other)
	case less && greater:
		return 0, fmt.Errorf("%w: %v and %v are ordered both ways", ErrInconsistent, qt, other)
	case less:
		return -1, nil
	case greater:
		return 1, nil
	}
	return 0, nil
}

// Equal reports whether the two QTs hold exactly the same readings.
func (qt QT) Equal(other QT) bool {
	if len(qt) != len(other) {
		return false
	}
	for i := range qt {
		if qt[i] != other[i] {
			return false
		}
	}
	return true
}

// Processes returns the processes of qt in order.
func (qt QT) Processes() []ProcessID {
	ps := make([]ProcessID, len(qt))
	for i, r := range qt {
		ps[i] = r.Process
	}
	return ps
}

func (qt QT) String() string {
	var b strings.Builder
	b.WriteByte('{')
	for i, r := range qt {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%v@%v", r.Process, r.T)
	}
	b.WriteByte('}')
	return b.String()
}
