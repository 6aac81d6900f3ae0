package etcdapi

import (
	"context"
	"errors"
	"path"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/status"

	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/kvservice"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/route"
	"github.com/edictlog/edictlog/edict"
)

// atLeader runs a call that needs the leader through the router: local
// here, under the handover gate, if this process leads; else the same call
// (method, its full gRPC name, with req) at the leader. While no leader is
// known or reachable it waits, up to the router's wait, then answers
// etcd's "no leader". write says the call changes state: a write whose
// forwarding broke after it was sent may have been applied, and is
// answered etcd's "request timed out" — its outcome is unknown — never
// retried. A write the leader answered is answered here once this process
// has applied it as well (kvservice.Service.AwaitRevision).
func atLeader[R any](s *Server, ctx context.Context, method string, req any, write bool,
	local func(context.Context) (*R, error)) (*R, error) {
	var out *R
	forwarded := false
	from := route.ForwarderGRPC(ctx)
	err := s.cfg.Router.Do(ctx, route.ForwardedGRPC(ctx),
		func(ctx context.Context) error {
			if write && from != edict.None {
				// The forwarder answers once it has applied the write:
				// the log tells it of the commit at once.
				ctx = kvservice.ForwardedBy(ctx, from)
			}
			o, err := local(ctx)
			var nle *edictlog.NotLeaderError
			if errors.As(err, &nle) {
				return err // refused before anything was written: look again
			}
			out = o
			return s.statusOf(method, err)
		},
		func(ctx context.Context, leader edict.ProcessID) error {
			reply := new(R)
			s.metrics.forwarded.WithLabelValues(path.Base(method)).Inc()
			var err error
			if streamedMethods[method] {
				err = s.forward.InvokeStreamed(ctx, leader, method, req.(route.Marshaler), any(reply).(route.Unmarshaler), write)
			} else {
				err = s.forward.Invoke(ctx, leader, method, req, reply, write)
			}
			switch {
			case err == nil:
				out, forwarded = reply, true
				return nil
			case errors.Is(err, edictlog.ErrOutcomeUnknown):
				s.log.Warn("forwarding a write to the leader failed after it was sent; outcome unknown",
					"method", method, "leader", uint64(leader), "err", err)
				return rpctypes.ErrGRPCTimeout
			}
			return err
		})
	var nle *edictlog.NotLeaderError
	switch {
	case !errors.As(err, &nle):
		if err != nil {
			return nil, err
		}
		if h, ok := any(out).(interface{ GetHeader() *pb.ResponseHeader }); ok {
			if forwarded && write && h.GetHeader() != nil {
				// Answer once this member has applied the write too, as
				// etcd's member does: a serializable read here then sees it.
				if err := s.cfg.KV.AwaitRevision(ctx, h.GetHeader().Revision); err != nil {
					s.log.Warn("answering a write the leader applied before this member did", "method", method,
						"revision", h.GetHeader().Revision, "err", err)
				}
			}
			s.fill(h.GetHeader(), forwarded)
		}
		return out, nil
	case errors.Is(err, route.ErrMisdirected):
		return nil, route.MisdirectedGRPC
	case ctx.Err() != nil:
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	return nil, rpctypes.ErrGRPCNoLeader
}

// here runs a linearizable read at this process, whatever it is: it needs
// a leader known (a follower read asks it), not this process to lead, so
// it takes no handover gate and is never forwarded. A read refused for
// want of a leader (a *edictlog.NotLeaderError) is tried again, as the router
// retries (route.Router.Retry), until its wait ends: then etcd's "no
// leader".
func here[R any](s *Server, ctx context.Context, method string, read func(context.Context) (*R, error)) (*R, error) {
	var out *R
	err := s.cfg.Router.Retry(ctx, func(ctx context.Context) error {
		o, err := read(ctx)
		var nle *edictlog.NotLeaderError
		if errors.As(err, &nle) {
			return err
		}
		out = o
		return s.statusOf(method, err)
	})
	var nle *edictlog.NotLeaderError
	switch {
	case !errors.As(err, &nle):
		if err != nil {
			return nil, err
		}
		if h, ok := any(out).(interface{ GetHeader() *pb.ResponseHeader }); ok {
			s.fill(h.GetHeader(), false)
		}
		return out, nil
	case ctx.Err() != nil:
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	return nil, rpctypes.ErrGRPCNoLeader
}
