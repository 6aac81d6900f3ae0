package process

import (
	"sync"
	"time"

	"github.com/edictlog/edictlog/cmd/edictkv/internal/httpapi"
	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/log"
	"github.com/edictlog/edictlog/storage"
	"github.com/edictlog/edictlog/wire"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the process's own, beside the APIs' request metrics in the
// same registry: the Node's state, the reigns it started, the store's
// timings.
type metrics struct {
	reigns *reignCounter
}

// reignCounter counts the reigns this process started. Its filter sees
// every event the Node announces, as it is sent, whether or not a
// channel has room: it counts the BecameLeader events there and takes
// none (log.Observer). A reign under way when the count starts is
// counted from Status; each reign once, by its stamp.
type reignCounter struct {
	obs *log.Observer

	mu   sync.Mutex
	last edict.Stamp
	n    uint64
}

func newReignCounter(node *log.Node) *reignCounter {
	c := &reignCounter{}
	c.obs = node.Observe(make(chan log.Event, 1), func(ev log.Event) bool {
		if ev.Kind == log.BecameLeader {
			c.see(ev.Reign)
		}
		return false
	})
	// Read after subscribing: a reign announced since is seen twice, and
	// counted once.
	if st := node.Status(); st.IsLeader {
		c.see(st.Reign)
	}
	return c
}

func (c *reignCounter) see(reign edict.Stamp) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !reign.Equal(c.last) {
		c.last = reign
		c.n++
	}
}

func (c *reignCounter) count() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return float64(c.n)
}

// newMetrics registers the process's metrics in reg: those of node and of
// store. Values that are state (lease, indexes) are read from the Node at
// scrape time; events are counted as they happen.
func newMetrics(reg prometheus.Registerer, node *log.Node, store *TimedStore) (*metrics, error) {
	m := &metrics{}
	m.reigns = newReignCounter(node)
	reigns := prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "edictkv_reigns_started_total",
		Help: "Reigns (runs of leadership) this process started."}, m.reigns.count)
	status := func(f func(log.Status) float64) func() float64 { return func() float64 { return f(node.Status()) } }
	cs := []prometheus.Collector{reigns,
		gauge("edictkv_is_leader", "1 while this process holds the lease and leads.", status(func(st log.Status) float64 { return b2f(st.IsLeader) })),
		gauge("edictkv_lease_remaining_seconds", "How long this process's lease still runs (0 when not leading).", status(func(st log.Status) float64 {
			if !st.IsLeader {
				return 0
			}
			d, _ := st.LeaseExpiry.Sub(node.Clock().Now())
			return max(d, 0).Seconds()
		})),
		gauge("edictkv_leader_id", "The leader this process knows of (0: none).", status(func(st log.Status) float64 { return float64(st.Leader) })),
		gauge("edictkv_epoch", "The active epoch.", status(func(st log.Status) float64 { return float64(st.Epoch) })),
		gauge("edictkv_commit_index", "The highest index known committed.", status(func(st log.Status) float64 { return float64(st.Commit) })),
		gauge("edictkv_applied_index", "The highest index applied to the state machine.", status(func(st log.Status) float64 { return float64(st.Applied) })),
		gauge("edictkv_last_index", "The last index in this process's log.", status(func(st log.Status) float64 { return float64(st.LastIndex) })),
	}
	cs = append(cs, store.collectors()...)
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			m.close()
			return nil, err
		}
	}
	return m, nil
}

// close ends the subscription that counts reigns.
func (m *metrics) close() { m.reigns.obs.Cancel() }

func gauge(name, help string, f func() float64) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// StatsStore is a log store that reports its sizes and fsyncs, as package
// storage's stores do.
type StatsStore interface {
	log.Store
	Stats() (storage.Stats, error)
}

// TimedStore wraps a store to time its durable batches: each is a
// log append with its fsync, the latency every write waits for.
type TimedStore struct {
	StatsStore
	batch prometheus.Histogram
}

// NewTimedStore wraps st.
func NewTimedStore(st StatsStore) *TimedStore {
	return &TimedStore{StatsStore: st, batch: prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "edictkv_append_seconds", Buckets: httpapi.LatencyBuckets,
		Help: "Time to store one batch of log entries durably (write and fsync), leader and followers alike."})}
}

// StoreBatch implements log.LogStore.
func (t *TimedStore) StoreBatch(b wire.Batch) error {
	start := time.Now()
	err := t.StatsStore.StoreBatch(b)
	t.batch.Observe(time.Since(start).Seconds())
	return err
}

// collectors export the batch timing and the store's own fsync counters
// (bbolt measures each commit's write-and-sync).
func (t *TimedStore) collectors() []prometheus.Collector {
	stat := func(f func(storage.Stats) float64) func() float64 {
		return func() float64 {
			st, err := t.StatsStore.Stats()
			if err != nil {
				return 0
			}
			return f(st)
		}
	}
	return []prometheus.Collector{t.batch,
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "edictkv_fsyncs_total", Help: "Durable commits of the store."},
			stat(func(s storage.Stats) float64 { return float64(s.Fsyncs) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "edictkv_fsync_seconds_total", Help: "Time spent writing and syncing commits; divide by edictkv_fsyncs_total for the mean."},
			stat(func(s storage.Stats) float64 { return s.FsyncTime.Seconds() })),
		gauge("edictkv_fsync_max_seconds", "The longest single commit write and sync.", stat(func(s storage.Stats) float64 { return s.FsyncMax.Seconds() })),
	}
}
