package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/edictlog/edictlog/jepsen/cluster"
)

// The gray failures: nothing stops, nothing is cut off, no
// write is lost, but a disk or a host is slow. A healthy leader must keep
// its lease through them, and no write may fail for them; the checker
// counts the time without a leader after each, like after any fault.

// leaseSamples are the members' lease statistics a gray fault's summary
// reports: what it cost the leader, if anything.
var leaseSamples = []struct{ sample, what string }{
	{`edictkv_leases_lost_total{cause="expired"}`, "expired"},
	{`edictkv_leases_lost_total{cause="released"}`, "released"},
	{`edictkv_leases_lost_total{cause="suspended"}`, "given up after a suspend"},
	{"edictkv_reigns_started_total", "reigns started"},
	{"edictkv_lease_renewals_late_total", "renewals late"},
	{"edictkv_leases_lost_late_total", "leases lost to the leader's own slowness (it stood aside)"},
}

// leaseReading is leaseSamples summed over the members that answered.
type leaseReading struct {
	sums     map[string]float64
	answered []int
}

func readLeases(ctx context.Context, c Cluster) leaseReading {
	r := leaseReading{sums: map[string]float64{}}
	for _, id := range c.Members() {
		mctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		m, err := c.Metrics(mctx, id)
		cancel()
		if err != nil {
			continue
		}
		r.answered = append(r.answered, id)
		for _, s := range leaseSamples {
			r.sums[s.sample] += m[s.sample]
		}
	}
	return r
}

// since says what changed from before to r: leases lost by cause, reigns
// started and late renewals, over the members that answered both times.
func (r leaseReading) since(before leaseReading) string {
	if len(r.answered) == 0 || len(before.answered) == 0 {
		return "lease statistics unread (no member answered /metrics)"
	}
	var parts []string
	for _, s := range leaseSamples {
		parts = append(parts, fmt.Sprintf("%.0f", max(r.sums[s.sample]-before.sums[s.sample], 0))+" "+s.what)
	}
	out := "during the fault, on the members: leases lost " + strings.Join(parts[:3], ", ") + "; " + strings.Join(parts[3:], ", ")
	if !slices.Equal(r.answered, before.answered) {
		out += fmt.Sprintf(" (members read: %v, then %v)", before.answered, r.answered)
	}
	return out
}

// grayTargets picks whom a gray fault hits, in turn: the leader, a
// granter (a member that does not lead), every member.
func grayTargets(ctx context.Context, c Cluster, rng *rand.Rand, variant int) ([]int, string, error) {
	ids := liveOf(c, c.Members())
	if variant%3 == 2 {
		return ids, "every member", nil
	}
	l, err := waitLeader(ctx, c)
	if err != nil {
		return nil, "", err
	}
	if variant%3 == 0 {
		return []int{l}, "the leader", nil
	}
	others := slices.DeleteFunc(slices.Clone(ids), func(id int) bool { return id == l })
	if len(others) == 0 {
		return []int{l}, "the leader (no other member)", nil
	}
	return []int{others[rng.IntN(len(others))]}, fmt.Sprintf("a granter of leader %d", l), nil
}

// slowDisk makes the durable batches of the leader, of a granter, or of
// every member, in turn, wait 50–400 ms each before they are written,
// through the nodes' fault hook (in both modes): up to nearly a lease per
// fsync, as a failing or saturated disk takes. In netns mode the kernel's
// I/O throttle also bounds the same nodes' writes to their disk
// (cluster.ThrottleIO), where the kernel offers one; where it does not,
// the start says why. Stop turns both off and says how many batches were
// delayed.
type slowDisk struct {
	n         int
	targets   []int
	throttled []int
	before    leaseReading
	summary   string
}

// slowDiskSpec is the delay of each durable batch: from a slow disk's
// ordinary fsync to nearly a whole lease (420 ms by default).
var slowDiskSpec = cluster.Fsync{MinMS: 50, MaxMS: 400}

// slowDiskIO is the kernel throttle beside it: 8 MiB/s, and 50 write
// operations a second, so that each commit (bbolt writes its pages and
// then its meta page, each followed by an fdatasync: several operations)
// waits tens of milliseconds for its turn, more when commits queue.
var slowDiskIO = cluster.IOLimit{WriteBPS: 8 << 20, WriteIOPS: 50}

func (s *slowDisk) Name() string { return "slow-disk" }

