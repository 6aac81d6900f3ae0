package edict

import (
	"errors"
	"fmt"
	"slices"
)

// QuorumSystem is the paper's 𝒬 on a process set P (§2): any two of its
// quorums intersect (eq. 7). Implementations must be immutable.
type QuorumSystem interface {
	// Members returns P in increasing order.
	Members() []ProcessID
	// IsMember reports whether p ∈ P.
	IsMember(p ProcessID) bool
	// IsQuorum reports whether the set (given in increasing order, without
	// duplicates, all members) contains a quorum.
	IsQuorum(set []ProcessID) bool
}

// Majority is the quorum system of all majorities of P, the default.
type Majority struct{ members []ProcessID }

// NewMajority returns the majority quorum system on members. It refuses an
// empty set and the None id; duplicates are an error, not a silent merge.
func NewMajority(members ...ProcessID) (*Majority, error) {
	if len(members) == 0 {
		return nil, errors.New("edict: majority quorum system needs at least one member")
	}
	ms := slices.Clone(members)
	slices.Sort(ms)
	for i, m := range ms {
		if m == None {
			return nil, errors.New("edict: process id 0 is reserved for ⊥")
		}
		if i > 0 && ms[i-1] == m {
			return nil, fmt.Errorf("edict: process %v listed twice", m)
		}
	}
	return &Majority{members: ms}, nil
}

// MustMajority is NewMajority for fixed member lists in tests and examples.
func MustMajority(members ...ProcessID) *Majority {
	q, err := NewMajority(members...)
	if err != nil {
		panic(err)
	}
	return q
}

// Members implements QuorumSystem.
func (m *Majority) Members() []ProcessID { return slices.Clone(m.members) }

// IsMember implements QuorumSystem.
func (m *Majority) IsMember(p ProcessID) bool {
	_, ok := slices.BinarySearch(m.members, p)
	return ok
}

// IsQuorum implements QuorumSystem: |set ∩ P| > |P|/2.
func (m *Majority) IsQuorum(set []ProcessID) bool {
	n := 0
	for _, p := range set {
		if m.IsMember(p) {
			n++
		}
	}
	return 2*n > len(m.members)
}

// Size is the number of processes a quorum needs.
func (m *Majority) Size() int { return len(m.members)/2 + 1 }

func (m *Majority) String() string { return fmt.Sprintf("majority%v", m.members) }

// Epochs answers which quorum system governs an epoch (§10.6). A stamp or QT
// of an epoch the receiver does not know is refused, not guessed at.
type Epochs interface {
	QuorumSystem(epoch uint64) (QuorumSystem, bool)
}

// EpochTable is a simple Epochs backed by a map. The zero value knows no
// epoch.
type EpochTable map[uint64]QuorumSystem

// QuorumSystem implements Epochs.
func (t EpochTable) QuorumSystem(epoch uint64) (QuorumSystem, bool) {
	q, ok := t[epoch]
	return q, ok
}
