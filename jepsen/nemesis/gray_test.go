package nemesis

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edictlog/edictlog/jepsen/cluster"
	"github.com/edictlog/edictlog/jepsen/history"
)

// slow-disk slows the leader's fsyncs, then a granter's, then every
// member's; the kernel's throttle joins where the cluster offers it, and
// the start says why not where it does not; each stop undoes both.
func TestSlowDiskTargetsAndHeal(t *testing.T) {
	f := newFake(5)
	f.leader = 2
	s := &slowDisk{}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 6 {
		f.throttleOK = i >= 3
		what, err := s.Start(context.Background(), f, rng)
		require.NoError(t, err)
		var slow []int
		for id, d := range f.fsyncs {
			if d != (cluster.Fsync{}) {
				assert.Equal(t, slowDiskSpec, d, what)
				slow = append(slow, id)
			}
		}
		slices.Sort(slow)
		switch i % 3 {
		case 0:
			assert.Equal(t, []int{2}, slow, "%s: the leader", what)
		case 1:
			require.Len(t, slow, 1, what)
			assert.NotEqual(t, 2, slow[0], "%s: a granter, not the leader", what)
		case 2:
			assert.Equal(t, f.members, slow, "%s: every member", what)
		}
		if f.throttleOK {
			assert.Len(t, f.ioThrottled, len(slow), what)
			assert.Contains(t, what, "throttled")
		} else {
			assert.Empty(t, f.ioThrottled, what)
			assert.Contains(t, what, "no kernel I/O throttle: not supported here: portable mode")
		}
		require.NoError(t, s.Stop(context.Background(), f))
		f.grayHealed(t, what)
		assert.Contains(t, s.Summary(), "durable batches delayed")
		// What the members' /metrics said the fault cost: the fake's
		// counters rise by one at each of the five members per reading.
		assert.Contains(t, s.Summary(), "leases lost 0 expired, 0 released, 25 given up after a suspend; 25 reigns started, 0 renewals late, 0 leases lost to the leader's own slowness (it stood aside)")
	}
}

// disk-hog runs its writer for the fault and stops it at the stop.
func TestDiskHogStartsAndStops(t *testing.T) {
	f := newFake(3)
	rec := history.NewRecorder(nil)
	faults, err := ByName([]string{"disk-hog"}, 0.001, time.Second)
	require.NoError(t, err)
	d := faults[0]
	what, err := d.Start(context.Background(), f, nil)
	require.NoError(t, err)
	assert.True(t, f.hog, what)
	assert.Contains(t, what, "300 MiB files")
	require.NoError(t, d.Stop(context.Background(), f))
	f.grayHealed(t, what)
	assert.Contains(t, d.(Summarized).Summary(), "wrote 400 MiB: 1 whole files fsynced")
	assert.Contains(t, d.(Summarized).Summary(), "9 given up after a suspend") // three members, read twice
	runFault(t, d, f, nil, rec)
	f.grayHealed(t, "again")
}

// cpu-starve stalls only its targets — the leader, a granter, every
// member — each burst 10–100 ms and continued before the stop returns;
// its fourth turn holds the leader to a CPU quota where the cluster
// offers one, and stalls it in bursts where it does not.
func TestCPUStarveBurstsAndHeal(t *testing.T) {
	f := newFake(5)
	f.leader = 4
	s := &cpuStarve{}
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range 8 {
		f.cpuOK = i == 7
		f.mu.Lock()
		f.stalls = nil
		f.mu.Unlock()
		what, err := s.Start(context.Background(), f, rng)
		require.NoError(t, err)
		time.Sleep(400 * time.Millisecond)
		if i == 7 {
			assert.Equal(t, map[int]bool{4: true}, f.cpuLimited, what)
		}
		require.NoError(t, s.Stop(context.Background(), f))
		f.grayHealed(t, what)
		f.mu.Lock()
		stalls := slices.Clone(f.stalls)
		f.mu.Unlock()
		hit := map[int]bool{}
		for _, st := range stalls {
			hit[st.id] = true
			assert.GreaterOrEqual(t, st.d, starveMinStop, what)
			assert.LessOrEqual(t, st.d, starveMaxStop, what)
		}
		switch {
		case i == 7:
			assert.Empty(t, stalls, "%s: a quota, no bursts", what)
			assert.Contains(t, s.Summary(), "CPU quota lifted on [4]")
			continue
		case i%4 == 0, i == 3:
			assert.Equal(t, map[int]bool{4: true}, hit, "%s: the leader only", what)
		case i%4 == 1:
			require.Len(t, hit, 1, what)
			assert.False(t, hit[4], "%s: a granter, not the leader", what)
		case i%4 == 2:
			assert.Len(t, hit, 5, "%s: every member", what)
		}
		if i == 3 {
			assert.Contains(t, what, "instead of a CPU quota")
		}
		assert.Contains(t, s.Summary(), "bursts, stopped")
		assert.Contains(t, s.Summary(), "reigns started")
	}
}
