// Package compactor is edictkv's auto-compaction: etcd's v3compactor
// (server/etcdserver/api/v3compactor), which keeps the MVCC history to a
// retention by proposing compactions, as a client's Compact would.
//
// Two policies, etcd's:
//
//   - Periodic (--auto-compaction-mode periodic): the state's revision is
//     sampled every tenth of the retention period (of an hour, for
//     periods over an hour), and the history is compacted to the oldest
//     sample kept, the one taken a period ago: first once a whole period
//     has passed since the compactor started, then every period (every
//     hour for longer ones), when, as in etcd, the oldest sample kept is a
//     period and one sample interval old. A failed compaction is tried
//     again at the next sample.
//   - Revision (--auto-compaction-retention N in revision mode): every
//     five minutes the history is compacted to the current revision less
//     N, keeping the last N revisions.
//
// What it guarantees:
//
//   - It proposes a compaction only while Leading says this process
//     leads (the process tells it, from the log's leadership events:
//     Watch). Compaction is a log entry: every replica compacts at the
//     same revision, and a new leader's compactor carries on from the
//     replicated state. Samples are taken whether it leads or not, so
//     that a follower that becomes leader knows the revisions of the last
//     period.
//   - It never compacts the same revision twice in a row, nor a revision
//     at or below 0; a compaction the state refuses as already compacted
//     (a client compacted further) counts as done, as in etcd.
//   - Every reading of time goes through its Clock, so that its tests run
//     in virtual time.
package compactor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/edictlog/edictlog/cmd/edictkv/internal/kvservice"
)

// Mode is the policy: etcd's --auto-compaction-mode.
type Mode string

// The modes, by etcd's names.
const (
	Periodic Mode = "periodic"
	Revision Mode = "revision"
)

// RevisionInterval is how often the revision policy compacts: etcd's.
const RevisionInterval = 5 * time.Minute

// MinPeriod is the shortest retention period the periodic policy takes:
// it samples every tenth of it, and compacting many times a second gains
// nothing over keeping no history.
const MinPeriod = time.Second

// Retention is what the compactor keeps: a period of time (Periodic) or
// a number of revisions (Revision). The zero value keeps everything
// (no auto-compaction).
type Retention struct {
	Mode Mode
	// Period is how much time of history the periodic policy keeps.
	Period time.Duration
	// Revisions is how many revisions the revision policy keeps.
	Revisions int64
}

// Enabled says whether the retention asks for auto-compaction.
func (r Retention) Enabled() bool { return r.Period > 0 || r.Revisions > 0 }

func (r Retention) String() string {
	switch {
	case !r.Enabled():
		return "off"
	case r.Mode == Revision:
		return fmt.Sprintf("the last %d revisions", r.Revisions)
	}
	return fmt.Sprintf("%v of history", r.Period)
}

// ParseRetention reads --auto-compaction-mode and
// --auto-compaction-retention as etcd does (embed's
// parseCompactionRetention): in periodic mode a duration ("30m", "1h") or
// a bare number of hours; in revision mode a number of revisions. "0" (or
// an empty retention) turns auto-compaction off. Unlike etcd it refuses a
// duration in revision mode, which etcd would read as a count of
// nanoseconds, and a period under MinPeriod.
func ParseRetention(mode, retention string) (Retention, error) {
	m := Mode(mode)
	if m != Periodic && m != Revision {
		return Retention{}, fmt.Errorf("--auto-compaction-mode %q: want periodic or revision", mode)
	}
	if retention == "" {
		return Retention{Mode: m}, nil
	}
	if n, err := strconv.ParseInt(retention, 10, 64); err == nil {
		switch {
		case n < 0:
			return Retention{}, fmt.Errorf("--auto-compaction-retention %q: negative", retention)
		case m == Revision:
			return Retention{Mode: m, Revisions: n}, nil
		case n > int64(maxDuration/time.Hour):
			return Retention{}, fmt.Errorf("--auto-compaction-retention %q: too many hours", retention)
		}
		return checkPeriod(retention, Retention{Mode: m, Period: time.Duration(n) * time.Hour})
	}
	if m == Revision {
		return Retention{}, fmt.Errorf("--auto-compaction-retention %q: revision mode keeps a number of revisions (e.g. 1000)", retention)
	}
	d, err := time.ParseDuration(retention)
	if err != nil {
		return Retention{}, fmt.Errorf("--auto-compaction-retention %q: want a duration (e.g. 1h, 30m) or a number of hours: %w", retention, err)
	}
	if d < 0 {
		return Retention{}, fmt.Errorf("--auto-compaction-retention %q: negative", retention)
	}
	return checkPeriod(retention, Retention{Mode: m, Period: d})
}

const maxDuration = time.Duration(1<<63 - 1)

func checkPeriod(s string, r Retention) (Retention, error) {
	if r.Period > 0 && r.Period < MinPeriod {
		return Retention{}, fmt.Errorf("--auto-compaction-retention %q: under the shortest period, %v", s, MinPeriod)
	}
	return r, nil
}

