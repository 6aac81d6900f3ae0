package check

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/edictlog/edictlog/jepsen/history"
)

// Availability is part of correctness: a cluster that stays safe by never
// electing a leader again is broken, and a run that shows it must not
// pass. Availability checks two bounds on a history that the harness's
// monitor observed (history.MonitorProcess events):
//
//   - No leader for longer than LeaderBound outside faults: every
//     leaderless interval (history.Leaderless) is measured from the later
//     of its start and the end of the fault in force when it began, so
//     time without a leader while a fault is in force is excused, and time
//     after the fault ended is not. After every fault ends a leader must
//     exist within the bound, and the cluster must not lose its leader for
//     longer than that between faults. (The schedule does not start the
//     next fault on a leaderless cluster until the bound has passed, so a
//     later fault never excuses a cluster that did not recover from the
//     last one.)
//   - After the final heal (history.FHeal) every member must be ready
//     (history.FReady: it answers, knows a leader, has applied what it
//     knows committed, and serves a follower read) within ReadyBound.
//
// A broken bound is an Invalid availability verdict: the run is
// "unavailable". It is separate from the safety checkers' verdicts.
type AvailabilityOptions struct {
	// LeaderBound: default 5s.
	LeaderBound time.Duration
	// ReadyBound: default 10s.
	ReadyBound time.Duration
}

// DefaultLeaderBound and DefaultReadyBound are the bounds' defaults.
const (
	DefaultLeaderBound = 5 * time.Second
	DefaultReadyBound  = 10 * time.Second
)

// LeaderlessInterval is one span without a leader, in seconds since the
// test began.
type LeaderlessInterval struct {
	Start   float64 `json:"start_s"`
	End     float64 `json:"end_s"`
	Seconds float64 `json:"seconds"`
	// After is the fault that preceded it ("name (detail)"): the one in
	// force when it began, or else the last one that had ended; "the
	// final heal" if it began after the final heal; empty if no fault had
	// run.
	After string `json:"after,omitempty"`
	// AfterStop is when that fault ended (absent: none had).
	AfterStop *float64 `json:"after_stop_s,omitempty"`
	// AfterFault is how much of it came after the fault ended (or, if it
	// began outside any fault, all of it): the time the bound counts.
	AfterFault float64 `json:"after_fault_s"`
	// Open: the history ended before a leader was seen again.
	Open bool `json:"open,omitempty"`
	// Why is what the monitor was told when it began.
	Why string `json:"why,omitempty"`
	// OverBound: AfterFault exceeds the leader bound.
	OverBound bool `json:"over_bound,omitempty"`
}

// String describes the interval in one line.
func (l LeaderlessInterval) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "no leader for %.1fs from t=%.1fs to t=%.1fs", l.Seconds, l.Start, l.End)
	if l.Open {
		b.WriteString(" (still none when the history ended)")
	}
	switch {
	case l.AfterStop != nil && l.AfterFault > 0:
		fmt.Fprintf(&b, ", %.1fs of it after the end of %s at t=%.1fs", l.AfterFault, l.After, *l.AfterStop)
	case l.AfterStop != nil:
		fmt.Fprintf(&b, ", during %s", l.After)
	case l.After != "":
		fmt.Fprintf(&b, ", after %s", l.After)
	}
	if l.Why != "" {
		fmt.Fprintf(&b, " (%s)", l.Why)
	}
	return b.String()
}

// NodeReady is one member's readiness after the final heal.
type NodeReady struct {
	Node int `json:"node"`
	// After is how long after the final heal it was ready; absent if it
	// never was.
	After *float64 `json:"ready_after_s,omitempty"`
	// Error says why it was not ready when the harness gave up.
	Error string `json:"error,omitempty"`
}

// AvailabilityResult is the availability verdict and what it rests on.
type AvailabilityResult struct {
	// Valid is Invalid when a bound was broken (the run is unavailable),
	// Unknown when the monitor recorded nothing.
	Valid       Validity `json:"valid"`
	LeaderBound float64  `json:"leader_bound_s"`
	ReadyBound  float64  `json:"ready_bound_s"`
	// Leaderless lists every span without a leader, in order.
	Leaderless []LeaderlessInterval `json:"leaderless"`
	// LeaderlessSeconds is their total length.
	LeaderlessSeconds float64 `json:"leaderless_s"`
	// LongestAfterFault is the interval with the most time without a
	// leader after a fault ended (nil: no interval outlasted its fault).
	LongestAfterFault *LeaderlessInterval `json:"longest_after_fault,omitempty"`
	// FinalHeal is when the final heal was done (absent: not recorded).
	FinalHeal *float64 `json:"final_heal_s,omitempty"`
	// Ready is each member's readiness after the final heal.
	Ready []NodeReady `json:"ready,omitempty"`
	// Violations says, one line each, which bound was broken and where.
	Violations []string `json:"violations,omitempty"`
}

