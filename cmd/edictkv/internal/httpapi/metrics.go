package httpapi

import (
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// LatencyBuckets span a fast local fsync (~100µs) to a pathological
// multi-second stall. The commit histogram uses them, and so do the
// process's storage histograms, so that the two compare.
var LatencyBuckets = prometheus.ExponentialBuckets(50e-6, 2, 18)

// metrics are the HTTP API's own: the requests it served, the reads and
// forwards among them, and how long writes took to commit. The process
// registers its own (the Node's state, the store's timings) in the same
// registry, which /metrics serves whole.
type metrics struct {
	reg *prometheus.Registry

	reads        *prometheus.CounterVec
	forwarded    *prometheus.CounterVec
	requests     *prometheus.CounterVec
	writeSeconds prometheus.Histogram
}

// newMetrics registers the server's metrics; they count events as they
// happen.
func newMetrics(s *Server) (*metrics, error) {
	m := &metrics{reg: s.cfg.Registry}
	m.reads = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "edictkv_reads_total",
		Help: "Reads received, by the consistency level asked for."}, []string{"level"})
	m.forwarded = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "edictkv_forwarded_total",
		Help: "Requests sent on to the leader: proxied, or answered with a 307 redirect."}, []string{"how"})
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "edictkv_http_requests_total",
		Help: "HTTP requests served, by route and status code."}, []string{"route", "code"})
	m.writeSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "edictkv_commit_seconds",
		Help: "Time from a write's proposal at the leader to its commit and apply.", Buckets: LatencyBuckets})
	for _, c := range []prometheus.Collector{m.reads, m.forwarded, m.requests, m.writeSeconds} {
		if err := m.reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// instrument counts requests by route and status.
func (s *Server) instrument(route string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		h(sw, r)
		s.metrics.requests.WithLabelValues(route, strconv.Itoa(sw.code)).Inc()
	}
}

type statusWriter struct {
	http.ResponseWriter
	code  int
	wrote bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.code, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}
