package process

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/soheilhy/cmux"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/edictlog/edictlog/cmd/edictkv/internal/etcdapi"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/etcdhttp"
)

// clientPort is the etcd API's listener split as etcd splits its client
// URL (server/embed/serve.go): a connection that opens with HTTP/2's
// preface — every gRPC client's — goes to the gRPC server, any other to
// an HTTP/1 server of etcd's HTTP endpoints (internal/etcdhttp): the JSON
// gateway, /health, /livez, /readyz, /version and /metrics. One address
// then serves what etcd's tools look for at a client URL.
type clientPort struct {
	mux  cmux.CMux
	http *http.Server
	// conn is the gateway's and the health checks' connection to the
	// gRPC server, through the same listener; cancel ends the gateway's
	// calls.
	conn   *grpc.ClientConn
	cancel context.CancelFunc
	// stopping: the servers' ends from now on are the ones asked for.
	stopping atomic.Bool
}

// sniffTimeout bounds how long a new connection may take to send enough
// for the split to tell gRPC from HTTP/1.
const sniffTimeout = 10 * time.Second

// serveClientPort serves p.grpc and etcd's HTTP endpoints on the etcd API
// listener.
func (p *Process) serveClientPort() error {
	ln := p.grpcLn
	conn, err := grpc.NewClient("passthrough:///"+dialable(ln.Addr()), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(math.MaxInt32)))
	if err != nil {
		return fmt.Errorf("process: the gateway's connection: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h, err := etcdhttp.New(ctx, etcdhttp.Config{ID: p.cfg.ID, Conn: conn, Node: p.Node, Alarms: p.kv.Alarms,
		Metrics: promhttp.HandlerFor(p.registry, promhttp.HandlerOpts{Registry: p.registry}),
		Version: etcdapi.Version, Logger: p.cfg.Logger})
	if err != nil {
		cancel()
		_ = conn.Close()
		return fmt.Errorf("process: %w", err)
	}
	m := cmux.New(ln)
	m.SetReadTimeout(sniffTimeout)
	grpcLn, httpLn := m.Match(cmux.HTTP2()), m.Match(cmux.Any())
	port := &clientPort{mux: m, conn: conn, cancel: cancel,
		http: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second,
			ErrorLog: slog.NewLogLogger(p.cfg.Logger.Handler(), slog.LevelWarn)}}
	p.port = port
	gs := p.grpc
	go func() {
		if err := gs.Serve(grpcLn); err != nil && !port.stopping.Load() {
			p.log.Error("gRPC server stopped", "err", err)
		}
	}()
	go func() {
		if err := port.http.Serve(httpLn); err != nil && !errors.Is(err, http.ErrServerClosed) && !port.stopping.Load() {
			p.log.Error("etcd client port's HTTP server stopped", "err", err)
		}
	}()
	go func() {
		if err := m.Serve(); err != nil && !port.stopping.Load() {
			p.log.Error("etcd client port stopped", "err", err)
		}
	}()
	return nil
}

// stopHTTP stops the port's HTTP server — gracefully (requests in flight
// finish) until ctx ends, then at once — beside the gRPC server's stop;
// the returned channel is closed once it has stopped.
func (c *clientPort) stopHTTP(ctx context.Context, graceful bool) <-chan struct{} {
	c.stopping.Store(true)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if !graceful || c.http.Shutdown(ctx) != nil {
			_ = c.http.Close()
		}
	}()
	return done
}

// close ends what remains once both servers have stopped: the gateway's
// connection and the split.
func (c *clientPort) close() error {
	c.cancel()
	c.mux.Close()
	return c.conn.Close()
}