// Availability checks ops against the bounds of o (see
// AvailabilityOptions).
func Availability(ops []history.Op, o AvailabilityOptions) AvailabilityResult {
	if o.LeaderBound <= 0 {
		o.LeaderBound = DefaultLeaderBound
	}
	if o.ReadyBound <= 0 {
		o.ReadyBound = DefaultReadyBound
	}
	res := AvailabilityResult{Valid: Valid, LeaderBound: o.LeaderBound.Seconds(), ReadyBound: o.ReadyBound.Seconds(),
		Leaderless: []LeaderlessInterval{}}
	observed := slices.ContainsFunc(ops, func(op history.Op) bool {
		return op.Process == history.MonitorProcess && op.F == history.FLeader
	})
	faults := history.Intervals(ops)
	heal := int64(-1)
	for _, op := range ops {
		if op.Process == history.NemesisProcess && op.F == history.FHeal {
			heal = op.Time
		}
	}
	if heal >= 0 {
		h := secs(heal)
		res.FinalHeal = &h
	}
	bound := o.LeaderBound.Nanoseconds()
	for _, g := range history.Leaderless(ops) {
		l := LeaderlessInterval{Start: secs(g.Start), End: secs(g.End), Seconds: secs(g.End - g.Start), Open: g.Open, Why: g.Why}
		from := g.Start // the bound counts from here
		if f, ok := preceding(faults, g.Start); ok {
			l.After = f.Nemesis
			if f.Detail != "" {
				l.After += " (" + f.Detail + ")"
			}
			stop := secs(f.End)
			l.AfterStop = &stop
			from = max(from, f.End)
		}
		if heal >= 0 && g.Start >= heal {
			l.After, l.AfterStop = "the final heal", nil
		}
		l.AfterFault = secs(max(g.End-from, 0))
		if g.End-from > bound {
			l.OverBound = true
			res.Violations = append(res.Violations, fmt.Sprintf("%s; bound %v", l, o.LeaderBound))
		}
		res.LeaderlessSeconds += l.Seconds
		res.Leaderless = append(res.Leaderless, l)
	}
	for i, l := range res.Leaderless {
		if l.AfterFault > 0 && (res.LongestAfterFault == nil || l.AfterFault > res.LongestAfterFault.AfterFault) {
			res.LongestAfterFault = &res.Leaderless[i]
		}
	}
	if heal >= 0 {
		res.Ready = ready(ops, heal)
		for _, r := range res.Ready {
			switch {
			case r.After == nil:
				res.Violations = append(res.Violations, fmt.Sprintf("node %d never ready after the final heal at t=%.1fs (%s); bound %v",
					r.Node, secs(heal), r.Error, o.ReadyBound))
			case *r.After > o.ReadyBound.Seconds():
				res.Violations = append(res.Violations, fmt.Sprintf("node %d ready %.1fs after the final heal at t=%.1fs; bound %v",
					r.Node, *r.After, secs(heal), o.ReadyBound))
			}
		}
	}
	switch {
	case len(res.Violations) > 0:
		res.Valid = Invalid
	case !observed:
		res.Valid = Unknown
	}
	return res
}

// preceding is the fault in force at t, or else the last one that ended
// before t.
func preceding(faults []history.Interval, t int64) (history.Interval, bool) {
	var best history.Interval
	found := false
	for _, f := range faults {
		if f.Start <= t && (!found || f.Start >= best.Start) {
			best, found = f, true
		}
	}
	return best, found
}

// ready reads the monitor's FReady events after the final heal at heal:
// the first OK per node, or the last Fail if none was OK.
func ready(ops []history.Op, heal int64) []NodeReady {
	by := map[int]*NodeReady{}
	var order []int
	for _, op := range ops {
		if op.Process != history.MonitorProcess || op.F != history.FReady || op.Time < heal {
			continue
		}
		r := by[op.Node]
		if r == nil {
			r = &NodeReady{Node: op.Node}
			by[op.Node] = r
			order = append(order, op.Node)
		}
		if r.After != nil {
			continue
		}
		if op.Type == history.OK {
			a := secs(op.Time - heal)
			r.After, r.Error = &a, ""
		} else {
			r.Error = op.Error
		}
	}
	slices.Sort(order)
	out := make([]NodeReady, 0, len(order))
	for _, id := range order {
		out = append(out, *by[id])
	}
	return out
}

// Summary says in one line what the run's availability was.
func (r AvailabilityResult) Summary() string {
	var b strings.Builder
	if l := r.LongestAfterFault; l != nil {
		fmt.Fprintf(&b, "longest leaderless after a fault ended: %.1fs (%s)", l.AfterFault, l)
	} else {
		b.WriteString("longest leaderless after a fault ended: none")
	}
	fmt.Fprintf(&b, "; %d leaderless interval(s), %.1fs in all; leader bound %gs", len(r.Leaderless), r.LeaderlessSeconds, r.LeaderBound)
	if r.FinalHeal != nil {
		readyN, slowest := 0, 0.0
		for _, n := range r.Ready {
			if n.After != nil {
				readyN++
				slowest = max(slowest, *n.After)
			}
		}
		fmt.Fprintf(&b, "; %d of %d members ready after the final heal", readyN, len(r.Ready))
		if readyN > 0 {
			fmt.Fprintf(&b, ", the last after %.1fs", slowest)
		}
		fmt.Fprintf(&b, " (ready bound %gs)", r.ReadyBound)
	}
	return b.String()
}

func secs(ns int64) float64 { return float64(ns) / 1e9 }
