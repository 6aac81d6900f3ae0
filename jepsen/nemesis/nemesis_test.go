package nemesis

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edictlog/edictlog/jepsen/cluster"
	"github.com/edictlog/edictlog/jepsen/history"
)

// fakeCluster records what the nemesis asked for.
type fakeCluster struct {
	mu      sync.Mutex // the membership nemesis kills and transfers while it changes members
	members []int
	leader  int
	blocked map[int][]int
	down    map[int]string // id → killed or paused
	rates   map[int]float64
	delays  map[int]cluster.Delay
	bounces []int // in order
	// Gray failures: fsync delays, the kernel's throttles in force (ok:
	// the kernel offers them), the disk hog, stalls (in order, and how
	// many are under way).
	fsyncs            map[int]cluster.Fsync
	ioThrottled       map[int]bool
	cpuLimited        map[int]bool
	throttleOK, cpuOK bool
	hog               bool
	stalls            []stall
	stalling          int
	scrapes           int
	// failover: Block of the leader from everyone makes another lead.
	failover bool
	// Membership: processes started (id → running), learners, wiped
	// disks, the largest number of members at any time, and changes made.
	procs    map[int]bool
	learners []int
	wiped    map[int]bool
	maxSize  int
	log      []string
	// leftovers are what HealLeftovers found still in force, in order:
	// a nemesis's own stop should leave nothing.
	leftovers []string
	// notStarted are processes that could not start: Live leaves them
	// out, and Restart of them fails.
	notStarted map[int]bool
}

func newFake(n int) *fakeCluster {
	f := &fakeCluster{leader: 1, down: map[int]string{}, rates: map[int]float64{}, delays: map[int]cluster.Delay{},
		procs: map[int]bool{}, wiped: map[int]bool{}, maxSize: n, notStarted: map[int]bool{},
		fsyncs: map[int]cluster.Fsync{}, ioThrottled: map[int]bool{}, cpuLimited: map[int]bool{}}
	for i := 1; i <= n; i++ {
		f.members = append(f.members, i)
	}
	return f
}

func (f *fakeCluster) Members() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.members)
}

// Live: the members and started processes that are not down, removed, or
// unable to start.
func (f *fakeCluster) Live() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []int
	for _, id := range append(slices.Clone(f.members), slices.Sorted(maps.Keys(f.procs))...) {
		if f.down[id] == "" && !f.notStarted[id] && (f.procs[id] || slices.Contains(f.members, id)) && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

// HealLeftovers records and undoes whatever is still in force; a node
// that could not start stays down.
func (f *fakeCluster) HealLeftovers(context.Context) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var found []string
	if len(f.blocked) > 0 {
		found = append(found, "partition")
		f.blocked = nil
	}
	for _, id := range slices.Sorted(maps.Keys(f.down)) {
		if !f.notStarted[id] {
			found = append(found, fmt.Sprintf("%d %s", id, f.down[id]))
			delete(f.down, id)
		}
	}
	for id, r := range f.rates {
		if r != 1 {
			found = append(found, fmt.Sprintf("%d clock %g", id, r))
			f.rates[id] = 1
		}
	}
	for id, d := range f.delays {
		if d != (cluster.Delay{}) {
			found = append(found, fmt.Sprintf("%d delayed", id))
			f.delays[id] = cluster.Delay{}
		}
	}
	for id, d := range f.fsyncs {
		if d != (cluster.Fsync{}) {
			found = append(found, fmt.Sprintf("%d slow fsyncs", id))
			f.fsyncs[id] = cluster.Fsync{}
		}
	}
	for id := range f.ioThrottled {
		found = append(found, fmt.Sprintf("%d I/O throttled", id))
	}
	for id := range f.cpuLimited {
		found = append(found, fmt.Sprintf("%d CPU limited", id))
	}
	clear(f.ioThrottled)
	clear(f.cpuLimited)
	if f.hog {
		found = append(found, "disk hog")
		f.hog = false
	}
	f.leftovers = append(f.leftovers, found...)
	return strings.Join(found, ", "), nil
}

