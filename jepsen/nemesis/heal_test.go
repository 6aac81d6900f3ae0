package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edictlog/edictlog/jepsen/cluster"
	"github.com/edictlog/edictlog/jepsen/history"
)

// runOne runs fault f once as the schedule does (start, script, stop, the
// heal of leftovers), with no hold: nothing in it waits for the clock.
func runOne(f Fault, c Cluster, rng *rand.Rand, rec *history.Recorder) {
	s := &Schedule{}
	s.one(context.Background(), c, rec, rng, f)
}

// cannotStart makes node id a member that died and cannot start again,
// as a process whose data directory a crash left broken.
func (f *fakeCluster) cannotStart(id int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down[id] = "killed"
	f.notStarted[id] = true
}

// assertHealed checks that nothing is left in force but the nodes that
// cannot start, and that the nemesis's own stop undid it all (the
// schedule's heal found nothing).
func (f *fakeCluster) assertHealed(t *testing.T, what string) {
	t.Helper()
	f.mu.Lock()
	for id := range f.down {
		assert.True(t, f.notStarted[id], "%s: %d left %s", what, id, f.down[id])
	}
	assert.Nil(t, f.blocked, "%s: partitioned", what)
	for id, r := range f.rates {
		assert.Equal(t, 1.0, r, "%s: node %d's clock", what, id)
	}
	for id, d := range f.delays {
		assert.Zero(t, d, "%s: node %d's delay", what, id)
	}
	assert.Empty(t, f.leftovers, "%s: left in force by the nemesis's stop", what)
	f.mu.Unlock()
	f.grayHealed(t, what)
}

// The kill nemesis aims at members that run: a member down already (one
// that could not start) is neither killed again — which failed the whole
// start and left the others it had killed down for the rest of the run —
// nor counted out of the minority. Every process it killed is restarted,
// and one whose restart fails is reported while the others still come
// back.
func TestKillSparesADeadMemberAndRestartsTheRest(t *testing.T) {
	f := newFake(5)
	f.cannotStart(3)
	k := &kill{}
	rng := rand.New(rand.NewPCG(7, 8))
	for v := range 3 {
		what, err := k.Start(context.Background(), f, rng)
		require.NoError(t, err, "variant %d", v)
		killed := slices.Clone(k.killed)
		assert.NotContains(t, killed, 3, what)
		switch v {
		case 0:
			assert.Len(t, killed, 1, what)
		case 1:
			assert.Len(t, killed, 1, "%s: two of five down with the dead one", what)
			assert.Contains(t, what, "with 1 of 5 members down already")
		case 2:
			assert.ElementsMatch(t, []int{1, 2, 4, 5}, killed, what)
		}
		require.NoError(t, k.Stop(context.Background(), f))
		assert.Equal(t, map[int]string{3: "killed"}, f.down, what)
	}
	// With a minority down already, the minority's turn kills no one.
	f3 := newFake(3)
	f3.cannotStart(3)
	k3 := &kill{n: 1}
	_, err := k3.Start(context.Background(), f3, rng)
	var sk *skipError
	require.ErrorAs(t, err, &sk)
	assert.Equal(t, "skipped: kill a minority: 1 of 3 members are down already", err.Error())
	assert.Equal(t, map[int]string{3: "killed"}, f3.down)

	// A restart that fails: the others are restarted all the same.
	k.n = 2
	_, err = k.Start(context.Background(), f, rng)
	require.NoError(t, err)
	f.mu.Lock()
	f.notStarted[4] = true
	f.mu.Unlock()
	err = k.Stop(context.Background(), f)
	assert.ErrorContains(t, err, "node 4 exited during its start")
	assert.Equal(t, map[int]string{3: "killed", 4: "killed"}, f.down)
}

// partialBlock applies a partition in part and fails, as nft failing in
// one namespace of five would.
type partialBlock struct{ *fakeCluster }

func (p partialBlock) Block(b map[int][]int) error {
	err := p.fakeCluster.Block(b)
	if len(b) > 0 {
		return errors.New("nft: rule in namespace of node 4: operation not permitted")
	}
	return err
}

