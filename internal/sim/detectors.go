package sim

import (
	"fmt"
	"slices"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect"
	"github.com/edictlog/edictlog/wire"
)

// DetectorFigures are what one weak leader election does to the lease
// protocol in a scripted run (MeasureDetector): how long the cluster is
// without a leaseholder after each fault, how many lease attempts fail per
// election, and how many messages the whole protocol sends when nothing
// happens.
type DetectorFigures struct {
	// SteadyMsgsPerSec counts every message (lease and detector) per
	// second while a leader is settled and nothing fails.
	SteadyMsgsPerSec float64
	// AfterCrash is the time without a leaseholder after the leader
	// crashes; FailedAttempts the lease attempts in that election that
	// did not win.
	AfterCrash     time.Duration
	FailedAttempts int
	// AfterPartition is the time without a leaseholder able to reach a
	// majority after the leader is cut off from every other process.
	AfterPartition time.Duration
	// AfterRecovery is the time without a leaseholder caused by a
	// process with a lower id than the leader's coming back (zero for an
	// election that keeps a healthy leader).
	AfterRecovery time.Duration
	// Violation is the safety checker's verdict (the script also runs
	// under the checker).
	Violation string
}

// MeasureDetector runs sc (its Detector, N and timings; its random faults
// are ignored) through a fixed script from a timely start: settle, a
// leader crash, the recovery of a lower id than the new leader's, and the
// leader cut off by a partition, measuring each from ground truth.
func MeasureDetector(sc Scenario, seed uint64) (DetectorFigures, error) {
	// The script's faults come after "GST" in spirit, but the checker's
	// after-GST properties (no leader change) would flag them, and the
	// network ignores partitions after GST: GST is put past the script's
	// end. With no loss, duplication or long delays configured, the
	// network is timely all the same.
	sc.GST, sc.Duration = time.Hour, time.Hour
	sc.Loss, sc.Duplicate, sc.LongDelay = 0, 0, 0
	sc = sc.withDefaults()
	r := &run{w: newWorld(seed), sc: sc, procs: map[edict.ProcessID]*process{}, byType: map[wire.LeaseType]int{}}
	r.gst, r.end = int64(time.Hour), int64(time.Hour)
	r.net = &network{w: r.w, sc: &r.sc, gst: r.gst}
	r.chk = newChecker(r)
	for i := range sc.N {
		r.ids = append(r.ids, edict.ProcessID(i+1))
	}
	r.epochs = []wire.EpochConfig{{Epoch: 0, Members: slices.Clone(r.ids)}}
	for _, id := range r.ids {
		r.procs[id] = r.newProcess(id)
		r.start(r.procs[id], r.epochs)
	}
	var f DetectorFigures
	fail := func(format string, args ...any) (DetectorFigures, error) {
		f.Violation = r.chk.violation
		return f, fmt.Errorf("%s: "+format, append([]any{sc.Name}, args...)...)
	}

	// Settle, then count a second of quiet traffic.
	if !r.runFor(2 * time.Second) {
		return fail("violation while settling: %s", r.chk.violation)
	}
	leader := r.holder(nil)
	if leader == nil {
		return fail("no leaseholder after 2s")
	}
	sent := r.net.sent
	if !r.runFor(time.Second) {
		return fail("violation in steady state: %s", r.chk.violation)
	}
	f.SteadyMsgsPerSec = float64(r.net.sent - sent)

	// The leader crashes.
	crashed := leader
	crashed.up = false
	r.reportTo(crashed.id, elect.ProcessDown)
	starts := r.attemptStarts()
	gap, next := r.untilHolder(nil, 10*time.Second)
	if next == nil {
		return fail("no new leaseholder within 10s of the leader's crash")
	}
	f.AfterCrash = gap
	f.FailedAttempts = max(0, r.attemptStarts()-starts-1)

	// A process with a lower id than the new leader's comes back (the
	// crashed leader if its id is lower, else the lowest live one after a
	// crash of its own).
	r.runFor(500 * time.Millisecond)
	lower := crashed
	if lower.id > next.id {
		lower = nil
		for _, id := range r.ids {
			if p := r.procs[id]; id < next.id && p.up {
				lower = p
				break
			}
		}
		if lower != nil {
			lower.up = false
			r.reportTo(lower.id, elect.ProcessDown)
			r.runFor(time.Second)
		}
	}
	if lower != nil {
		r.restart(lower)
		f.AfterRecovery = r.leaderlessFor(3 * time.Second)
	}
	if !r.runFor(time.Second) {
		return fail("violation after the recovery: %s", r.chk.violation)
	}

	// The leader is cut off from everyone else.
	l := r.holder(nil)
	if l == nil {
		return fail("no leaseholder before the partition")
	}
	var rest []*process
	for _, id := range r.ids {
		if id != l.id {
			rest = append(rest, r.procs[id])
		}
	}
	r.net.partition([]edict.ProcessID{l.id}, r.ids, false)
	gap, next = r.untilHolder(rest, 10*time.Second)
	if next == nil {
		return fail("no leaseholder on the majority side within 10s of the partition")
	}
	f.AfterPartition = gap
	r.net.heal()
	if !r.runFor(time.Second) {
		return fail("violation after healing: %s", r.chk.violation)
	}
	f.Violation = r.chk.violation
	return f, nil
}

// runFor advances the run by d, checking every step; false on a violation.
func (r *run) runFor(d time.Duration) bool {
	end := r.w.now + int64(d)
	for r.chk.violation == "" && r.w.step(end) {
		r.chk.check()
	}
	r.w.now = max(r.w.now, end)
	return r.chk.violation == ""
}

// holder is the process of among (every process if nil) that holds a
// valid lease now, if any.
func (r *run) holder(among []*process) *process {
	for _, id := range r.ids {
		p := r.procs[id]
		if among != nil && !slices.Contains(among, p) {
			continue
		}
		if p.up && p.core.IsLeader(p.now(r.w.now)) {
			return p
		}
	}
	return nil
}

// untilHolder runs until a process among among holds a lease, and says
// how long that took.
func (r *run) untilHolder(among []*process, limit time.Duration) (time.Duration, *process) {
	start := r.w.now
	for r.chk.violation == "" && r.w.now-start < int64(limit) {
		if p := r.holder(among); p != nil {
			return time.Duration(r.w.now - start), p
		}
		if !r.w.step(start + int64(limit)) {
			break
		}
		r.chk.check()
	}
	return time.Duration(r.w.now - start), nil
}

// leaderlessFor runs for d and returns how long no process held a lease.
func (r *run) leaderlessFor(d time.Duration) time.Duration {
	end := r.w.now + int64(d)
	var without int64
	last := r.w.now
	for r.chk.violation == "" && r.w.step(end) {
		if r.holder(nil) == nil {
			without += r.w.now - last
		}
		last = r.w.now
		r.chk.check()
	}
	if r.holder(nil) == nil {
		without += end - last
	}
	r.w.now = max(r.w.now, end)
	return time.Duration(without)
}

// attemptStarts counts the lease attempts begun so far: distinct (sender,
// Start) pairs of grant requests that are not wedges.
func (r *run) attemptStarts() int { return len(r.attempts) }