// Block: with failover, a leader cut off from everyone is succeeded by
// another member.
func (f *fakeCluster) Block(b map[int][]int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.blocked = b
	if f.failover && len(b[f.leader]) == len(f.members)-1 {
		f.leader = slices.DeleteFunc(slices.Clone(f.members), func(id int) bool { return id == f.leader })[0]
	}
	return nil
}

// Kill fails on a process that does not run, as the cluster's does.
func (f *fakeCluster) Kill(id int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down[id] != "" || f.procs[id] == false && !slices.Contains(f.members, id) {
		return fmt.Errorf("node %d is not running", id)
	}
	f.down[id] = "killed"
	return nil
}

// Restart fails for a process that cannot start: it stays down.
func (f *fakeCluster) Restart(id int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.notStarted[id] {
		f.down[id] = "killed"
		return fmt.Errorf("node %d exited during its start (exit status 1)", id)
	}
	delete(f.down, id)
	return nil
}
func (f *fakeCluster) Pause(id int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down[id] != "" {
		return fmt.Errorf("node %d is not running", id)
	}
	f.down[id] = "paused"
	return nil
}
func (f *fakeCluster) Resume(id int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.down, id)
	return nil
}
func (f *fakeCluster) SetClockRate(id int, r float64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rates[id] = r
	return nil
}
func (f *fakeCluster) Leader(context.Context) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.leader, nil
}
func (f *fakeCluster) Transfer(_ context.Context, to int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.leader = to
	return nil
}
func (f *fakeCluster) Bounce(id int) (time.Duration, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.bounces = append(f.bounces, id)
	return time.Millisecond, nil
}
func (f *fakeCluster) WaitUp(context.Context, int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return nil
}
func (f *fakeCluster) SetDelay(id int, d cluster.Delay) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.delays[id] = d
	return nil
}

// HookStats: a stream is always in flight, and some messages and
// batches were held.
func (f *fakeCluster) HookStats(context.Context, int) (cluster.HookStats, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return cluster.HookStats{Held: 3, SnapshotsHolding: 1, FsyncDelayed: 2, FsyncDelayMS: 300}, nil
}

type stall struct {
	id int
	d  time.Duration
}

func (f *fakeCluster) SetFsync(id int, d cluster.Fsync) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fsyncs[id] = d
	return nil
}

// ThrottleIO: unsupported unless throttleOK, as in portable mode.
func (f *fakeCluster) ThrottleIO(id int, l cluster.IOLimit) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.throttleOK {
		return "", fmt.Errorf("%w: portable mode", cluster.ErrUnsupported)
	}
	f.ioThrottled[id] = true
	return "throttled", nil
}
func (f *fakeCluster) UnthrottleIO(id int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.ioThrottled, id)
	return nil
}
func (f *fakeCluster) LimitCPU(id int, share float64) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.cpuOK {
		return "", fmt.Errorf("%w: portable mode", cluster.ErrUnsupported)
	}
	f.cpuLimited[id] = true
	return "quota", nil
}
func (f *fakeCluster) UnlimitCPU(id int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.cpuLimited, id)
	return nil
}

// Stall takes the time it is asked for, or less if ctx ends.
func (f *fakeCluster) Stall(ctx context.Context, id int, d time.Duration) error {
	f.mu.Lock()
	f.stalls = append(f.stalls, stall{id, d})
	f.stalling++
	f.mu.Unlock()
	sleepCtx(ctx, d)
	f.mu.Lock()
	f.stalling--
	f.mu.Unlock()
	return nil
}

// Metrics: each call finds one more lease lost after a suspend, and
// one more reign, at every member.
func (f *fakeCluster) Metrics(context.Context, int) (map[string]float64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.scrapes++
	return map[string]float64{`edictkv_leases_lost_total{cause="suspended"}`: float64(f.scrapes),
		"edictkv_reigns_started_total": float64(f.scrapes)}, nil
}

func (f *fakeCluster) StartDiskHog(cluster.DiskHogSpec) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.hog {
		return fmt.Errorf("a hog runs already")
	}
	f.hog = true
	return nil
}
func (f *fakeCluster) StopDiskHog() (cluster.DiskHogStats, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.hog {
		return cluster.DiskHogStats{}, fmt.Errorf("no hog")
	}
	f.hog = false
	return cluster.DiskHogStats{Files: 1, MB: 400}, nil
}

