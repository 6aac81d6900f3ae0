package process

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/edictlog/edictlog/cmd/edictkv/internal/mvcc"
)

// stateStats exports the state's store — its revisions, its size, its
// keys — and its watchers (mvcc.Store.WatchStats), read once per scrape.
// The watchers' figures are etcd's etcd_debugging_mvcc_* ones under
// edictkv's names: how many watch, how many fell behind (unsynced, catching
// up from history) or wait for a stream that does not read (parked), and
// how much the parked ones hold.
type stateStats struct {
	store *mvcc.Store

	rev, compactRev, size, sizeInUse, keys      *prometheus.Desc
	streams, watchers, parkedEvents, eventsSent *prometheus.Desc
	compacted                                   *prometheus.Desc
}

func newStateStats(store *mvcc.Store) *stateStats {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &stateStats{store: store,
		rev:        d("edictkv_state_revision", "The state's revision: that of the last write applied on this member."),
		compactRev: d("edictkv_state_compact_revision", "The revision of the last compaction (-1 before any); history below it is gone."),
		size:       d("edictkv_state_db_size_bytes", "The state's database file size, as etcd_mvcc_db_total_size_in_bytes (what the space quota counts)."),
		sizeInUse: d("edictkv_state_db_size_in_use_bytes",
			"The part of the database that holds data, as etcd_mvcc_db_total_size_in_use_in_bytes; the rest is free pages compaction left, which a defragmentation returns."),
		keys:    d("edictkv_state_keys", "Keys in the state's index: live keys and deleted ones whose history is not compacted away yet."),
		streams: d("edictkv_watch_streams", "Watch streams open on this member (gRPC streams and HTTP watches)."),
		watchers: d("edictkv_watchers",
			"Watchers on this member by state: synced (sent every event as it is applied), unsynced (behind, catching up from history), parked (a response waits for room in a stream that does not read).",
			"state"),
		parkedEvents: d("edictkv_watch_parked_events", "Events held in parked responses, waiting for their streams to read."),
		eventsSent:   d("edictkv_watch_events_total", "Events handed to watch streams since the state opened."),
		compacted:    d("edictkv_watchers_compacted_total", "Watchers cancelled because compaction passed the revision they were to see next."),
	}
}

// Describe implements prometheus.Collector.
func (s *stateStats) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{s.rev, s.compactRev, s.size, s.sizeInUse, s.keys,
		s.streams, s.watchers, s.parkedEvents, s.eventsSent, s.compacted} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (s *stateStats) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(s.rev, float64(s.store.Rev()))
	gauge(s.compactRev, float64(s.store.CompactRev()))
	gauge(s.size, float64(s.store.Size()))
	gauge(s.sizeInUse, float64(s.store.SizeInUse()))
	gauge(s.keys, float64(s.store.KeyCount()))
	w := s.store.WatchStats()
	gauge(s.streams, float64(w.Streams))
	gauge(s.watchers, float64(w.Synced), "synced")
	gauge(s.watchers, float64(w.Unsynced), "unsynced")
	gauge(s.watchers, float64(w.Parked), "parked")
	gauge(s.parkedEvents, float64(w.ParkedEvents))
	ch <- prometheus.MustNewConstMetric(s.eventsSent, prometheus.CounterValue, float64(w.EventsSent))
	ch <- prometheus.MustNewConstMetric(s.compacted, prometheus.CounterValue, float64(w.Compacted))
}
