// Package nemesis injects the faults of a Jepsen-style test on a schedule
// and records each one's start and end in the history: network partitions
// of several shapes, crashes and restarts, pauses longer than a lease,
// clock-rate faults within and beyond the drift bound ρ, membership
// changes (adds, removes, replacements, the leader removed, a member that
// lost its disk added back; alone, under a partition, while a member is
// killed, during a leadership transfer, or about a member whose disk is
// slow and which is killed while its memory runs ahead of its disk),
// leadership transfers, message delay, duplication and reordering,
// instant kill-and-restart of the leader's granters, snapshot installs
// under load, and gray failures: slow fsyncs (with the
// kernel's I/O throttle where it offers one), a writer beside the nodes
// on their disk, and CPU starvation (SIGSTOP bursts, or the kernel's CPU
// quota). Faults that act in several steps record each step, timestamped,
// as an event of the nemesis.
//
// Every fault is undone by its own stop, also when its start or its steps
// failed part way (the schedule runs the stop after a failed start), and
// the schedule then has the cluster undo whatever is still in force
// (Cluster.HealLeftovers) and records what that was, so that one fault's
// failure never carries into the next. A fault aims at processes that
// run: a member that could not start is the product's failure, recorded
// by the cluster, and no fault's target. A test ends with every node up
// (but those), connected, at clock rate 1, without message delay or slow
// fsyncs, unthrottled, and no writer beside them.
package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/edictlog/edictlog/jepsen/cluster"
	"github.com/edictlog/edictlog/jepsen/history"
)

// Cluster is what the nemesis needs from the cluster under test.
type Cluster interface {
	// Members are the ids of the current members (up or not).
	Members() []int
	// Live are the processes, members or not, that run now: not killed,
	// not paused, not a process that could not start.
	Live() []int
	// HealLeftovers undoes every fault still in force (a partition, a
	// process killed or paused, a clock rate, a delay, a slow fsync, a
	// kernel throttle, the disk hog) and says what it undid, "" if
	// nothing. A process that could not start stays down: its failure is
	// the product's, and recorded.
	HealLeftovers(ctx context.Context) (string, error)
	// Block makes each node drop all traffic with the nodes listed for it
	// (and they with it); nil heals the network.
	Block(blocked map[int][]int) error
	Kill(id int) error
	Restart(id int) error
	Pause(id int) error
	Resume(id int) error
	SetClockRate(id int, rate float64) error
	Leader(ctx context.Context) (int, error)
	Transfer(ctx context.Context, to int) error
	// StartJoiner starts a new process (a new id) that joins the
	// cluster; it is no member until AddLearner and Promote.
	StartJoiner(ctx context.Context) (int, error)
	// AddLearner adds a process as a learner (through the leader). The
	// admin requests (AddLearner, Promote, Remove, Transfer) return an
	// error wrapping ErrRefused when the server refuses the change.
	AddLearner(ctx context.Context, id int) error
	// Promote makes a learner a member once the leader accepts it (it
	// refuses a learner far behind), asking again until then or until ctx
	// ends; Members includes it afterwards.
	Promote(ctx context.Context, id int) error
	// Remove takes a member or learner out (through the leader) and stops
	// its process; Members no longer includes it.
	Remove(ctx context.Context, id int) error
	// Wipe empties a killed node's data directory (a lost disk); the
	// node stays down.
	Wipe(id int) error
	// Rejoin starts a wiped node that was removed again, same id and
	// address, as a process that joins (then AddLearner and Promote).
	Rejoin(ctx context.Context, id int) error
	// SyncMembers sets Members from the leader's view, after a change
	// whose outcome is unknown.
	SyncMembers(ctx context.Context) error
	// Bounce SIGKILLs a node and starts it again at once, without
	// waiting for it to answer; down is the time from kill to exec.
	Bounce(id int) (down time.Duration, err error)
	// WaitUp waits until a node answers HTTP.
	WaitUp(ctx context.Context, id int) error
	// SetDelay sets a node's delay fault (the zero Delay: none).
	SetDelay(id int, d cluster.Delay) error
	// HookStats reads a node's fault-hook counters.
	HookStats(ctx context.Context, id int) (cluster.HookStats, error)
	// SetFsync sets a node's fsync delay (the zero Fsync: none).
	SetFsync(id int, d cluster.Fsync) error
	// ThrottleIO bounds a node's writes to its disk with the kernel's
	// throttle, and describes it; an error wrapping
	// cluster.ErrUnsupported says why it cannot here. UnthrottleIO lifts
	// it.
	ThrottleIO(id int, l cluster.IOLimit) (string, error)
	UnthrottleIO(id int) error
	// LimitCPU holds a node to share of one CPU with the kernel's quota,
	// and describes it; cluster.ErrUnsupported as for ThrottleIO.
	// UnlimitCPU lifts it.
	LimitCPU(id int, share float64) (string, error)
	UnlimitCPU(id int) error
	// Stall stops a node's process for d and continues it, even if ctx
	// ends first.
	Stall(ctx context.Context, id int, d time.Duration) error
	// StartDiskHog starts a writer beside the nodes on their filesystem;
	// StopDiskHog stops it and removes its files.
	StartDiskHog(spec cluster.DiskHogSpec) error
	StopDiskHog() (cluster.DiskHogStats, error)
	// Metrics reads a node's /metrics (sample with labels → value).
	Metrics(ctx context.Context, id int) (map[string]float64, error)
	Status(ctx context.Context, id int) (cluster.Status, error)
}