// healed checks that no gray failure is left in force.
func (f *fakeCluster) grayHealed(t *testing.T, what string) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, d := range f.fsyncs {
		assert.Zero(t, d, "%s: node %d's fsyncs are slow", what, id)
	}
	assert.Empty(t, f.ioThrottled, "%s: I/O throttled", what)
	assert.Empty(t, f.cpuLimited, "%s: CPU limited", what)
	assert.False(t, f.hog, "%s: the disk hog runs", what)
	assert.Zero(t, f.stalling, "%s: a node is stopped", what)
}

// Status: every member follows f.leader, and the leader's log is compacted
// past everyone's last entry.
func (f *fakeCluster) Status(_ context.Context, id int) (cluster.Status, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return cluster.Status{ID: id, Leader: f.leader, IsLeader: id == f.leader, FirstIndex: 100, LastIndex: 50, Commit: 40, Applied: 40}, nil
}
func (f *fakeCluster) StartJoiner(context.Context) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	nu := slices.Max(append(slices.Collect(maps.Keys(f.procs)), f.members...)) + 1
	f.procs[nu] = true
	return nu, nil
}
func (f *fakeCluster) AddLearner(_ context.Context, id int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if slices.Contains(f.members, id) || slices.Contains(f.learners, id) {
		return fmt.Errorf("%d is already in", id)
	}
	f.learners = append(f.learners, id)
	return nil
}
func (f *fakeCluster) Promote(_ context.Context, id int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !slices.Contains(f.learners, id) {
		return fmt.Errorf("%d is no learner", id)
	}
	f.learners = slices.DeleteFunc(f.learners, func(p int) bool { return p == id })
	f.members = append(f.members, id)
	f.maxSize = max(f.maxSize, len(f.members))
	f.log = append(f.log, fmt.Sprintf("+%d", id))
	return nil
}

// Remove: a removed leader hands over to the lowest other member.
func (f *fakeCluster) Remove(_ context.Context, id int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case slices.Contains(f.learners, id):
		f.learners = slices.DeleteFunc(f.learners, func(p int) bool { return p == id })
	case slices.Contains(f.members, id):
		f.members = slices.DeleteFunc(f.members, func(p int) bool { return p == id })
		f.log = append(f.log, fmt.Sprintf("-%d", id))
	default:
		return fmt.Errorf("%d is not in", id)
	}
	if f.leader == id {
		f.leader = slices.Min(f.members)
	}
	delete(f.down, id)
	f.procs[id] = false
	return nil
}
func (f *fakeCluster) Wipe(id int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down[id] != "killed" {
		return fmt.Errorf("wipe %d: running", id)
	}
	delete(f.down, id)
	f.wiped[id] = true
	return nil
}
func (f *fakeCluster) Rejoin(_ context.Context, id int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.wiped[id] || slices.Contains(f.members, id) {
		return fmt.Errorf("rejoin %d: not wiped or still a member", id)
	}
	f.procs[id] = true
	f.log = append(f.log, fmt.Sprintf("rejoin %d", id))
	return nil
}
func (f *fakeCluster) SyncMembers(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return nil
}

// connected reports whether a and b can talk under f.blocked.
func (f *fakeCluster) connected(a, b int) bool {
	return !slices.Contains(f.blocked[a], b) && !slices.Contains(f.blocked[b], a)
}