func (s *slowDisk) Start(ctx context.Context, c Cluster, rng *rand.Rand) (string, error) {
	s.targets, s.throttled = nil, nil
	targets, who, err := grayTargets(ctx, c, rng, s.n)
	if err != nil {
		return "", err
	}
	s.n++
	s.targets, s.throttled = targets, nil
	s.before = readLeases(ctx, c)
	var errs []error
	for _, id := range targets {
		errs = append(errs, c.SetFsync(id, slowDiskSpec))
	}
	if err := errors.Join(errs...); err != nil {
		return "", err // the schedule's Stop turns off what was set
	}
	what := fmt.Sprintf("slow fsyncs on %s %v: every durable batch %d–%d ms later", who, targets, slowDiskSpec.MinMS, slowDiskSpec.MaxMS)
	var throttle string
	for _, id := range targets {
		desc, err := c.ThrottleIO(id, slowDiskIO)
		switch {
		case errors.Is(err, cluster.ErrUnsupported) && len(s.throttled) == 0:
			// The same reason for every node: say it once.
			return what + "; no kernel I/O throttle: " + err.Error(), nil
		case err != nil:
			throttle += fmt.Sprintf("; %d: kernel I/O throttle failed: %v", id, err)
		default:
			s.throttled = append(s.throttled, id)
			throttle = "; " + desc
		}
	}
	if len(s.throttled) > 0 {
		throttle = fmt.Sprintf("; and on %v %s", s.throttled, throttle[2:])
	}
	return what + throttle, nil
}

func (s *slowDisk) Stop(ctx context.Context, c Cluster) error {
	var delayed, ms uint64
	var errs []error
	for _, id := range s.targets {
		if st, err := c.HookStats(ctx, id); err == nil {
			delayed, ms = delayed+st.FsyncDelayed, ms+st.FsyncDelayMS
		}
		errs = append(errs, c.SetFsync(id, cluster.Fsync{}))
	}
	// Every target, not only those throttled: a throttle that failed
	// part way may have left its cgroup (lifting none is a no-op).
	for _, id := range s.targets {
		errs = append(errs, c.UnthrottleIO(id))
	}
	s.summary = fmt.Sprintf("on %v: %d durable batches delayed, %d ms in all (counts of processes that did not restart meanwhile)",
		s.targets, delayed, ms)
	if len(s.throttled) > 0 {
		s.summary += fmt.Sprintf("; kernel I/O throttle lifted on %v", s.throttled)
	}
	s.summary += "; " + readLeases(ctx, c).since(s.before)
	s.targets, s.throttled = nil, nil
	return errors.Join(errs...)
}

func (s *slowDisk) Summary() string { return s.summary }

// diskHog runs a real writer beside the nodes, on the filesystem of their
// data directories, for the fault's duration: 300 MiB files written in
// 1 MiB blocks and fsynced, one after another (dd bs=1M count=300
// conv=fsync in a loop). The nodes' own fsyncs then queue behind its
// writeback. Stop stops it, removes its files, and says what it wrote.
type diskHog struct {
	running bool
	before  leaseReading
	summary string
}

var diskHogSpec = cluster.DiskHogSpec{FileMB: 300}

func (d *diskHog) Name() string { return "disk-hog" }

func (d *diskHog) Start(ctx context.Context, c Cluster, rng *rand.Rand) (string, error) {
	d.before = readLeases(ctx, c)
	if err := c.StartDiskHog(diskHogSpec); err != nil {
		return "", err
	}
	d.running = true
	return fmt.Sprintf("a writer beside the nodes on their filesystem: %d MiB files in 1 MiB blocks, each fsynced, one after another",
		diskHogSpec.FileMB), nil
}

func (d *diskHog) Stop(ctx context.Context, c Cluster) error {
	if !d.running {
		d.summary = "no writer ran"
		return nil
	}
	d.running = false
	st, err := c.StopDiskHog()
	d.summary = fmt.Sprintf("wrote %d MiB: %d whole files fsynced, the longest fsync %v, %v in all; files removed; %s",
		st.MB, st.Files, st.FsyncMax.Round(time.Millisecond), st.FsyncTime.Round(time.Millisecond), readLeases(ctx, c).since(d.before))
	return err
}

func (d *diskHog) Summary() string { return d.summary }

