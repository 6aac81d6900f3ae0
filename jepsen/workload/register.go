package workload

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edictlog/edictlog/jepsen/history"
)

// Target is one edictkv node a client may talk to.
type Target struct {
	ID   int
	Addr string // host:port of its HTTP API
}

// Config is what every workload shares.
type Config struct {
	// Clients is the number of concurrent clients (default 10).
	Clients int
	// Targets returns the nodes the clients may talk to now; client c
	// talks to the (c mod len)th.
	Targets func() []Target
	// Timeout bounds one operation (default 2s): past it, a write's
	// outcome is unknown.
	Timeout time.Duration
	// Seed makes the operation mix reproducible (the cluster is not).
	Seed uint64
}

func (c *Config) defaults() {
	if c.Clients <= 0 {
		c.Clients = 10
	}
	if c.Timeout <= 0 {
		c.Timeout = 2 * time.Second
	}
}

// Register is the per-key register workload: reads at Level, writes of
// unique values, and compare-and-sets from a value recently seen, over
// Keys keys ("r0", "r1", ...), so that the checker can partition by key.
type Register struct {
	Config
	Keys  int    // default 8
	Level string // lease, follower or stale (default lease)
}

// Run runs the clients until ctx ends, recording into rec.
func (w *Register) Run(ctx context.Context, rec *history.Recorder) {
	w.defaults()
	if w.Keys <= 0 {
		w.Keys = 8
	}
	if w.Level == "" {
		w.Level = "lease"
	}
	a := newAPI(w.Timeout)
	var next atomic.Int64 // unique values
	seen := newSeen(w.Keys)
	var wg sync.WaitGroup
	for c := range w.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(w.Seed, uint64(c)))
			process := c
			for ctx.Err() == nil {
				t, ok := bound(c, w.Targets())
				if !ok {
					sleep(ctx, 50*time.Millisecond)
					continue
				}
				k := rng.IntN(w.Keys)
				key := fmt.Sprintf("r%d", k)
				op := history.Op{Process: process, Type: history.Invoke, Key: key, Node: t.ID}
				var out outcome
				switch r := rng.Float64(); {
				case r < 0.5:
					op.F, op.Level = history.FRead, w.Level
					rec.Add(op)
					out = a.read(context.WithoutCancel(ctx), t.Addr, key, w.Level)
					if out.typ == history.OK && out.value != nil {
						seen.add(k, *out.value)
					}
				case r < 0.8:
					op.F, op.Value = history.FWrite, history.Int(next.Add(1))
					rec.Add(op)
					out = a.write(context.WithoutCancel(ctx), t.Addr, key, *op.Value, nil)
					seen.add(k, *op.Value)
				default:
					prev, ok := seen.pick(rng, k)
					if !ok {
						continue
					}
					op.F, op.Value, op.Prev = history.FCAS, history.Int(next.Add(1)), history.Int(prev)
					rec.Add(op)
					out = a.write(context.WithoutCancel(ctx), t.Addr, key, *op.Value, op.Prev)
					seen.add(k, *op.Value)
				}
				op.Type, op.Error = out.typ, out.err
				if op.F == history.FRead {
					op.Value = out.value
				}
				rec.Add(op)
				if out.typ == history.Info {
					process += w.Clients // the unknown operation may still be in flight
				}
				if out.unreachable {
					sleep(ctx, unreachablePause)
				}
			}
		}()
	}
	wg.Wait()
}

// FinalReads reads every key through every node at level, recording the
// reads as ordinary operations so the checker checks them too.
func (w *Register) FinalReads(ctx context.Context, rec *history.Recorder, level string, process int) {
	w.defaults()
	a := newAPI(w.Timeout)
	for _, t := range w.Targets() {
		for k := range w.Keys {
			key := fmt.Sprintf("r%d", k)
			op := history.Op{Process: process, Type: history.Invoke, F: history.FRead, Key: key, Node: t.ID, Level: level}
			rec.Add(op)
			out := a.read(ctx, t.Addr, key, level)
			op.Type, op.Value, op.Error = out.typ, out.value, out.err
			rec.Add(op)
		}
	}
}

// unreachablePause is how long a client whose node is down waits before
// trying it again, rather than filling the history with refused
// connections.
const unreachablePause = 100 * time.Millisecond

// seen keeps, per key, a few values recently written or read there: the
// candidates a CAS expects, so that some CASes succeed.
type seen struct {
	mu   sync.Mutex
	vals [][]int64
}

func newSeen(keys int) *seen { return &seen{vals: make([][]int64, keys)} }

func (s *seen) add(k int, v int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.vals[k] = append(s.vals[k], v)
	if len(s.vals[k]) > 4 {
		s.vals[k] = s.vals[k][1:]
	}
}

func (s *seen) pick(rng *rand.Rand, k int) (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.vals[k]) == 0 {
		return 0, false
	}
	return s.vals[k][rng.IntN(len(s.vals[k]))], true
}

// bound is the node client c talks to: always the same one (as in
// Jepsen), so that clients of nodes on the majority side of a partition
// keep working while those of cut-off nodes wait, and availability shows
// per node.
func bound(c int, ts []Target) (Target, bool) {
	if len(ts) == 0 {
		return Target{}, false
	}
	return ts[c%len(ts)], true
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
