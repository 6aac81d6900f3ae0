package sim

import (
	"fmt"
	"time"

	"github.com/edictlog/edictlog/edict"
)

// The crash-point explorer puts a crash exactly where a process's memory
// runs ahead of its disk: at a durability boundary. A boundary is a
// moment, before GST, at which the process has handed its store a write
// that is not yet durable and has just done something that others may
// rely on or that a later step completes:
//   - it sent a message (a reply, a grant, a wedge answer, an append)
//     while a write was pending;
//   - it finished one write while another was pending;
//   - it published a snapshot and has not yet written what follows it
//     (an installed snapshot's log reset, its own snapshot's compaction).
//
// A run that counts (crashPlan.count not nil) numbers each process's
// boundaries; a run that replays the same seed with at and k set crashes
// process at at its k-th boundary, losing every write still queued, and
// restarts it a moment later. Until the crash the two runs are the same
// (counting consumes no randomness), so the crash lands on the boundary
// the counting run saw. TestCrashPoints crashes every process at every
// boundary of small scenarios, and a random sample of them beyond; the
// checkers, the send-time check among them, then look at what the crash
// left.
type crashPlan struct {
	count map[edict.ProcessID]int
	at    edict.ProcessID
	k     int
	down  time.Duration
	where string
}

// boundary is a durability boundary of p's if pending; what describes it
// for a report (only called when the crash strikes).
func (r *lrun) boundary(p *lproc, what func() string, pending bool) {
	c := &r.crashes
	if !pending || c.count == nil || r.w.now >= r.gst || !p.up || r.violation != "" {
		return
	}
	c.count[p.id]++
	if p.id != c.at || c.count[p.id] != c.k {
		return
	}
	c.where = fmt.Sprintf("t=%v: %v's boundary %d: %s", time.Duration(r.w.now), p.id, c.k, what())
	p.crashFor = c.down
	if p.crashFor == 0 {
		p.crashFor = time.Millisecond
	}
	r.crashNow(p)
}

// CrashPoint names one crash of the explorer: process At at its K-th
// durability boundary.
type CrashPoint struct {
	At edict.ProcessID
	K  int
}

// CountCrashPoints runs a seed of sc and returns how many durability
// boundaries each process passed before GST (noSendCheck as for
// RunLogCrashingAt).
func CountCrashPoints(sc LogScenario, seed uint64, noSendCheck bool) (LogResult, map[edict.ProcessID]int) {
	res := runLog(sc, seed, runOptions{noSendCheck: noSendCheck, crashes: crashPlan{count: map[edict.ProcessID]int{}}})
	return res, res.Boundaries
}

// RunLogCrashingAt runs a seed of sc and crashes cp.At at its cp.K-th
// durability boundary, for down (a millisecond if 0). With noSendCheck
// the send-time check is off: what the crash leaves must then show in the
// other checkers.
func RunLogCrashingAt(sc LogScenario, seed uint64, cp CrashPoint, down time.Duration, noSendCheck bool) LogResult {
	return runLog(sc, seed, runOptions{noSendCheck: noSendCheck,
		crashes: crashPlan{count: map[edict.ProcessID]int{}, at: cp.At, k: cp.K, down: down}})
}

// CrashPointScenarios are the small scenarios the explorer covers every
// boundary of: three processes, a few clients, a disk that takes some
// milliseconds (so that writes are pending when messages leave), and one
// story each: a member replaced (epochs, wedges, a learner's snapshot), a
// snapshot installed on a follower that fell behind, leadership moved;
// and the install stories again with a state machine that keeps its own
// state (DiskState).
// One of the three disks is slow (but in the reset story, whose
// snapshots come every two entries and keep no trailing entries, so that
// the cut-off leader's log reaches past the snapshot it is sent: there a
// slow disk's queue of resets only grows), so memory runs far ahead of
// the disk on one process while the others go on.
func CrashPointScenarios() []LogScenario {
	base := func(name string) Scenario {
		return Scenario{Name: name, N: 3, GST: 3 * time.Second, Duration: 6 * time.Second}
	}
	return []LogScenario{
		{Scenario: base("crash-replacement"), Clients: 4, Membership: true, Replacements: 1, Snapshots: true,
			Fsync: 4 * time.Millisecond, SlowDisks: 1, SlowFsync: 40 * time.Millisecond},
		{Scenario: base("crash-snapshot-install"), Clients: 4, Snapshots: true, CutOff: 1200 * time.Millisecond,
			Fsync: 4 * time.Millisecond, SlowDisks: 1, SlowFsync: 40 * time.Millisecond},
		{Scenario: short(base("crash-snapshot-reset")), Clients: 6, Snapshots: true, SnapshotEvery: 2, TrailingEntries: -1, CutOff: 1200 * time.Millisecond, CutLeader: true,
			Fsync: 4 * time.Millisecond},
		{Scenario: withTransfers(base("crash-leader-change")), Clients: 4,
			Fsync: 4 * time.Millisecond, SlowDisks: 1, SlowFsync: 40 * time.Millisecond},
		// The install and reset stories with a state machine that keeps
		// its own state: crashes between its syncs and the log's writes,
		// between a copy made for a peer and its stream, between a
		// snapshot staged in the state machine's store and its record,
		// between the record and the install, between an installed
		// snapshot's restore (or install) and the log's reset.
		{Scenario: base("crash-disk-state-install"), Clients: 4, Snapshots: true, CutOff: 1200 * time.Millisecond, DiskState: true,
			Fsync: 4 * time.Millisecond, SlowDisks: 1, SlowFsync: 40 * time.Millisecond},
		{Scenario: short(base("crash-disk-state-reset")), Clients: 6, Snapshots: true, SnapshotEvery: 2, TrailingEntries: -1, CutOff: 1200 * time.Millisecond, CutLeader: true,
			DiskState: true, Fsync: 4 * time.Millisecond},
	}
}

func withTransfers(sc Scenario) Scenario { sc.Transfers = true; return sc }

// short ends the faults sooner: a story told in its first second.
func short(sc Scenario) Scenario {
	sc.GST, sc.Duration = 1500*time.Millisecond, 4500*time.Millisecond
	return sc
}
