package log_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/edictlog/edictlog/log"
	"github.com/edictlog/edictlog/wire"
)

// slowStore is a real store (bbolt, fsync) behind a disk that takes delay
// longer for every durable batch: issue 16's disk hog, without depending on
// what else the machine's disk is doing.
type slowStore struct {
	log.Store
	delay time.Duration
}

func (s slowStore) StoreBatch(b wire.Batch) error {
	time.Sleep(s.delay)
	return s.Store.StoreBatch(b)
}

func withSlowDisk(delay time.Duration) func(*log.Config) {
	return func(cfg *log.Config) { cfg.Store = slowStore{Store: cfg.Store, delay: delay} }
}

// watchLeadership counts the leadership changes any node reports from now.
func watchLeadership(t *testing.T, c *netCluster) *atomic.Int64 {
	var changes atomic.Int64
	for _, n := range c.nodes {
		ch := make(chan log.Event, 64)
		o := n.Observe(ch, func(ev log.Event) bool {
			return ev.Kind == log.SteppedDown || ev.Kind == log.BecameLeader
		})
		t.Cleanup(o.Cancel)
		go func() {
			for ev := range ch {
				t.Logf("%v: %v", n.id, ev.Kind)
				changes.Add(1)
			}
		}()
	}
	return &changes
}

// Every durable write of every node takes 60% of a lease and more (400 ms
// against MaxLease 650 ms), while clients write without pause. Lease
// messages are stepped and answered while batches are being written, so
// the leader keeps its lease and every write succeeds. Before issue 16 the
// Node's loop waited for each write: a granter in the middle of one
// answered no grant request, and the leader lost its lease.
func TestSlowDiskKeepsTheLeader(t *testing.T) {
	c := newNetCluster(t, 3, withSlowDisk(400*time.Millisecond))
	leader := c.waitLeader(20 * time.Second)
	changes := watchLeadership(t, c)

	var wg sync.WaitGroup
	var writes atomic.Int64
	errs := make(chan error, 64)
	deadline := time.Now().Add(4 * time.Second)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(deadline); i++ {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_, err := leader.Apply(ctx, putCmd(t, fmt.Sprintf("k%d", w), fmt.Sprint(i)))
				cancel()
				if err != nil {
					errs <- fmt.Errorf("writer %d, write %d: %w", w, i, err)
					return
				}
				writes.Add(1)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	st := leader.StorageStats()
	t.Logf("%d writes in 4s; leader's store: %d transactions, mean %v, max %v, %d slow",
		writes.Load(), st.Writes, st.WriteTime/time.Duration(max(st.Writes, 1)), st.WriteMax, st.SlowWrites)
	require.Zero(t, changes.Load(), "leadership changed under a slow disk")
	require.True(t, leader.Status().IsLeader, "the leader kept its lease")
	require.Positive(t, writes.Load())
}

// A disk far slower than the clients: the entries waiting for it stay
// within the configured bound (plus one batch of proposals), writes wait
// for room rather than pile up in memory, and the lease holds.
func TestWriteBacklogIsBounded(t *testing.T) {
	const maxUnsynced, maxBatch = 16, 4
	c := newNetCluster(t, 3, withSlowDisk(150*time.Millisecond), func(cfg *log.Config) {
		cfg.MaxUnsyncedEntries, cfg.MaxBatch = maxUnsynced, maxBatch
	})
	leader := c.waitLeader(20 * time.Second)
	changes := watchLeadership(t, c)

	stop := make(chan struct{})
	var peak, leaderPeak atomic.Int64
	var sampler sync.WaitGroup
	sampler.Add(1)
	go func() {
		defer sampler.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			for _, n := range c.nodes {
				e := int64(n.StorageStats().BacklogEntries)
				if e > peak.Load() {
					peak.Store(e)
				}
				if n == leader && e > leaderPeak.Load() {
					leaderPeak.Store(e)
				}
			}
		}
	}()
	var wg sync.WaitGroup
	var ok, waited atomic.Int64
	for w := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			for i := 0; ; i++ {
				_, err := leader.Apply(ctx, putCmd(t, fmt.Sprintf("k%d", w), fmt.Sprint(i)))
				switch {
				case err == nil:
					ok.Add(1)
				case ctx.Err() != nil:
					waited.Add(1)
					return
				default:
					t.Errorf("writer %d: %v", w, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	sampler.Wait()
	st := leader.StorageStats()
	t.Logf("%d writes done, %d writers still waiting at their deadline; peak backlog %d entries (leader %d); leader throttled %d times",
		ok.Load(), waited.Load(), peak.Load(), leaderPeak.Load(), st.Throttled)
	// The leader checks the bound before it takes a batch of proposals; a
	// follower before it steps an append, which carries at most what the
	// leader has and the follower lacks: a bound's worth and one batch.
	require.LessOrEqual(t, leaderPeak.Load(), int64(maxUnsynced+maxBatch), "leader's backlog beyond its bound")
	require.LessOrEqual(t, peak.Load(), int64(2*(maxUnsynced+maxBatch)), "a follower's backlog beyond its bound")
	require.Positive(t, st.Throttled, "the leader never had to hold proposals back: the test did not load the disk")
	require.Positive(t, ok.Load())
	require.Zero(t, changes.Load(), "leadership changed under a slow disk")
	require.True(t, leader.Status().IsLeader)
}