// A start that fails part way is undone by the fault's own stop before
// the next fault, and the history says both.
func TestScheduleUndoesAFailedStart(t *testing.T) {
	f := newFake(5)
	rec := history.NewRecorder(nil)
	runOne(&partition{}, partialBlock{f}, rand.New(rand.NewPCG(1, 2)), rec)
	f.assertHealed(t, "partition that failed part way")
	ops := rec.Ops()
	require.Len(t, ops, 2)
	assert.Equal(t, history.FStart, ops[0].F)
	assert.Contains(t, ops[0].Detail, "failed: nft: rule in namespace of node 4")
	assert.Equal(t, history.FStop, ops[1].F)
	assert.Empty(t, ops[1].Detail, "the undo worked")

	// Every membership change under a partition, likewise.
	faults, err := ByName([]string{"member-partition"}, 0.001, 100*time.Millisecond)
	require.NoError(t, err)
	runOne(faults[0], partialBlock{f}, rand.New(rand.NewPCG(1, 2)), rec)
	f.assertHealed(t, "member-partition that failed part way")
}

// leaky is a fault whose stop forgets what it did.
type leaky struct{}

func (leaky) Name() string { return "leaky" }
func (leaky) Start(ctx context.Context, c Cluster, rng *rand.Rand) (string, error) {
	return "kill 2, slow 3's disk", errors.Join(c.Kill(2), c.SetFsync(3, slowDiskSpec))
}
func (leaky) Stop(ctx context.Context, c Cluster) error { return nil }

// What a fault's stop leaves in force is healed before the next fault,
// and recorded as an event of that fault.
func TestScheduleHealsWhatAFaultLeft(t *testing.T) {
	f := newFake(5)
	rec := history.NewRecorder(nil)
	runOne(leaky{}, f, nil, rec)
	assert.Empty(t, f.down)
	assert.Zero(t, f.fsyncs[3])
	var healed []string
	for _, op := range rec.Ops() {
		if op.F == history.FEvent {
			healed = append(healed, op.Detail)
		}
	}
	assert.Equal(t, []string{"healed what was left in force: 2 killed, 3 slow fsyncs"}, healed)
	assert.Equal(t, history.FStop, rec.Ops()[len(rec.Ops())-1].F, "before the stop: the fault's span covers the heal")
}

// Every nemesis, with a member that died and cannot start again: none
// chooses it as a target that must run, none fails for it, and each
// undoes all it did by its own stop, whatever it was (the schedule's heal
// finds nothing left), however many times it runs.
func TestEveryNemesisWithAMemberThatCannotStart(t *testing.T) {
	names := strings.Split(strings.ReplaceAll(Known, " ", ""), ",")
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			f := newFake(5)
			f.leader, f.failover = 2, true
			f.throttleOK, f.cpuOK = true, true
			f.cannotStart(5)
			faults, err := ByName([]string{name}, 0.001, 10*time.Millisecond)
			require.NoError(t, err)
			if d, ok := faults[0].(*delay); ok {
				d.every = time.Millisecond
			}
			rec := history.NewRecorder(nil)
			rng := rand.New(rand.NewPCG(11, 12))
			for i := range 13 {
				runOne(faults[0], f, rng, rec)
				f.assertHealed(t, fmt.Sprintf("%s, fault %d", name, i))
			}
			for _, op := range rec.Ops() {
				if op.F == history.FStart {
					assert.NotContains(t, op.Detail, "not running", "%s chose the dead member", name)
				}
				if op.F == history.FStop {
					assert.NotContains(t, op.Detail, "5 exited", "%s restarted the dead member", name)
				}
			}
			if IsMembership(name) {
				m := CountMembership(rec.Ops())
				assert.Zero(t, m.Failed, "%+v", m)
			}
		})
	}
}

// quorumCheck is the cluster as a server would judge a membership change
// by etcd's strict reconfiguration check: a new configuration whose
// quorum is not among the members it can reach now is refused. The fake
// records such requests instead of refusing them.
type quorumCheck struct {
	*fakeCluster
	unsafe []string
}

func (q *quorumCheck) check(what string, config []int) {
	live := q.Live()
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for _, id := range config {
		// Cut off from every other member: not reachable.
		if slices.Contains(live, id) && len(q.blocked[id]) < len(q.members)-1 {
			n++
		}
	}
	if n < len(config)/2+1 {
		q.unsafe = append(q.unsafe, fmt.Sprintf("%s: %d of %v live", what, n, config))
	}
}

