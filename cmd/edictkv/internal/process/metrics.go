package process

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/mvcc"
	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/storage"
	"github.com/edictlog/edictlog/wire"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// LatencyBuckets span a fast local fsync (~100µs) to a pathological
// multi-second stall. The commit histogram and the store's histograms use
// them, so that the two compare.
var LatencyBuckets = prometheus.ExponentialBuckets(50e-6, 2, 18)

// metrics are the process's own, beside the APIs' request metrics in the
// same registry: the Node's state, the reigns it started and the leaders it
// saw, its lease and storage statistics, the store's timings, and how long
// writes took to commit (kvservice.Config.ObserveCommit).
type metrics struct {
	leaders *leaderCounter
	commit  prometheus.Histogram
}

// observeCommit records one write's time from proposal to apply.
func (m *metrics) observeCommit(d time.Duration) { m.commit.Observe(d.Seconds()) }

// leaderCounter counts the reigns this process started and the changes of
// leader it saw. Its filter sees every event the Node announces, as it is
// sent, whether or not a channel has room: it counts the leader events
// there and takes none (edictlog.Observer). A reign under way, or a leader
// known, when the count starts is counted from Status; each reign once, by
// its stamp.
//
// A change of leader is counted as etcd counts
// etcd_server_leader_changes_seen_total, so that the two compare: each time
// the leader this process knows of becomes a process other than the last
// one it knew, including the first one it learns of and the same process
// again after a time with none (a leader that stepped down and leads
// again). Followers learn of a leader from its appends, so a reign of the
// same leader that follows without a gap is not a change.
type leaderCounter struct {
	obs *edictlog.Observer

	mu         sync.Mutex
	lastReign  edict.Stamp
	reigns     uint64
	lastLeader edict.ProcessID
	changes    uint64
}

func newLeaderCounter(node *edictlog.Node) *leaderCounter {
	c := &leaderCounter{}
	c.obs = node.Observe(make(chan edictlog.Event, 1), func(ev edictlog.Event) bool {
		switch ev.Kind {
		case edictlog.BecameLeader:
			c.seeReign(ev.Reign)
			c.seeLeader(ev.Leader)
		case edictlog.LeaderChanged:
			c.seeLeader(ev.Leader)
		case edictlog.SteppedDown:
			c.seeLeader(edict.None)
		}
		return false
	})
	// Read after subscribing: a reign or leader announced since is seen
	// twice, and counted once.
	st := node.Status()
	if st.IsLeader {
		c.seeReign(st.Reign)
	}
	c.seeLeader(st.Leader)
	return c
}

func (c *leaderCounter) seeReign(reign edict.Stamp) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !reign.Equal(c.lastReign) {
		c.lastReign = reign
		c.reigns++
	}
}

func (c *leaderCounter) seeLeader(p edict.ProcessID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p != c.lastLeader && p != edict.None {
		c.changes++
	}
	c.lastLeader = p
}

func (c *leaderCounter) reignCount() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return float64(c.reigns)
}

func (c *leaderCounter) changeCount() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return float64(c.changes)
}

// newMetrics registers the process's metrics in reg: those of node, of
// its log's store and of the state's store. Values that are state (lease, indexes, backlog) and the Node's own
// counters are read from the Node at scrape time; leader events are
// counted as they happen.
func newMetrics(reg prometheus.Registerer, node *edictlog.Node, store *TimedStore, state *mvcc.Store) (*metrics, error) {
	m := &metrics{commit: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "edictkv_commit_seconds",
		Help: "Time from a write's proposal at the leader to its commit and apply.", Buckets: LatencyBuckets})}
	m.leaders = newLeaderCounter(node)
	status := func(f func(edictlog.Status) float64) func() float64 {
		return func() float64 { return f(node.Status()) }
	}
	cs := []prometheus.Collector{m.commit,
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "edictkv_reigns_started_total",
			Help: "Reigns (runs of leadership) this process started."}, m.leaders.reignCount),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "edictkv_leader_changes_seen_total",
			Help: "Changes of the leader this process knows of to another process (or to the same one after none), as etcd_server_leader_changes_seen_total counts them."},
			m.leaders.changeCount),
		gauge("edictkv_is_leader", "1 while this process holds the lease and leads.", status(func(st edictlog.Status) float64 { return b2f(st.IsLeader) })),
		gauge("edictkv_lease_remaining_seconds", "How long this process's lease still runs (0 when not leading).", status(func(st edictlog.Status) float64 {
			if !st.IsLeader {
				return 0
			}
			d, _ := st.LeaseExpiry.Sub(node.Clock().Now())
			return max(d, 0).Seconds()
		})),
		gauge("edictkv_leader_id", "The leader this process knows of (0: none).", status(func(st edictlog.Status) float64 { return float64(st.Leader) })),
		gauge("edictkv_epoch", "The active epoch.", status(func(st edictlog.Status) float64 { return float64(st.Epoch) })),
		gauge("edictkv_commit_index", "The highest index known committed.", status(func(st edictlog.Status) float64 { return float64(st.Commit) })),
		gauge("edictkv_applied_index", "The highest index applied to the state machine.", status(func(st edictlog.Status) float64 { return float64(st.Applied) })),
		gauge("edictkv_last_index", "The last index in this process's log.", status(func(st edictlog.Status) float64 { return float64(st.LastIndex) })),
		newNodeStats(node),
		newStateStats(state),
		// process_resident_memory_bytes and the rest of the process's own
		// (not the Go runtime's): etcdctl check datascale reads it.
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	}
	cs = append(cs, store.collectors()...)
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			m.close()
			return nil, fmt.Errorf("process: metrics: %w", err)
		}
	}
	return m, nil
}

