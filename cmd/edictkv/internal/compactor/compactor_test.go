package compactor

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/kvservice"
)

// fakeClock is virtual time: After's channels fire only when Advance
// passes their time, and BlockUntil waits until the compactor waits on
// one, so that a test steps the compactor a wait at a time, without
// sleeping.
type fakeClock struct {
	mu     sync.Mutex
	cond   *sync.Cond
	now    time.Time
	timers []fakeTimer
}

type fakeTimer struct {
	at time.Time
	ch chan time.Time
}

func newFakeClock() *fakeClock {
	c := &fakeClock{now: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	c.cond = sync.NewCond(&c.mu)
	return c
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.timers = append(c.timers, fakeTimer{at: c.now.Add(d), ch: ch})
	c.cond.Broadcast()
	return ch
}

// Advance moves time on by d, firing the timers it passes.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.timers[:0]
	for _, t := range c.timers {
		if t.at.After(c.now) {
			kept = append(kept, t)
			continue
		}
		t.ch <- c.now
	}
	c.timers = kept
}

// BlockUntil returns once n timers are waiting.
func (c *fakeClock) BlockUntil(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.timers) < n {
		c.cond.Wait()
	}
}

// fakeKV is the KV service's Compact over a state's compaction revision:
// a compaction at or below it is refused as etcd's ErrCompacted, as the
// service refuses it; fail, if set, refuses the next one with its error.
type fakeKV struct {
	mu         sync.Mutex
	compactRev int64
	fail       error
	calls      []int64
	// block, if set, makes Compact wait for its context's end, telling
	// entered it has begun.
	block   bool
	entered chan struct{}
}

