package etcdapi

import (
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
)

type grpcMetrics struct {
	requests  *prometheus.CounterVec
	seconds   *prometheus.HistogramVec
	forwarded *prometheus.CounterVec
	// byMethod holds each method's *methodMetrics: a call that
	// succeeds finds its counter and histogram with one lookup, where
	// WithLabelValues hashes the labels and takes the vector's lock.
	byMethod sync.Map
}

type methodMetrics struct {
	ok      prometheus.Counter
	seconds prometheus.Observer
}

// newGRPCMetrics registers the API's metrics on reg (none if reg is nil).
func newGRPCMetrics(reg prometheus.Registerer) (*grpcMetrics, error) {
	m := &grpcMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "edictkv_grpc_requests_total",
			Help: "etcd API calls served, by method and gRPC status code."}, []string{"method", "code"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "edictkv_grpc_request_seconds",
			Help:    "etcd API call latency, by method.",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 18)}, []string{"method"}),
		forwarded: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "edictkv_grpc_forwarded_total",
			Help: "etcd API calls sent on to the leader, by method."}, []string{"method"}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.requests, m.seconds, m.forwarded} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("etcdapi: metrics: %w", err)
			}
		}
	}
	return m, nil
}

func (m *grpcMetrics) observe(method string, code codes.Code, d time.Duration) {
	mm, ok := m.byMethod.Load(method)
	if !ok {
		mm, _ = m.byMethod.LoadOrStore(method, &methodMetrics{
			ok: m.requests.WithLabelValues(method, codes.OK.String()), seconds: m.seconds.WithLabelValues(method)})
	}
	c := mm.(*methodMetrics)
	if code == codes.OK {
		c.ok.Inc()
	} else {
		m.requests.WithLabelValues(method, code.String()).Inc()
	}
	c.seconds.Observe(d.Seconds())
}
