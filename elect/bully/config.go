package bully

import (
	"fmt"
	"slices"
	"time"

	"github.com/edictlog/edictlog/edict"
)

// Config configures one process of either algorithm.
type Config struct {
	// ID is this process; Members every process, ID included.
	ID      edict.ProcessID
	Members []edict.ProcessID
	// Incarnation counts this process's starts (1 for the first); it names
	// elections and groups so that a recovered process never reuses one
	// (Stoller §4: election identifiers carry the incarnation).
	Incarnation uint64

	// T is the upper bound on a message's delay (Assumption 8). Default
	// 5ms, the simulator's default MaxDelay.
	T time.Duration
	// Processing bounds the time a node takes to respond (Assumption 9
	// says zero; a real runtime needs some). Default 1ms.
	Processing time.Duration
	// CheckPeriod is the period of the coordinator's Check (Bully:
	// AreYouNormal to every node; Invitation: AreYouCoordinator) and of
	// an Invitation member's AreYouThere to its coordinator. Default 20ms.
	CheckPeriod time.Duration
}

// Defaults for Config's timing fields.
const (
	DefaultT           = 5 * time.Millisecond
	DefaultProcessing  = time.Millisecond
	DefaultCheckPeriod = 20 * time.Millisecond
)

func (c Config) withDefaults() Config {
	if c.T <= 0 {
		c.T = DefaultT
	}
	if c.Processing <= 0 {
		c.Processing = DefaultProcessing
	}
	if c.CheckPeriod <= 0 {
		c.CheckPeriod = DefaultCheckPeriod
	}
	if c.Incarnation == 0 {
		c.Incarnation = 1
	}
	c.Members = slices.Clone(c.Members)
	slices.Sort(c.Members)
	c.Members = slices.Compact(c.Members)
	if !slices.Contains(c.Members, c.ID) {
		panic(fmt.Sprintf("bully: %v is not among the members %v", c.ID, c.Members))
	}
	return c
}

// Stage is the longest a request–reply exchange can take under the
// synchronous model: two message delays and two processing times. It is
// the slides' "2T" of phase 1 ("The Bully Election Algorithm (3/3)") with
// processing made explicit.
func (c Config) Stage() time.Duration {
	c = c.withDefaults()
	return 2 * (c.T + c.Processing)
}

// Status is S(i).s ("Specification: State"). Down is never observed in a
// running instance: a crash drops the instance (elect.Protocol).
type Status uint8

// The states of the slides, plus Garcia-Molina's Reorganization, which
// the slides fold away (footnote of "Specification: State").
const (
	Down Status = iota
	Election
	Reorganization
	Normal
)

func (s Status) String() string {
	switch s {
	case Down:
		return "Down"
	case Election:
		return "Election"
	case Reorganization:
		return "Reorganization"
	case Normal:
		return "Normal"
	}
	return fmt.Sprintf("Status(%d)", uint8(s))
}

// Group names an election (Bully) or a group (Invitation, S(i).g): the
// creator, its incarnation and a per-incarnation counter, so that no two
// are ever equal (Garcia-Molina's "counter plus node id"; Stoller's
// election identifier).
type Group struct {
	Creator     edict.ProcessID
	Incarnation uint64
	Seq         uint64
}

// IsZero reports whether g names nothing.
func (g Group) IsZero() bool { return g == Group{} }

func (g Group) String() string {
	return fmt.Sprintf("%v/%d/%d", g.Creator, g.Incarnation, g.Seq)
}

// State is a process's S(i) as the slides name its parts, for tests and
// for the assertion checkers.
type State struct {
	S Status          // S(i).s
	C edict.ProcessID // S(i).c, the coordinator (None while unknown)
	H edict.ProcessID // S(i).h, the node that halted i (Bully)
	D Group           // S(i).d, the definition: the election or group that installed C
	G Group           // S(i).g, the group (Invitation; Bully leaves it zero)
}

// timer is one local deadline; zero is unset.
type timer = edict.Time

// earliest returns the earliest set deadline, or zero.
func earliest(ts ...timer) edict.Time {
	var best edict.Time
	for _, t := range ts {
		if !t.IsZero() && (best.IsZero() || t.Before(best)) {
			best = t
		}
	}
	return best
}

// due reports whether deadline t is set and reached at now.
func due(t, now edict.Time) bool { return !t.IsZero() && !now.Before(t) }