func (q *quorumCheck) Promote(ctx context.Context, id int) error {
	q.check(fmt.Sprintf("promote %d", id), append(q.Members(), id))
	return q.fakeCluster.Promote(ctx, id)
}

func (q *quorumCheck) Remove(ctx context.Context, id int) error {
	if slices.Contains(q.Members(), id) {
		q.check(fmt.Sprintf("remove %d", id), slices.DeleteFunc(q.Members(), func(m int) bool { return m == id }))
	}
	return q.fakeCluster.Remove(ctx, id)
}

func TestQuorumLive(t *testing.T) {
	for _, c := range []struct {
		config, live, down []int
		ok                 bool
	}{
		{[]int{1, 2, 3}, []int{1, 2, 3}, nil, true},
		{[]int{1, 2, 3}, []int{1, 2}, nil, true},
		{[]int{1, 2, 3}, []int{1}, nil, false},
		{[]int{1, 2, 3}, []int{1, 2, 3}, []int{2, 3}, false},
		{[]int{1, 2, 3, 4}, []int{1, 2, 3}, nil, true},
		{[]int{1, 2, 3, 4}, []int{1, 2, 3}, []int{3}, false},
		{[]int{1, 2, 3, newcomer}, []int{1, 2, newcomer}, nil, true},
		{[]int{1, 2, 3, newcomer}, []int{1, 2, newcomer}, []int{newcomer}, false},
		{[]int{2, 3, 4}, []int{1, 3, 5}, nil, false},
	} {
		why := quorumLive(c.config, c.live, c.down)
		assert.Equal(t, c.ok, why == "", "%+v: %s", c, why)
	}
	assert.Equal(t, "would leave 1 of 3 live (quorum 2) in configuration [2 4 new]; live: [1 2]",
		quorumLive([]int{2, 4, newcomer}, []int{1, 2, newcomer}, []int{newcomer}))
}

// The shape that left a cluster without a leader to the end: four
// members, one that cannot start and one killed. Removing the leader then
// asks for a configuration of three with one live member; the nemesis
// skips it and says why, and asks for nothing.
func TestMembershipSkipsAChangeWithoutALiveQuorum(t *testing.T) {
	f := newFake(4)
	f.cannotStart(3)
	f.down[4] = "killed"
	q := &quorumCheck{fakeCluster: f}
	faults, err := ByName([]string{"member-remove-leader"}, 0.001, time.Second)
	require.NoError(t, err)
	rec := history.NewRecorder(nil)
	_, err = faults[0].Start(context.Background(), q, rand.New(rand.NewPCG(1, 2)))
	var sk *skipError
	require.ErrorAs(t, err, &sk)
	assert.Equal(t, "skipped: remove the leader 1: would leave 1 of 3 live (quorum 2) in configuration [2 3 4]; live: [1 2]", err.Error())

	runOne(faults[0], q, rand.New(rand.NewPCG(1, 2)), rec)
	start := rec.Ops()[0]
	assert.Equal(t, history.FStart, start.F)
	assert.True(t, strings.HasPrefix(start.Detail, "skipped: remove the leader 1: would leave 1 of 3 live"), start.Detail)
	assert.Empty(t, f.log, "no change asked for")
	assert.Empty(t, q.unsafe)
	assert.Equal(t, MembershipCounts{Skipped: 1}, CountMembership(rec.Ops()))
}

// Over every membership nemesis, with members that cannot start or are
// killed at random, no configuration is ever asked for whose quorum is
// not live: each change goes ahead with a victim that keeps one, or is
// skipped.
func TestMembershipAsksOnlyForLiveQuorums(t *testing.T) {
	for name := range membershipFaults {
		t.Run(name, func(t *testing.T) {
			faults, err := ByName([]string{name}, 0.001, 10*time.Millisecond)
			require.NoError(t, err)
			for seed := range uint64(20) {
				rng := rand.New(rand.NewPCG(seed, 99))
				f := newFake(3 + rng.IntN(3))
				f.leader = f.members[rng.IntN(len(f.members))]
				for _, id := range f.members {
					if id != f.leader && rng.IntN(4) == 0 {
						f.cannotStart(id)
					}
				}
				q := &quorumCheck{fakeCluster: f}
				rec := history.NewRecorder(nil)
				for range 6 {
					runOne(faults[0], q, rng, rec)
				}
				assert.Empty(t, q.unsafe, "seed %d, members %v", seed, f.members)
				m := CountMembership(rec.Ops())
				assert.Zero(t, m.Failed, "seed %d: %+v", seed, m)
			}
		})
	}
}

