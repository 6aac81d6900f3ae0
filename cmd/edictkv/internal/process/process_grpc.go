package process

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"google.golang.org/grpc"

	"github.com/edictlog/edictlog/cmd/edictkv/internal/directory"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/etcdapi"
	"github.com/edictlog/edictlog/cmd/edictkv/kvjson"
)

// startGRPC serves the etcd v3 API on its listener, gRPC and etcd's HTTP
// endpoints on one port (clientport.go), and starts publishing this
// process's addresses.
func (p *Process) startGRPC() error {
	api, err := etcdapi.New(etcdapi.Config{ID: p.cfg.ID, Node: p.Node, KV: p.kv, Router: p.router, Directory: p.dir,
		ClusterID: p.cfg.ClusterID, Storage: p.State.Store(), Watchable: p.State.Store(), WatchProgressInterval: p.cfg.WatchProgressInterval,
		Registerer: p.registry, Logger: p.cfg.Logger})
	if err != nil {
		return fmt.Errorf("process: etcd API: %w", err)
	}
	p.etcd = api
	p.grpc = grpc.NewServer(api.ServerOptions()...)
	api.Register(p.grpc)
	if err := p.serveClientPort(); err != nil {
		p.grpc, p.etcd = nil, nil
		return errors.Join(err, api.Close())
	}
	p.published, p.stopPub = make(chan struct{}), make(chan struct{})
	go p.publish()
	return nil
}

// publish records this process's HTTP and gRPC addresses in the member
// directory, through whichever process leads, until they are there: that
// is how the others learn where to forward etcd API requests when this
// process leads, and what MemberList reports.
func (p *Process) publish() {
	defer close(p.published)
	self := p.cfg.ID
	backoff := 100 * time.Millisecond
	for {
		if p.dir.Recorded(self) == (directory.Addresses{HTTP: p.HTTPAddr(), GRPC: p.GRPCAddr()}) {
			return
		}
		err := p.postAddresses()
		if err == nil {
			return
		}
		p.log.Debug("publishing addresses", "err", err)
		select {
		case <-p.stopPub:
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// postAddresses asks this process's own HTTP server to record the
// addresses: it forwards to the leader like any admin request.
func (p *Process) postAddresses() error {
	body, err := json.Marshal(kvjson.AddressesRequest{ID: uint64(p.cfg.ID), HTTPAddr: p.HTTPAddr(), GRPCAddr: p.GRPCAddr()})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	go func() {
		select {
		case <-p.stopPub:
			cancel()
		case <-ctx.Done():
		}
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+dialable(p.ln.Addr())+"/v1/cluster/addresses", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d: %s", resp.StatusCode, bytes.TrimSpace(msg))
	}
	return nil
}

// dialable turns a listener's address into one this host can dial: a
// wildcard bind becomes loopback.
func dialable(a net.Addr) string {
	tcp, ok := a.(*net.TCPAddr)
	if !ok || !tcp.IP.IsUnspecified() {
		return a.String()
	}
	if tcp.IP.To4() != nil {
		return net.JoinHostPort("127.0.0.1", fmt.Sprint(tcp.Port))
	}
	return net.JoinHostPort("::1", fmt.Sprint(tcp.Port))
}

// stopGRPC stops the etcd API: gracefully (requests in flight finish)
// until ctx ends, then at once.
func (p *Process) stopGRPC(ctx context.Context, graceful bool) error {
	if p.grpc == nil {
		return nil
	}
	close(p.stopPub)
	<-p.published
	httpStopped := p.port.stopHTTP(ctx, graceful)
	if graceful {
		done := make(chan struct{})
		go func() {
			p.grpc.GracefulStop()
			close(done)
		}()
		select {
		case <-done:
		case <-ctx.Done():
			p.grpc.Stop()
			<-done
		}
	} else {
		p.grpc.Stop()
	}
	p.grpc = nil
	<-httpStopped
	return errors.Join(p.port.close(), p.etcd.Close())
}