// cpuStarve starves a node of CPU as a busy host would, for the fault's
// duration, in turn: the leader, a granter, every member (each on its own
// rhythm) in bursts — SIGSTOP for 10–100 ms, then SIGCONT and 20–200 ms of
// running, again and again — and, in netns mode where the kernel offers a
// CPU quota, the leader held to 10% of a CPU (10 ms in every 100 ms, all
// its threads together) instead; where it does not, that turn is bursts on
// the leader, and the start says why. Stop ends the bursts (every burst
// ends with its SIGCONT) and lifts the quota.
type cpuStarve struct {
	n       int
	targets []int
	limited []int
	cancel  context.CancelFunc
	done    sync.WaitGroup

	before leaseReading

	mu      sync.Mutex
	bursts  int
	stopped time.Duration
	longest time.Duration
	failed  []error
	summary string
}

// The bursts: stopped, then running.
const (
	starveMinStop, starveMaxStop = 10 * time.Millisecond, 100 * time.Millisecond
	starveMinRun, starveMaxRun   = 20 * time.Millisecond, 200 * time.Millisecond
	// starveShare is the CPU quota's share of one CPU.
	starveShare = 0.1
)

func (s *cpuStarve) Name() string { return "cpu-starve" }

func (s *cpuStarve) Start(ctx context.Context, c Cluster, rng *rand.Rand) (string, error) {
	s.targets, s.limited = nil, nil
	variant := s.n % 4
	s.n++
	targets, who, err := grayTargets(ctx, c, rng, variant) // the quota's turn: the leader
	if err != nil {
		return "", err
	}
	s.targets, s.limited = targets, nil
	s.before = readLeases(ctx, c)
	s.mu.Lock()
	s.bursts, s.stopped, s.longest, s.failed = 0, 0, 0, nil
	s.mu.Unlock()
	bursts := fmt.Sprintf("SIGSTOP bursts of %v–%v, %v–%v apart", starveMinStop, starveMaxStop, starveMinRun, starveMaxRun)
	var note string
	if variant == 3 {
		desc, err := c.LimitCPU(targets[0], starveShare)
		if err == nil {
			s.limited = targets
			return fmt.Sprintf("starve %s %v: %s", who, targets, desc), nil
		}
		note = fmt.Sprintf(" (instead of a CPU quota: %v)", err)
	}
	bctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	for _, id := range targets {
		seed := rng.Uint64()
		s.done.Add(1)
		go func() {
			defer s.done.Done()
			s.burst(bctx, c, id, rand.New(rand.NewPCG(seed, uint64(id))))
		}()
	}
	return fmt.Sprintf("starve %s %v: %s%s", who, targets, bursts, note), nil
}

// burst stalls node id again and again until ctx ends.
func (s *cpuStarve) burst(ctx context.Context, c Cluster, id int, rng *rand.Rand) {
	between := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo)+1)) }
	for ctx.Err() == nil {
		d := between(starveMinStop, starveMaxStop)
		start := time.Now()
		err := c.Stall(ctx, id, d)
		took := time.Since(start)
		s.mu.Lock()
		if err != nil {
			if len(s.failed) < 3 {
				s.failed = append(s.failed, err)
			}
		} else {
			s.bursts++
			s.stopped += took
			s.longest = max(s.longest, took)
		}
		s.mu.Unlock()
		if !sleepCtx(ctx, between(starveMinRun, starveMaxRun)) {
			return
		}
	}
}

func (s *cpuStarve) Stop(ctx context.Context, c Cluster) error {
	if s.cancel != nil {
		s.cancel()
		s.done.Wait()
		s.cancel = nil
	}
	var errs []error
	// Every target: a quota that failed part way may have left its
	// cgroup (lifting none is a no-op).
	for _, id := range s.targets {
		errs = append(errs, c.UnlimitCPU(id))
	}
	// Read once the nodes run freely again.
	leases := readLeases(ctx, c).since(s.before)
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.limited) > 0 {
		s.summary = fmt.Sprintf("CPU quota lifted on %v", s.limited)
	} else {
		s.summary = fmt.Sprintf("on %v: %d bursts, stopped %v in all, the longest %v", s.targets, s.bursts,
			s.stopped.Round(time.Millisecond), s.longest.Round(time.Millisecond))
		if len(s.failed) > 0 {
			// A node that was not running (a restart) cannot be
			// stalled; not an error of the fault.
			s.summary += fmt.Sprintf("; some bursts failed: %v", errors.Join(s.failed...))
		}
	}
	s.summary += "; " + leases
	s.targets, s.limited = nil, nil
	return errors.Join(errs...)
}

func (s *cpuStarve) Summary() string { return s.summary }
