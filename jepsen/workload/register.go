package workload

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
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
// Keys keys at a time, so that the checker can partition by key. Every
// KeyLife the clients move on to fresh keys ("r3.7": key 3 of the eighth
// period), as Jepsen's independent keys do: each key's history stays short
// enough for the checker even when many operations end with an unknown
// outcome, each of which may take effect at any later time.
type Register struct {
	Config
	Keys    int           // default 8
	KeyLife time.Duration // default 5s
	Level   string        // lease, follower or stale (default lease)

	used sync.Map // every key name used, for the final reads
}

// key names key k of the current period.
func (w *Register) key(start time.Time, k int) string {
	name := fmt.Sprintf("r%d.%d", k, int(time.Since(start)/w.KeyLife))
	w.used.Store(name, true)
	return name
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
	if w.KeyLife <= 0 {
		w.KeyLife = 5 * time.Second
	}
	start := time.Now()
	a := newAPI(w.Timeout)
	var next atomic.Int64 // unique values
	seen := newSeen()
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
				key := w.key(start, k)
				op := history.Op{Process: process, Type: history.Invoke, Key: key, Node: t.ID}
				var out outcome
				switch r := rng.Float64(); {
				case r < 0.5:
					op.F, op.Level = history.FRead, w.Level
					rec.Add(op)
					out = a.read(context.WithoutCancel(ctx), t.Addr, key, w.Level)
					if out.typ == history.OK && out.value != nil {
						seen.add(key, *out.value)
					}
				case r < 0.8:
					op.F, op.Value = history.FWrite, history.Int(next.Add(1))
					rec.Add(op)
					out = a.write(context.WithoutCancel(ctx), t.Addr, key, *op.Value, nil)
					seen.add(key, *op.Value)
				default:
					prev, ok := seen.pick(rng, key)
					if !ok {
						continue
					}
					op.F, op.Value, op.Prev = history.FCAS, history.Int(next.Add(1)), history.Int(prev)
					rec.Add(op)
					out = a.write(context.WithoutCancel(ctx), t.Addr, key, *op.Value, op.Prev)
					seen.add(key, *op.Value)
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

// FinalReads reads every key the clients used through every node at
// level, recording the reads as ordinary operations so the checker checks
// them too.
func (w *Register) FinalReads(ctx context.Context, rec *history.Recorder, level string, process int) {
	w.defaults()
	a := newAPI(w.Timeout)
	var keys []string
	w.used.Range(func(k, _ any) bool {
		keys = append(keys, k.(string))
		return true
	})
	slices.Sort(keys)
	for _, t := range w.Targets() {
		for _, key := range keys {
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
	vals map[string][]int64
}

func newSeen() *seen { return &seen{vals: map[string][]int64{}} }

func (s *seen) add(key string, v int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.vals[key] = append(s.vals[key], v)
	if len(s.vals[key]) > 4 {
		s.vals[key] = s.vals[key][1:]
	}
}

func (s *seen) pick(rng *rand.Rand, key string) (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	vs := s.vals[key]
	if len(vs) == 0 {
		return 0, false
	}
	return vs[rng.IntN(len(vs))], true
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