// ErrRefused is what an admin request returns, wrapped, when the server
// refused the change (it said no; asking again will not help).
var ErrRefused = errors.New("refused by the server")

// Fault is one kind of fault.
type Fault interface {
	// Name is what --nemesis calls it.
	Name() string
	// Start injects the fault and describes what it did. An error wrapping
	// the value skip returns says the fault chose not to start.
	Start(ctx context.Context, c Cluster, rng *rand.Rand) (string, error)
	// Stop undoes it: everything Start and the script did, whatever
	// failed on the way. The schedule calls it after a Start that failed
	// too, so it must undo a fault that was never injected, or injected
	// in part.
	Stop(ctx context.Context, c Cluster) error
}

// skipError is a fault that chose not to start, and why.
type skipError struct{ why string }

func (e *skipError) Error() string { return "skipped: " + e.why }

// skip returns the error of a fault that chose not to start (or a change
// that chose not to go on): the schedule records it as skipped, not failed.
func skip(format string, args ...any) error { return &skipError{why: fmt.Sprintf(format, args...)} }

// Scripted is a fault that keeps acting after Start: the schedule runs
// Script right after recording the start, while the hold runs, and records
// every step it reports, with its time, as an FEvent of the nemesis. The
// fault lasts until both the hold and the script are over; then Stop
// undoes it. Script ends early when ctx does.
type Scripted interface {
	Fault
	Script(ctx context.Context, c Cluster, rng *rand.Rand, step func(format string, args ...any))
}

// Summarized is a fault that says, after Stop, what it did in all (the
// stop event's Detail).
type Summarized interface {
	Fault
	Summary() string
}

// Schedule runs faults one at a time: Quiet without a fault, then the next
// fault (round robin) for Hold, until ctx ends.
type Schedule struct {
	Faults      []Fault
	Quiet, Hold time.Duration
	// LeaderWait, if positive, holds each fault back after the quiet
	// until a node leads, for up to LeaderWait: the availability checker
	// counts time without a leader from the end of the fault before, and
	// a fault started on a cluster that has not recovered from the last
	// one would excuse it. (A cluster leaderless that long has broken the
	// bound already.)
	LeaderWait time.Duration
	Seed       uint64
	// Logf reports what happens (optional).
	Logf func(format string, args ...any)
}