// Every partition shape is symmetric, and each has the connectivity its
// name promises.
func TestPartitionShapes(t *testing.T) {
	f := newFake(5)
	p := &partition{}
	rng := rand.New(rand.NewPCG(1, 2))
	for shape := range 5 {
		what, err := p.Start(context.Background(), f, rng)
		require.NoError(t, err)
		for a, bs := range f.blocked {
			for _, b := range bs {
				assert.Contains(t, f.blocked[b], a, "%s: %d blocks %d but not the reverse", what, a, b)
			}
		}
		degree := func(a int) int {
			n := 0
			for _, b := range f.members {
				if b != a && f.connected(a, b) {
					n++
				}
			}
			return n
		}
		switch shape {
		case 0, 4:
			isolated := 0
			for _, a := range f.members {
				if degree(a) == 0 {
					isolated++
				}
			}
			assert.Equal(t, 1, isolated, what)
			if shape == 4 {
				assert.Zero(t, degree(f.leader), what)
			}
		case 1:
			degs := []int{}
			for _, a := range f.members {
				degs = append(degs, degree(a))
			}
			slices.Sort(degs)
			assert.Equal(t, []int{1, 1, 2, 2, 2}, degs, what)
		case 2:
			for _, a := range f.members {
				assert.Equal(t, 2, degree(a), "%s: each node sees its two neighbours", what)
			}
		case 3:
			degs := []int{}
			for _, a := range f.members {
				degs = append(degs, degree(a))
			}
			slices.Sort(degs)
			assert.Equal(t, []int{2, 2, 2, 2, 4}, degs, "%s: the bridge sees everyone", what)
		}
		require.NoError(t, p.Stop(context.Background(), f))
		assert.Nil(t, f.blocked)
	}
}