func (k *fakeKV) Compact(ctx context.Context, r *pb.CompactionRequest) (*pb.CompactionResponse, error) {
	k.mu.Lock()
	k.calls = append(k.calls, r.Revision)
	block, fail := k.block, k.fail
	k.fail = nil
	k.mu.Unlock()
	if block {
		close(k.entered)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if fail != nil {
		return nil, fail
	}
	if r.Physical {
		return nil, errors.New("the compactor asks for no physical compaction, as etcd's")
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if r.Revision <= k.compactRev {
		return nil, &kvservice.RevisionError{Requested: r.Revision, Oldest: k.compactRev, Err: kvservice.ErrCompacted}
	}
	k.compactRev = r.Revision
	return &pb.CompactionResponse{Header: &pb.ResponseHeader{}}, nil
}

func (k *fakeKV) takeCalls() []int64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := k.calls
	k.calls = nil
	return out
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// step is what holds at one tick of the compactor's wait (the tick's
// index counts its waits from the start): the state's revision then,
// whether this process leads, a compaction refused, or compacted further
// by a client before the tick.
type step struct {
	rev       int64
	leading   bool
	fail      error
	clientRev int64
}

// compaction is a compaction proposed at a tick.
type compaction struct {
	tick int
	rev  int64
}

// run steps a compactor with retention through steps, one wait per
// step, in virtual time, and returns the compactions it proposed.
func run(t *testing.T, r Retention, steps []step) []compaction {
	t.Helper()
	clk := newFakeClock()
	kv := &fakeKV{compactRev: -1}
	var mu sync.Mutex
	rev := int64(1)
	c, err := New(Config{Retention: r, Clock: clk, KV: kv, Logger: quiet,
		Rev: func() int64 { mu.Lock(); defer mu.Unlock(); return rev }})
	require.NoError(t, err)
	var out []compaction
	wait := RevisionInterval
	if r.Mode == Periodic {
		wait, _, _ = periodicIntervals(r.Period)
	}
	for i, s := range steps {
		mu.Lock()
		rev = s.rev
		mu.Unlock()
		c.SetLeading(s.leading)
		kv.mu.Lock()
		kv.fail = s.fail
		if s.clientRev > kv.compactRev {
			kv.compactRev = s.clientRev
		}
		kv.mu.Unlock()
		if i == 0 {
			c.Start()
		} else {
			clk.Advance(wait)
		}
		// The tick is done once the compactor waits again.
		clk.BlockUntil(1)
		for _, rev := range kv.takeCalls() {
			out = append(out, compaction{tick: i, rev: rev})
		}
	}
	c.Stop()
	return out
}

// steps makes n steps: the revision grows by 10 a tick from 100, and
// each step is then changed by edit.
func steps(n int, edit func(i int, s *step)) []step {
	out := make([]step, n)
	for i := range out {
		out[i] = step{rev: 100 + 10*int64(i), leading: true}
		if edit != nil {
			edit(i, &out[i])
		}
	}
	return out
}

// The periodic policy, tick by tick as etcd's Periodic: a sample every
// tenth of the period (of an hour for longer periods); the first
// compaction a period after the start, to the revision sampled then;
// later ones every period (every hour), to the oldest sample kept (a
// period and a tick ago); failures tried again at the next tick; never
// while not leading, and a new leader compacts at once what is due.
func TestPeriodic(t *testing.T) {
	hour := Retention{Mode: Periodic, Period: time.Hour}
	errBusy := errors.New("busy")
	for _, c := range []struct {
		name  string
		r     Retention
		steps []step
		want  []compaction
	}{
		{"an hour", hour, steps(31, nil), []compaction{{10, 100}, {20, 190}, {30, 290}}},
		{"ten minutes, the same in its own time", Retention{Mode: Periodic, Period: 10 * time.Minute}, steps(21, nil),
			[]compaction{{10, 100}, {20, 190}}},
		{"a day: every hour, to a day ago", Retention{Mode: Periodic, Period: 24 * time.Hour}, steps(261, nil),
			[]compaction{{240, 100}, {250, 190}, {260, 290}}},
		{"no writes: one compaction", hour, steps(31, func(i int, s *step) { s.rev = 7 }), []compaction{{10, 7}}},
		{"a failure is tried again at the next tick", hour, steps(22, func(i int, s *step) {
			if i == 10 {
				s.fail = errBusy
			}
		}), []compaction{{10, 100}, {11, 100}, {21, 200}}},
		{"a follower samples but never compacts", hour, steps(31, func(i int, s *step) { s.leading = false }), nil},
		{"a new leader compacts at once what is due", hour, steps(26, func(i int, s *step) { s.leading = i >= 15 }),
			[]compaction{{15, 140}, {25, 240}}},
		{"leadership lost and regained", hour, steps(31, func(i int, s *step) { s.leading = i < 12 || i >= 27 }),
			[]compaction{{10, 100}, {27, 260}}},
		{"a client compacted further: counted as done", hour, steps(21, func(i int, s *step) {
			if i == 10 {
				s.clientRev = 150
			}
		}), []compaction{{10, 100}, {20, 190}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, run(t, c.r, c.steps))
		})
	}
}

// The revision policy, as etcd's Revision: every five minutes, while
// leading, compact to the current revision less the retention, unless
// that is not positive or was the last one compacted.
func TestRevision(t *testing.T) {
	keep := Retention{Mode: Revision, Revisions: 125}
	for _, c := range []struct {
		name  string
		steps []step
		want  []compaction
	}{
		{"every interval", steps(5, nil), []compaction{{3, 5}, {4, 15}}},
		{"no writes: one compaction", steps(6, func(i int, s *step) {
			if i >= 3 {
				s.rev = 200
			}
		}), []compaction{{3, 75}}},
		{"a failure is tried again, at the revision then", steps(5, func(i int, s *step) {
			if i == 3 {
				s.fail = errors.New("busy")
			}
		}), []compaction{{3, 5}, {4, 15}}},
		{"only while leading", steps(8, func(i int, s *step) { s.leading = i == 4 || i >= 6 }),
			[]compaction{{4, 15}, {6, 35}, {7, 45}}},
		{"a client compacted further: counted as done, not repeated", steps(6, func(i int, s *step) {
			s.clientRev = 1000
			if i >= 4 {
				s.rev = 200
			}
		}), []compaction{{3, 5}, {4, 75}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, run(t, keep, c.steps))
		})
	}
}