// With a member that cannot start, a removal paired with a kill removes
// that member: any other victim would leave the new configuration with
// the leader alone live.
func TestMembershipPicksAVictimThatKeepsAQuorum(t *testing.T) {
	for seed := range uint64(10) {
		f := newFake(4)
		f.cannotStart(2)
		faults, err := ByName([]string{"member-kill"}, 0.001, time.Second)
		require.NoError(t, err)
		rec := history.NewRecorder(nil)
		runOne(faults[0], f, rand.New(rand.NewPCG(seed, 1)), rec)
		assert.Equal(t, []string{"-2"}, f.log, "seed %d", seed)
		assert.NotContains(t, f.members, 2)
		f.assertHealed(t, fmt.Sprint("seed ", seed))
	}
}

// dying kills members when a learner is added: by the time the change
// would promote it, too few are left.
type dying struct {
	*fakeCluster
	kill []int
}

func (d *dying) AddLearner(ctx context.Context, id int) error {
	for _, k := range d.kill {
		_ = d.Kill(k)
	}
	return d.fakeCluster.AddLearner(ctx, id)
}

// A change checks again at each step: a replacement whose promotion would
// no longer find a live quorum stops there, skipped, and takes out the
// learner it started.
func TestMembershipStepRefusal(t *testing.T) {
	f := newFake(5)
	d := &dying{fakeCluster: f, kill: []int{3, 4, 5}}
	faults, err := ByName([]string{"member-replace"}, 0.001, time.Second)
	require.NoError(t, err)
	rec := history.NewRecorder(nil)
	runOne(faults[0], d, rand.New(rand.NewPCG(1, 2)), rec)
	var last string
	for _, op := range rec.Ops() {
		if op.F == history.FEvent && !strings.HasPrefix(op.Detail, "healed") {
			last = op.Detail
		}
	}
	assert.Contains(t, last, "skipped replace: promote 6: would leave 3 of 6 live (quorum 4)")
	assert.Empty(t, f.learners, "the learner is taken out")
	assert.Equal(t, []int{1, 2, 3, 4, 5}, f.members)
	assert.Empty(t, f.log, "no configuration asked for")
	assert.Equal(t, MembershipCounts{Skipped: 1}, CountMembership(rec.Ops()))
}

// refusing is a server with etcd's strict reconfiguration check: it
// refuses every removal.
type refusing struct{ *fakeCluster }

func (r refusing) Remove(ctx context.Context, id int) error {
	if slices.Contains(r.Members(), id) {
		return fmt.Errorf("%w: /v1/cluster/remove: 409 remove: would lose quorum", ErrRefused)
	}
	return r.fakeCluster.Remove(ctx, id)
}

// A change the server refuses is the server's answer, recorded as such,
// not a failure of the nemesis or of the run.
func TestMembershipRefusedByTheServer(t *testing.T) {
	f := newFake(5)
	faults, err := ByName([]string{"member-replace"}, 0.001, time.Second)
	require.NoError(t, err)
	rec := history.NewRecorder(nil)
	runOne(faults[0], refusing{f}, rand.New(rand.NewPCG(1, 2)), rec)
	var events []string
	for _, op := range rec.Ops() {
		if op.F == history.FEvent {
			events = append(events, op.Detail)
		}
	}
	assert.True(t, slices.ContainsFunc(events, func(e string) bool {
		return strings.HasPrefix(e, "refused replace: remove ") && strings.Contains(e, "409 remove: would lose quorum")
	}), "%q", events)
	stop := rec.Ops()[len(rec.Ops())-1]
	assert.NotContains(t, stop.Detail, "stop failed")
	assert.Equal(t, MembershipCounts{Refused: 1}, CountMembership(rec.Ops()))
	f.assertHealed(t, "refused")
}

// zombieCheck fails the test's expectations if a removed process is
// started again.
type zombieCheck struct {
	*fakeCluster
	zombies []int
}