// Run runs the schedule and undoes the last fault before returning.
func (s *Schedule) Run(ctx context.Context, c Cluster, rec *history.Recorder) error {
	rng := rand.New(rand.NewPCG(s.Seed, 0x6e656d))
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(s.Quiet):
		}
		if s.LeaderWait > 0 {
			if _, err := waitLeaderFor(ctx, c, s.LeaderWait); err != nil && ctx.Err() == nil {
				s.logf("nemesis: no leader %v after the quiet; starting the next fault anyway", s.LeaderWait)
			}
		}
		if ctx.Err() != nil {
			return nil
		}
		s.one(ctx, c, rec, rng, s.Faults[i%len(s.Faults)])
		if ctx.Err() != nil {
			return nil
		}
	}
}

// one runs fault f: its start, its script and hold, its stop, and the
// heal of whatever it left in force, each recorded.
func (s *Schedule) one(ctx context.Context, c Cluster, rec *history.Recorder, rng *rand.Rand, f Fault) {
	// The fault acts from the first step of its injection; a start
	// that failed (it waited for a leader in vain, mostly) injected
	// nothing worth a span of its own.
	began := rec.Now()
	detail, err := f.Start(ctx, c, rng)
	if err != nil {
		// A start may fail part way (one node of three killed, the
		// rules in some namespaces): undo it before the next fault.
		what := "failed: " + errString(err)
		var sk *skipError
		if errors.As(err, &sk) {
			what = errString(err)
		}
		s.logf("nemesis %s: start %s", f.Name(), what)
		rec.Add(history.Op{Process: history.NemesisProcess, Type: history.Info, F: history.FStart, Nemesis: f.Name(), Detail: what})
		stop := history.Op{Process: history.NemesisProcess, Type: history.Info, F: history.FStop, Nemesis: f.Name()}
		if err := f.Stop(context.WithoutCancel(ctx), c); err != nil {
			stop.Detail = "undo failed: " + errString(err)
			s.logf("nemesis %s: undo after the failed start failed: %v", f.Name(), err)
		}
		s.healLeftovers(ctx, c, rec, f.Name())
		rec.Add(stop)
		return
	}
	rec.Add(history.Op{Process: history.NemesisProcess, Type: history.Info, F: history.FStart, Nemesis: f.Name(), Detail: detail, Began: began})
	s.logf("nemesis %s: %s", f.Name(), detail)
	scripted := make(chan struct{})
	if sf, ok := f.(Scripted); ok {
		go func() {
			defer close(scripted)
			sf.Script(ctx, c, rng, func(format string, args ...any) {
				d := fmt.Sprintf(format, args...)
				rec.Add(history.Op{Process: history.NemesisProcess, Type: history.Info, F: history.FEvent, Nemesis: f.Name(), Detail: d})
				s.logf("nemesis %s: %s", f.Name(), d)
			})
		}()
	} else {
		close(scripted)
	}
	select {
	case <-ctx.Done():
	case <-time.After(s.Hold):
	}
	<-scripted
	// Undo even when the test is over: it must end healed.
	err = f.Stop(context.WithoutCancel(ctx), c)
	stop := history.Op{Process: history.NemesisProcess, Type: history.Info, F: history.FStop, Nemesis: f.Name()}
	if sf, ok := f.(Summarized); ok {
		stop.Detail = sf.Summary()
	}
	if err != nil {
		stop.Detail = strings.TrimPrefix(stop.Detail+"; stop failed: "+errString(err), "; ")
		s.logf("nemesis %s: stop failed: %v", f.Name(), err)
	} else if stop.Detail != "" {
		s.logf("nemesis %s: stopped: %s", f.Name(), stop.Detail)
	}
	// Whatever the stop did not undo (it failed part way, or a
	// process crashed meanwhile) is undone before the next fault.
	s.healLeftovers(ctx, c, rec, f.Name())
	rec.Add(stop)
}

