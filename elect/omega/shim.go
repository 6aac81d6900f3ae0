package omega

import (
	"math/rand/v2"
	"slices"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect"
)

// This file lets the scenarios make single links slow or lossy, which
// detsim cannot (its delay bounds and loss rate are global and fixed at
// New, and a partition drops messages rather than delaying them). The
// shim sits in front of the receiving instance: it is a simulated link,
// not part of the algorithm.

// rule acts on the messages from → to (None: any) that arrive in virtual
// time [after, until): with release > 0 they are held until release (a
// slow reliable link, §2); otherwise each is dropped with probability drop
// (a lossy link that is not yet good).
type rule struct {
	from, to     edict.ProcessID
	after, until time.Duration
	release      time.Duration
	drop         float64
}

type held struct {
	from    edict.ProcessID
	payload []byte
	release time.Duration
}

// shim wraps one instance. Virtual time is read as the clock's Nanos,
// exact for the Rho = 0 runs that hold messages.
type shim struct {
	inner elect.Protocol
	id    edict.ProcessID
	rules []rule
	rng   *rand.Rand
	held  []held
}

func (s *shim) Observe(o elect.Observation)               { s.inner.Observe(o) }
func (s *shim) WeakLeader(now edict.Time) edict.ProcessID { return s.inner.WeakLeader(now) }
func (s *shim) Outbox() []elect.Outgoing                  { return s.inner.Outbox() }

func (s *shim) NextTick() edict.Time {
	next := s.inner.NextTick()
	for _, h := range s.held {
		t := edict.Time{Incarnation: next.Incarnation, Nanos: int64(h.release)}
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	return next
}

func (s *shim) Tick(now edict.Time) {
	keep := s.held[:0]
	var due []held
	for _, h := range s.held {
		if time.Duration(now.Nanos) >= h.release {
			due = append(due, h)
		} else {
			keep = append(keep, h)
		}
	}
	s.held = keep
	for _, h := range due {
		s.inner.Receive(now, h.from, h.payload)
	}
	if next := s.inner.NextTick(); !next.IsZero() && !now.Before(next.Add(-tickSlack)) {
		s.inner.Tick(now)
	}
}

func (s *shim) Receive(now edict.Time, from edict.ProcessID, payload []byte) {
	t := time.Duration(now.Nanos)
	for _, r := range s.rules {
		if (r.from != edict.None && r.from != from) || (r.to != edict.None && r.to != s.id) || t < r.after || t >= r.until {
			continue
		}
		if r.release > 0 {
			s.held = append(s.held, held{from: from, payload: slices.Clone(payload), release: r.release})
			return
		}
		if s.rng.Float64() < r.drop {
			return
		}
	}
	s.inner.Receive(now, from, payload)
}
