package edict

import (
	"fmt"
	"math"
	"time"
)

// ProcessID names a process of the paper's set P. Zero is not a valid id: it
// stands for "no process" (the paper's ⊥) wherever an id is optional.
type ProcessID uint64

// None is the absent process, ⊥ in §10.6.
const None ProcessID = 0

func (p ProcessID) String() string {
	if p == None {
		return "⊥"
	}
	return fmt.Sprintf("p%d", uint64(p))
}

// Time is a reading of a process's clock C_p (§2). Readings are ordered first
// by Incarnation, then by Nanos, so that a process's readings strictly
// increase across restarts (eq. 8) even though the hardware clock restarts.
// Durations are only meaningful between readings of one incarnation.
type Time struct {
	// Incarnation counts the process's starts; it is bumped durably before
	// the process sends anything (see IncarnationFile).
	Incarnation uint64 `codec:"i"`
	// Nanos is the clock's reading within the incarnation.
	Nanos int64 `codec:"n"`
}

// Compare returns -1, 0 or +1 as t is before, equal to or after u.
func (t Time) Compare(u Time) int {
	switch {
	case t.Incarnation < u.Incarnation:
		return -1
	case t.Incarnation > u.Incarnation:
		return 1
	case t.Nanos < u.Nanos:
		return -1
	case t.Nanos > u.Nanos:
		return 1
	}
	return 0
}

// Before reports whether t < u.
func (t Time) Before(u Time) bool { return t.Compare(u) < 0 }

// After reports whether t > u.
func (t Time) After(u Time) bool { return t.Compare(u) > 0 }

// IsZero reports whether t is the zero reading, which precedes every real one
// (the paper's initial value 0 of F_p and E_p).
func (t Time) IsZero() bool { return t == Time{} }

// Add returns t advanced by d on the same incarnation, saturating instead of
// overflowing.
func (t Time) Add(d time.Duration) Time {
	n := t.Nanos + int64(d)
	if d > 0 && n < t.Nanos {
		n = math.MaxInt64
	}
	if d < 0 && n > t.Nanos {
		n = math.MinInt64
	}
	return Time{Incarnation: t.Incarnation, Nanos: n}
}

// Sub returns t−u. Readings of different incarnations are not comparable as
// durations: Sub reports ok=false for them.
func (t Time) Sub(u Time) (d time.Duration, ok bool) {
	if t.Incarnation != u.Incarnation {
		return 0, false
	}
	return time.Duration(t.Nanos - u.Nanos), true
}

func (t Time) String() string {
	return fmt.Sprintf("%d:%s", t.Incarnation, time.Duration(t.Nanos))
}

// Scale returns d·f rounded toward zero, for the (1±ρ) factors of eq. 15.
// Rounding toward zero keeps both uses conservative: callers scale by 1−ρ
// where a shorter interval is safe and by 1+ρ where a longer one is, and
// round the latter up with ScaleUp.
func Scale(d time.Duration, f float64) time.Duration {
	return time.Duration(float64(d) * f)
}

// ScaleUp returns d·f rounded away from zero.
func ScaleUp(d time.Duration, f float64) time.Duration {
	return time.Duration(math.Ceil(float64(d) * f))
}