// healLeftovers undoes whatever fault is still in force after fault
// name's stop, and records what that was as an event of the fault.
func (s *Schedule) healLeftovers(ctx context.Context, c Cluster, rec *history.Recorder, name string) {
	did, err := c.HealLeftovers(context.WithoutCancel(ctx))
	if did == "" && err == nil {
		return
	}
	d := "healed what was left in force: " + did
	if did == "" {
		d = "healing what was left in force"
	}
	if err != nil {
		d += "; failed: " + errString(err)
	}
	rec.Add(history.Op{Process: history.NemesisProcess, Type: history.Info, F: history.FEvent, Nemesis: name, Detail: d})
	s.logf("nemesis %s: %s", name, d)
}

func (s *Schedule) logf(format string, args ...any) {
	if s.Logf != nil {
		s.Logf(format, args...)
	}
}

// Known lists the faults ByName builds, for help texts.
const Known = "partition, kill, pause, clock, clock-beyond-rho, membership, transfer, delay, bounce, snapshot-install, " +
	"slow-disk, disk-hog, cpu-starve, " +
	"member-add, member-remove, member-replace, member-remove-leader, member-rejoin, member-partition, member-kill, member-transfer, member-slow-disk"

// ByName builds the faults --nemesis names; rho is the cluster's drift
// bound and lease its longest lease (pauses outlast it).
func ByName(names []string, rho float64, lease time.Duration) ([]Fault, error) {
	var out []Fault
	for _, n := range names {
		switch n {
		case "partition":
			out = append(out, &partition{})
		case "kill":
			out = append(out, &kill{})
		case "pause":
			out = append(out, &pause{lease: lease})
		case "clock":
			out = append(out, &clock{rho: rho})
		case "clock-beyond-rho":
			out = append(out, &clockBeyond{})
		case "transfer":
			out = append(out, &transfer{})
		case "delay":
			out = append(out, &delay{lease: lease})
		case "bounce":
			out = append(out, &bounce{lease: lease})
		case "snapshot-install":
			out = append(out, &snapshotInstall{})
		case "slow-disk":
			out = append(out, &slowDisk{})
		case "disk-hog":
			out = append(out, &diskHog{})
		case "cpu-starve":
			out = append(out, &cpuStarve{})
		default:
			if plans := membershipFaults[n]; plans != nil {
				out = append(out, &membership{name: n, plans: plans})
				continue
			}
			return nil, fmt.Errorf("unknown nemesis %q (known: %s)", n, Known)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no nemesis named")
	}
	return out, nil
}

// groups turns a partition into groups into what Block takes: every node
// blocks every node outside its group.
func groups(all []int, gs ...[]int) map[int][]int {
	where := map[int]int{}
	for i, g := range gs {
		for _, id := range g {
			where[id] = i
		}
	}
	out := map[int][]int{}
	for _, a := range all {
		for _, b := range all {
			ga, oka := where[a]
			gb, okb := where[b]
			if a != b && (!oka || !okb || ga != gb) {
				out[a] = append(out[a], b)
			}
		}
	}
	return out
}

func shuffled(rng *rand.Rand, ids []int) []int {
	out := slices.Clone(ids)
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// waitLeader asks for the leader for up to leaderWait: faults aimed at the
// leader or its granters start after a short election rather than fail.
func waitLeader(ctx context.Context, c Cluster) (int, error) {
	return waitLeaderFor(ctx, c, leaderWait)
}

// waitLeaderFor asks for the leader until one leads or d has passed.
func waitLeaderFor(ctx context.Context, c Cluster, d time.Duration) (int, error) {
	deadline := time.Now().Add(d)
	for {
		l, err := c.Leader(ctx)
		if err == nil || time.Now().After(deadline) {
			return l, err
		}
		select {
		case <-ctx.Done():
			return 0, err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

const leaderWait = 5 * time.Second