// The schedule records a start and a stop for every fault and leaves the
// cluster healed.
func TestScheduleRecordsAndHeals(t *testing.T) {
	f := newFake(5)
	faults, err := ByName([]string{"kill", "pause", "clock", "clock-beyond-rho", "transfer", "membership", "delay", "bounce", "snapshot-install",
		"slow-disk", "disk-hog", "cpu-starve"}, 0.001, 100*time.Millisecond)
	require.NoError(t, err)
	rec := history.NewRecorder(nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s := &Schedule{Faults: faults, Quiet: 10 * time.Millisecond, Hold: 20 * time.Millisecond, Seed: 3}
	require.NoError(t, s.Run(ctx, f, rec))
	iv := history.Intervals(rec.Ops())
	require.NotEmpty(t, iv)
	starts, stops := 0, 0
	for _, op := range rec.Ops() {
		switch op.F {
		case history.FStart:
			starts++
		case history.FStop:
			stops++
		}
	}
	assert.Equal(t, starts, stops)
	assert.Empty(t, f.down, "every killed or paused node is back")
	assert.Nil(t, f.blocked)
	for id, r := range f.rates {
		assert.Equal(t, 1.0, r, "node %d's clock is back at rate 1", id)
	}
	for id, d := range f.delays {
		assert.Zero(t, d, "node %d's delay is off", id)
	}
	f.grayHealed(t, "after the schedule")
	for _, name := range []string{"delay", "bounce", "snapshot-install", "slow-disk", "disk-hog", "cpu-starve"} {
		found := false
		for _, iv := range iv {
			found = found || iv.Nemesis == name
		}
		assert.True(t, found, "%s ran", name)
	}
	_, err = ByName([]string{"flood"}, 0.001, time.Second)
	assert.ErrorContains(t, err, "unknown nemesis")
}

// Bounces hit granters only, never the leader, in each of the four
// patterns, and every step is recorded as an event after the start.
func TestBouncePatterns(t *testing.T) {
	f := newFake(5)
	f.leader, f.failover = 3, true
	b := &bounce{lease: 40 * time.Millisecond}
	rng := rand.New(rand.NewPCG(1, 2))
	rec := history.NewRecorder(nil)
	for v := range 5 {
		f.leader = 3
		what, err := b.Start(context.Background(), f, rng)
		require.NoError(t, err)
		f.bounces = nil
		b.Script(context.Background(), f, rng, func(format string, args ...any) {
			rec.Add(history.Op{Process: history.NemesisProcess, F: history.FEvent, Detail: fmt.Sprintf(format, args...)})
		})
		require.NoError(t, b.Stop(context.Background(), f))
		assert.NotContains(t, f.bounces, 3, "%s: the leader is not bounced", what)
		switch v {
		case 0:
			assert.Len(t, f.bounces, 1, what)
		case 1:
			require.Len(t, f.bounces, 2, what)
			assert.NotEqual(t, f.bounces[0], f.bounces[1], what)
		case 2:
			require.Len(t, f.bounces, 2, what)
			assert.Equal(t, f.bounces[0], f.bounces[1], what)
		case 3:
			require.Len(t, f.bounces, 3, what)
			assert.Equal(t, f.bounces[0], f.bounces[2], what)
			assert.NotEqual(t, f.bounces[0], f.bounces[1], what)
		case 4:
			assert.Len(t, f.bounces, 1, what)
			assert.NotEqual(t, 3, f.leader, "%s: another member leads after the old leader was cut off", what)
			assert.Nil(t, f.blocked, "%s: healed", what)
		}
		for i, gap := range b.gaps[1:] {
			assert.Less(t, gap, b.lease/2+time.Millisecond, "%s: bounce %d comes within half a lease", what, i+1)
		}
	}
	assert.NotEmpty(t, rec.Ops())
}

// The delay goes to every member, the leader, then the granters, and
// Stop turns it off where it was set.
func TestDelayTargets(t *testing.T) {
	f := newFake(5)
	f.leader, f.failover = 2, true
	d := &delay{every: time.Millisecond, lease: time.Millisecond}
	rng := rand.New(rand.NewPCG(1, 2))
	want := [][]int{{1, 2, 3, 4, 5}, {2}, {1, 3, 4, 5}, {1, 2, 3, 4, 5}, {1, 2, 3, 4, 5}, {1, 2, 3, 4, 5}, {2}}
	for i, w := range want {
		_, err := d.Start(context.Background(), f, rng)
		require.NoError(t, err)
		var steps []string
		d.Script(context.Background(), f, rng, func(format string, args ...any) { steps = append(steps, fmt.Sprintf(format, args...)) })
		switch i {
		case 3:
			assert.Len(t, steps, churnTransfers, "the churn variant moves leadership")
			assert.Equal(t, 2, f.leader, "and back where it was")
		case 4:
			// Cut off, another leads, healed, leadership handed back;
			// twice.
			assert.Len(t, steps, 6, "%q", steps)
			assert.Equal(t, 2, f.leader, "leadership is back")
			assert.Nil(t, f.blocked, "healed")
		default:
			assert.Empty(t, steps)
		}
		for _, id := range f.members {
			if slices.Contains(w, id) {
				assert.Equal(t, delaySpec, f.delays[id])
			} else {
				assert.Zero(t, f.delays[id])
			}
		}
		require.NoError(t, d.Stop(context.Background(), f))
		for _, id := range f.members {
			assert.Zero(t, f.delays[id])
		}
		assert.Contains(t, d.Summary(), fmt.Sprintf("%d messages held", 3*len(w)))
	}
}

// runFault starts, scripts and stops one fault as the schedule does,
// recording into rec.
func runFault(t *testing.T, f Fault, c Cluster, rng *rand.Rand, rec *history.Recorder) string {
	t.Helper()
	what, err := f.Start(context.Background(), c, rng)
	require.NoError(t, err)
	rec.Add(history.Op{Process: history.NemesisProcess, Type: history.Info, F: history.FStart, Nemesis: f.Name(), Detail: what})
	if sf, ok := f.(Scripted); ok {
		sf.Script(context.Background(), c, rng, func(format string, args ...any) {
			rec.Add(history.Op{Process: history.NemesisProcess, Type: history.Info, F: history.FEvent, Nemesis: f.Name(), Detail: fmt.Sprintf(format, args...)})
		})
	}
	require.NoError(t, f.Stop(context.Background(), c))
	rec.Add(history.Op{Process: history.NemesisProcess, Type: history.Info, F: history.FStop, Nemesis: f.Name()})
	return what
}

// --nemesis membership runs every change and every companion fault in
// turn, keeps 3 to 5 members between changes (6 for a moment within a
// replacement at 5), undoes its companions, and counts what it did.
func TestMembershipRotation(t *testing.T) {
	f := newFake(5)
	faults, err := ByName([]string{"membership"}, 0.001, 100*time.Millisecond)
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(1, 2))
	rec := history.NewRecorder(nil)
	var whats []string
	for i := range 2 * len(membershipRotation) {
		what := runFault(t, faults[0], f, rng, rec)
		whats = append(whats, what)
		assert.GreaterOrEqual(t, len(f.members), minMembers, "after %d: %s", i, what)
		assert.LessOrEqual(t, len(f.members), maxMembers, "after %d: %s", i, what)
		assert.Nil(t, f.blocked, "%s: healed", what)
		assert.Empty(t, f.down, "%s: the killed member is back", what)
		assert.Empty(t, f.learners, "%s: no learner left behind", what)
		assert.Contains(t, f.members, f.leader)
	}
	assert.LessOrEqual(t, f.maxSize, maxMembers+1)
	// The second change under a partition cuts off the lowest id that
	// neither leads nor is replaced: 1 leads, 3 is replaced, so 2.
	assert.Equal(t, "replace member 3 (leader 1) while 2 is cut off", whats[1])
	all := strings.Join(whats, "\n")
	for _, want := range []string{"add a member", "remove member", "replace member", "remove the leader", "rejoin",
		"is cut off", "is killed", "(the leader)", "leadership moves"} {
		assert.Contains(t, all, want)
	}
	assert.Contains(t, f.log, "rejoin "+strings.Fields(whats[6])[1], "the seventh change rejoins its member")
	m := CountMembership(rec.Ops())
	t.Logf("%s\n%s", m, all)
	assert.Equal(t, 2*len(membershipRotation), m.Replacements+m.Adds+m.Removes+m.Rejoins, "%+v", m)
	assert.Equal(t, 2, m.LeaderRemovals)
	assert.Zero(t, m.Failed)
	// The sizes the rotation's comment promises: no change had to be
	// turned into another.
	assert.NotContains(t, all, "instead")
}