func (z *zombieCheck) Restart(id int) error {
	z.mu.Lock()
	if !slices.Contains(z.members, id) && !z.procs[id] {
		z.zombies = append(z.zombies, id)
	}
	z.mu.Unlock()
	return z.fakeCluster.Restart(id)
}

// member-slow-disk: each change is about one process with a slow disk —
// the member removed or replaced, or the newcomer — which is killed (and
// at once restarted) during the change, never after it was removed; a
// catch-up kills its member, brings it back for a snapshot and kills it
// again while one is streamed to it. Each stop lifts the slow disk, the
// throttle and the hold of snapshots, and leaves every process up.
func TestMemberSlowDisk(t *testing.T) {
	f := newFake(4)
	f.throttleOK = true
	z := &zombieCheck{fakeCluster: f}
	faults, err := ByName([]string{"member-slow-disk"}, 0.001, 10*time.Millisecond)
	require.NoError(t, err)
	assert.True(t, IsMembership("member-slow-disk"))
	assert.True(t, InstallsSnapshots("member-slow-disk"))
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range 8 {
		rec := history.NewRecorder(nil)
		runOne(faults[0], z, rng, rec)
		what := rec.Ops()[0].Detail
		f.assertHealed(t, what)
		assert.GreaterOrEqual(t, len(f.members), minMembers, what)
		assert.LessOrEqual(t, len(f.members), maxMembers, what)
		assert.Empty(t, f.learners, what)
		var kills []string
		var result string
		for _, op := range rec.Ops() {
			switch {
			case op.F == history.FEvent && strings.Contains(op.Detail, "(slow disk)"):
				kills = append(kills, op.Detail)
			case op.F == history.FEvent && strings.HasPrefix(op.Detail, "completed "):
				result = op.Detail
			}
		}
		require.NotEmpty(t, result, "%s: %v", what, rec.Ops())
		switch i % 4 {
		case 0:
			assert.Contains(t, what, "the newcomer's disk slow", what)
		case 2:
			assert.Contains(t, what, "catch ", what)
			assert.Contains(t, result, "completed catch-up of ", what)
			assert.Contains(t, result, "killed at +", "%s: the catch-up's own kill", what)
		}
		if strings.HasPrefix(what, "add") || strings.HasPrefix(what, "remove") {
			// The companion's kill comes with one of the change's
			// requests, always: after the request to add or promote
			// the newcomer, just before the removal of the member. (A
			// replacement's may come after its member was removed, and
			// is not done then; a catch-up's watcher kills when it sees
			// a stream.)
			assert.NotEmpty(t, kills, "%s: the slow member is killed during the change", what)
		}
	}
	assert.Empty(t, z.zombies, "a removed process was started again")
}

// A slow disk that could not be set is lifted all the same: the
// newcomer's (a step of the change, which goes on) by the stop, a
// victim's (the start fails) by the stop the schedule runs after it.
func TestMemberSlowDiskFailedStartIsUndone(t *testing.T) {
	f := newFake(4)
	f.throttleOK = true
	faults, err := ByName([]string{"member-slow-disk"}, 0.001, 10*time.Millisecond)
	require.NoError(t, err)
	rec := history.NewRecorder(nil)
	rng := rand.New(rand.NewPCG(1, 1))
	runOne(faults[0], failingFsync{f}, rng, rec) // an add: the newcomer's
	f.assertHealed(t, "the newcomer's slow disk failed")
	runOne(faults[0], failingFsync{f}, rng, rec) // a replacement: the victim's
	f.assertHealed(t, "the victim's slow disk failed")
	var starts []string
	for _, op := range rec.Ops() {
		if op.F == history.FStart {
			starts = append(starts, op.Detail)
		}
	}
	require.Len(t, starts, 2)
	assert.Contains(t, starts[0], "add a member")
	assert.True(t, strings.HasPrefix(starts[1], "failed: cluster: node "), starts[1])
}

// failingFsync sets the fsync delay and then reports a failure, as a
// node whose hook did not answer in time would.
type failingFsync struct{ *fakeCluster }

func (f failingFsync) SetFsync(id int, d cluster.Fsync) error {
	err := f.fakeCluster.SetFsync(id, d)
	if d != (cluster.Fsync{}) {
		return fmt.Errorf("cluster: node %d faults: context deadline exceeded", id)
	}
	return err
}