// close ends the subscription that counts reigns and leader changes.
func (m *metrics) close() { m.leaders.obs.Cancel() }

// nodeStats exports the Node's lease and storage statistics
// (edictlog.Node.LeaseStats, StorageStats), read once per scrape: the signs of a
// gray failure — a busy or starved process renewing late, a slow disk
// leaving entries waiting for their fsync, flow control holding proposals
// back — before they cost a lease.
type nodeStats struct {
	node *edictlog.Node

	renewals, renewalsLate, lost, grantAge   *prometheus.Desc
	lostLate, stall, renewLead               *prometheus.Desc
	backlogEntries, backlogBytes, slowWrites *prometheus.Desc
	shed, throttled                          *prometheus.Desc
}

func newNodeStats(node *edictlog.Node) *nodeStats {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &nodeStats{node: node,
		renewals: d("edictkv_lease_renewals_total", "Lease renewals this process started as leader."),
		renewalsLate: d("edictkv_lease_renewals_late_total",
			"Lease renewals started more than a round trip after they were due: the process was busy or starved."),
		lost: d("edictkv_leases_lost_total",
			"Leases this process lost, by cause: expired (ran out unrenewed), released (given up: step-down, transfer, shutdown, epoch end), suspended (given up after a host suspend).",
			"cause"),
		lostLate: d("edictkv_leases_lost_late_total",
			"Of the leases lost expired, those this process lost through its own slowness (a renewal started late, the end noticed late); after each it stood aside for a lease so that a healthy member could lead."),
		stall: d("edictkv_lease_stall_seconds",
			"The longest stall this process saw in the last 30 to 60 s that a lease renewal must ride out: how late its loop ran after a timer was due, how long a renewal took from due to done (as leader), how late the leader's renewals came (as granter); 0 if none."),
		renewLead: d("edictkv_lease_renew_lead_seconds",
			"How long before its lease ends this process renews it (leading), or would if it led now: the configured lead (0.27 s by default), or twice edictkv_lease_stall_seconds if that is longer, up to the longest lease less the renewals' spacing. The lease is as much longer, up to the longest lease, and a crashed leader's successor waits it out."),
		grantAge: d("edictkv_lease_grant_age_seconds",
			"Time since each peer last granted this process a lease (renewals included); it grows while this process does not lead.",
			"peer"),
		backlogEntries: d("edictkv_unsynced_entries", "Log entries handed to the store and not yet durable (waiting for their fsync)."),
		backlogBytes:   d("edictkv_unsynced_bytes", "Payload bytes of the entries handed to the store and not yet durable."),
		slowWrites:     d("edictkv_slow_writes_total", "Durable writes that took longer than a quarter of the lease (each also logged)."),
		shed: d("edictkv_appends_shed_total",
			"Appends with entries this process dropped as a follower while its unsynced backlog was at its bound (the leader sends them again)."),
		throttled: d("edictkv_proposals_throttled_total",
			"Times this process, leading, stopped taking proposals because its unsynced backlog was at its bound."),
	}
}

// Describe implements prometheus.Collector.
func (s *nodeStats) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{s.renewals, s.renewalsLate, s.lost, s.lostLate, s.stall, s.renewLead, s.grantAge,
		s.backlogEntries, s.backlogBytes, s.slowWrites, s.shed, s.throttled} {
		ch <- d
	}
}

// Collect implements prometheus.Collector: one reading of each of the
// Node's statistics per scrape, so the figures of one scrape agree.
func (s *nodeStats) Collect(ch chan<- prometheus.Metric) {
	ls := s.node.LeaseStats()
	ss := s.node.StorageStats()
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	counter(s.renewals, ls.Renewals)
	counter(s.renewalsLate, ls.RenewalsLate)
	counter(s.lost, ls.LostExpired, "expired")
	counter(s.lost, ls.LostReleased, "released")
	counter(s.lost, ls.LostSuspended, "suspended")
	counter(s.lostLate, ls.LostLate)
	ch <- prometheus.MustNewConstMetric(s.stall, prometheus.GaugeValue, ls.Stall.Seconds())
	ch <- prometheus.MustNewConstMetric(s.renewLead, prometheus.GaugeValue, ls.RenewLead.Seconds())
	for _, p := range slices.Sorted(maps.Keys(ls.SinceLastGrant)) {
		ch <- prometheus.MustNewConstMetric(s.grantAge, prometheus.GaugeValue, ls.SinceLastGrant[p].Seconds(),
			strconv.FormatUint(uint64(p), 10))
	}
	ch <- prometheus.MustNewConstMetric(s.backlogEntries, prometheus.GaugeValue, float64(ss.BacklogEntries))
	ch <- prometheus.MustNewConstMetric(s.backlogBytes, prometheus.GaugeValue, float64(ss.BacklogBytes))
	counter(s.slowWrites, ss.SlowWrites)
	counter(s.shed, ss.AppendsShed)
	counter(s.throttled, ss.Throttled)
}

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
	edictlog.Store
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
		Name: "edictkv_append_seconds", Buckets: LatencyBuckets,
		Help: "Time to store one batch of log entries durably (write and fsync), leader and followers alike."})}
}

// StoreBatch implements edictlog.LogStore.
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
		gauge("edictkv_log_store_bytes", "Disk the log's store holds: a WALStore's segments, each allocated at its full size when created, or a BoltStore's file.",
			stat(func(s storage.Stats) float64 { return float64(s.FileSize) })),
		gauge("edictkv_log_store_cut_short_bytes", "Bytes of a write a crash cut short that the log's store found at the end of its log and cleared at start (never acknowledged); 0 when there was none.",
			stat(func(s storage.Stats) float64 { return float64(s.TornBytes) })),
	}
}