// Each named membership nemesis makes its change and keeps the size in
// bounds however often it runs.
func TestMembershipNamed(t *testing.T) {
	for name := range membershipFaults {
		t.Run(name, func(t *testing.T) {
			f := newFake(5)
			faults, err := ByName([]string{name}, 0.001, 100*time.Millisecond)
			require.NoError(t, err)
			rng := rand.New(rand.NewPCG(3, 4))
			rec := history.NewRecorder(nil)
			for range 7 {
				what := runFault(t, faults[0], f, rng, rec)
				assert.GreaterOrEqual(t, len(f.members), minMembers, what)
				assert.LessOrEqual(t, len(f.members), maxMembers, what)
				assert.Empty(t, f.down, what)
				assert.Nil(t, f.blocked, what)
			}
			m := CountMembership(rec.Ops())
			assert.Equal(t, 7, m.Adds+m.Removes+m.Replacements+m.Rejoins+m.CatchUps, "%s: every change completed: %+v", name, m)
			assert.Zero(t, m.Failed)
		})
	}
	assert.True(t, IsMembership("member-rejoin"))
	assert.False(t, IsMembership("partition"))
}

// A rejoin whose removal fails leaves the wiped member down, a change
// that fails counts as failed, and a fault that could not start as not
// started.
func TestMembershipFailures(t *testing.T) {
	f := &failingRemove{fakeCluster: newFake(4)}
	faults, err := ByName([]string{"member-rejoin"}, 0.001, 100*time.Millisecond)
	require.NoError(t, err)
	rec := history.NewRecorder(nil)
	runFault(t, faults[0], f, rand.New(rand.NewPCG(1, 1)), rec)
	ops := rec.Ops()
	stop := ops[len(ops)-1]
	last := ops[len(ops)-2]
	assert.Contains(t, last.Detail, "failed rejoin: remove")
	assert.Contains(t, faults[0].(Summarized).Summary(), "lost its disk and stays down")
	assert.Len(t, f.wiped, 1)
	assert.Empty(t, f.down, "a wiped member is not restarted")
	rec.Add(history.Op{Process: history.NemesisProcess, Type: history.Info, F: history.FStart, Nemesis: "membership", Detail: "failed: cluster: no node leads"})
	rec.Add(stop)
	assert.Equal(t, MembershipCounts{Failed: 1, NotStarted: 1}, CountMembership(rec.Ops()))
}

type failingRemove struct{ *fakeCluster }

func (f *failingRemove) Remove(context.Context, int) error {
	return fmt.Errorf("remove: 503 no leader")
}