// Clock is the compactor's source of time (etcd's compactors use
// clockwork's). Tests give it a virtual one.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// KV is what the compactor proposes compactions to: the KV service
// (kvservice.Service.Compact), which writes them through the log.
type KV interface {
	Compact(ctx context.Context, r *pb.CompactionRequest) (*pb.CompactionResponse, error)
}

// Config configures a Compactor.
type Config struct {
	Retention Retention
	// Rev is the state's current revision (kvstate.State.Rev).
	Rev func() int64
	// KV takes the compactions.
	KV KV
	// Clock, if set, replaces the real clock.
	Clock  Clock
	Logger *slog.Logger
}

// Compactor runs one retention policy. Start it, tell it when this
// process leads (SetLeading), and Stop it.
type Compactor struct {
	cfg    Config
	clock  Clock
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	leading bool
}

// New returns a Compactor for cfg; it starts not leading.
func New(cfg Config) (*Compactor, error) {
	r := cfg.Retention
	switch {
	case cfg.Rev == nil || cfg.KV == nil:
		return nil, errors.New("compactor: Config.Rev and Config.KV are required")
	case !r.Enabled():
		return nil, errors.New("compactor: no retention: auto-compaction is off")
	case r.Mode == Periodic && r.Period < MinPeriod:
		return nil, fmt.Errorf("compactor: a period of %v is under the shortest, %v", r.Period, MinPeriod)
	case r.Mode != Periodic && r.Mode != Revision:
		return nil, fmt.Errorf("compactor: unknown mode %q", r.Mode)
	}
	if cfg.Clock == nil {
		cfg.Clock = realClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	c := &Compactor{cfg: cfg, clock: cfg.Clock, log: cfg.Logger.With("component", "compactor", "retention", r.String()),
		done: make(chan struct{})}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c, nil
}

// Start runs the policy on a goroutine of its own until Stop.
func (c *Compactor) Start() {
	go func() {
		defer close(c.done)
		if c.cfg.Retention.Mode == Periodic {
			c.runPeriodic()
		} else {
			c.runRevision()
		}
	}()
}

// Stop ends the policy, and a compaction it is proposing, and returns
// once it has ended. Call it once, after Start.
func (c *Compactor) Stop() {
	c.cancel()
	<-c.done
}

// SetLeading tells the compactor whether this process leads: etcd's
// Resume and Pause.
func (c *Compactor) SetLeading(leading bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.leading != leading {
		c.log.Info("compactor follows the leadership", "leading", leading)
	}
	c.leading = leading
}

func (c *Compactor) isLeading() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leading
}

// wait waits d on the clock; false once stopped.
func (c *Compactor) wait(d time.Duration) bool {
	select {
	case <-c.ctx.Done():
		return false
	case <-c.clock.After(d):
		return true
	}
}

// compact proposes a compaction at rev; true if it is done, or was
// already (a client compacted as far or further).
func (c *Compactor) compact(rev int64) bool {
	start := c.clock.Now()
	c.log.Info("starting auto-compaction", "revision", rev)
	_, err := c.cfg.KV.Compact(c.ctx, &pb.CompactionRequest{Revision: rev})
	if err != nil && !errors.Is(err, kvservice.ErrCompacted) {
		if c.ctx.Err() == nil {
			c.log.Warn("auto-compaction failed; trying again later", "revision", rev, "err", err)
		}
		return false
	}
	c.log.Info("auto-compaction done", "revision", rev, "took", c.clock.Now().Sub(start), "already", err != nil)
	return true
}

// periodicIntervals are etcd's Periodic's: samples every tenth of the
// period, or of an hour for longer periods; compactions every period, or
// every hour for longer ones; and as many samples kept as a period holds,
// plus one.
func periodicIntervals(period time.Duration) (sample, every time.Duration, keep int) {
	every = min(period, time.Hour)
	sample = every / 10
	return sample, every, int(period/sample) + 1
}

// runPeriodic is etcd's Periodic.Run: revs[0] is always the revision
// sampled a period ago (once a period has passed).
func (c *Compactor) runPeriodic() {
	period := c.cfg.Retention.Period
	sample, every, keep := periodicIntervals(period)
	revs := make([]int64, 0, keep+1)
	var last int64
	lastDone := c.clock.Now()
	// The first compaction waits a whole period, the later ones every.
	interval := period
	for {
		revs = append(revs, c.cfg.Rev())
		if len(revs) > keep {
			revs = append(revs[:0], revs[1:]...)
		}
		if !c.wait(sample) {
			return
		}
		if !c.isLeading() {
			continue
		}
		rev := revs[0]
		if c.clock.Now().Sub(lastDone) < interval || rev == last || rev <= 0 {
			continue
		}
		interval = every
		if c.compact(rev) {
			last, lastDone = rev, c.clock.Now()
		}
	}
}

// runRevision is etcd's Revision.Run.
func (c *Compactor) runRevision() {
	var last int64
	for c.wait(RevisionInterval) {
		if !c.isLeading() {
			continue
		}
		rev := c.cfg.Rev() - c.cfg.Retention.Revisions
		if rev <= 0 || rev == last {
			continue
		}
		if c.compact(rev) {
			last = rev
		}
	}
}