// Stop ends a compaction in flight and returns.
func TestStopDuringCompaction(t *testing.T) {
	clk := newFakeClock()
	kv := &fakeKV{compactRev: -1, block: true, entered: make(chan struct{})}
	c, err := New(Config{Retention: Retention{Mode: Revision, Revisions: 1}, Clock: clk, KV: kv, Logger: quiet,
		Rev: func() int64 { return 10 }})
	require.NoError(t, err)
	c.SetLeading(true)
	c.Start()
	clk.BlockUntil(1)
	clk.Advance(RevisionInterval)
	<-kv.entered
	c.Stop()
	assert.Equal(t, []int64{9}, kv.takeCalls())
}

// follow sets the leadership from Status at once and at each wake-up,
// and ends, not leading, when the log stops.
func TestFollow(t *testing.T) {
	c, err := New(Config{Retention: Retention{Mode: Revision, Revisions: 1}, KV: &fakeKV{}, Rev: func() int64 { return 1 }, Logger: quiet})
	require.NoError(t, err)
	wake, quit := make(chan edictlog.Event, 1), make(chan struct{})
	var mu sync.Mutex
	leading := true
	set := func(b bool) { mu.Lock(); leading = b; mu.Unlock() }
	reads := make(chan bool)
	done := make(chan struct{})
	go func() {
		defer close(done)
		follow(wake, quit, func() bool {
			mu.Lock()
			b := leading
			mu.Unlock()
			reads <- b
			return b
		}, c)
	}()
	<-reads
	set(false)
	wake <- edictlog.Event{Kind: edictlog.SteppedDown}
	assert.False(t, <-reads)
	set(true)
	wake <- edictlog.Event{Kind: edictlog.BecameLeader}
	assert.True(t, <-reads)
	wake <- edictlog.Event{Kind: edictlog.Stopped}
	<-done
	assert.False(t, c.isLeading(), "a stopped log leads nothing")

	done = make(chan struct{})
	go func() {
		defer close(done)
		follow(wake, quit, func() bool { return true }, c)
	}()
	close(quit)
	<-done
}

// The flags, as etcd reads them.
func TestParseRetention(t *testing.T) {
	for _, c := range []struct {
		mode, retention string
		want            Retention
		bad             bool
	}{
		{"periodic", "0", Retention{Mode: Periodic}, false},
		{"periodic", "", Retention{Mode: Periodic}, false},
		{"periodic", "1", Retention{Mode: Periodic, Period: time.Hour}, false},
		{"periodic", "72", Retention{Mode: Periodic, Period: 72 * time.Hour}, false},
		{"periodic", "30m", Retention{Mode: Periodic, Period: 30 * time.Minute}, false},
		{"periodic", "1h30m", Retention{Mode: Periodic, Period: 90 * time.Minute}, false},
		{"revision", "1000", Retention{Mode: Revision, Revisions: 1000}, false},
		{"revision", "0", Retention{Mode: Revision}, false},
		{"revision", "1h", Retention{}, true},
		{"periodic", "-1", Retention{}, true},
		{"periodic", "-5m", Retention{}, true},
		{"periodic", "100ms", Retention{}, true},
		{"periodic", "soon", Retention{}, true},
		{"periodic", "9999999999", Retention{}, true},
		{"hourly", "1", Retention{}, true},
		{"revision", "-3", Retention{}, true},
	} {
		got, err := ParseRetention(c.mode, c.retention)
		if c.bad {
			assert.Error(t, err, "%s %s", c.mode, c.retention)
			continue
		}
		require.NoError(t, err, "%s %s", c.mode, c.retention)
		assert.Equal(t, c.want, got, "%s %s", c.mode, c.retention)
	}
	_, err := New(Config{Retention: Retention{Mode: Periodic}, KV: &fakeKV{}, Rev: func() int64 { return 1 }})
	assert.Error(t, err, "no retention, no compactor")
}
