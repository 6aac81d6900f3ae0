package httpapi

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the HTTP API's own: the requests it served, and the reads
// and forwards among them. They live in the process's registry, beside
// the process's and the etcd API's, which /metrics serves whole.
type metrics struct {
	reads     *prometheus.CounterVec
	forwarded *prometheus.CounterVec
	requests  *prometheus.CounterVec
	watches   prometheus.Gauge
}

// newMetrics registers the API's metrics on reg (none if reg is nil);
// they count events as they happen.
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		reads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "edictkv_reads_total",
			Help: "Reads received, by the consistency level asked for."}, []string{"level"}),
		forwarded: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "edictkv_forwarded_total",
			Help: "Requests sent on to the leader: proxied, or answered with a 307 redirect."}, []string{"how"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "edictkv_http_requests_total",
			Help: "HTTP requests served, by route and status code."}, []string{"route", "code"}),
		watches: prometheus.NewGauge(prometheus.GaugeOpts{Name: "edictkv_http_watches",
			Help: "Watch streams of the HTTP API open now."}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.reads, m.forwarded, m.requests, m.watches} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("httpapi: metrics: %w", err)
			}
		}
	}
	return m, nil
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

// Unwrap lets http.ResponseController reach the connection's writer (a
// watch stream flushes each line).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
