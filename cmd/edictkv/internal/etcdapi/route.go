package etcdapi

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/edictlog/edictlog/cmd/edictkv/internal/route"
	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/fsm/kvfsm"
	"github.com/edictlog/edictlog/log"
)

// A request that needs the leader and arrives at another process is
// forwarded to the leader's gRPC address, marked with forwardedBy. A
// process that receives a marked request but does not lead answers
// notLeaderMsg instead of forwarding again, so a request makes one hop
// and stale leader hints cannot make it loop; the forwarder then looks for
// the leader again.
const (
	forwardedBy  = "edictkv-forwarded-by"
	notLeaderMsg = "edictkv: forwarded to a process that does not lead"
)

type peerConn struct {
	addr string
	conn *grpc.ClientConn
}

// conn returns a connection to id's gRPC address, nil if it is unknown.
func (s *Server) conn(id edict.ProcessID) *grpc.ClientConn {
	addr := s.cfg.Directory.ClientAddr(id)
	if addr == "" {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.peers[id]; ok {
		if p.addr == addr {
			return p.conn
		}
		_ = p.conn.Close()
		delete(s.peers, id)
	}
	c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(kvfsm.MaxResultSize)))
	if err != nil {
		s.log.Warn("cannot reach the leader's gRPC address", "peer", uint64(id), "addr", addr, "err", err)
		return nil
	}
	s.peers[id] = &peerConn{addr: addr, conn: c}
	return c
}

func forwarded(ctx context.Context) bool {
	md, ok := metadata.FromIncomingContext(ctx)
	return ok && len(md.Get(forwardedBy)) > 0
}

// atLeader runs a request that needs the leader through the router
// (internal/route): here with local if this process leads, else at the
// leader with forward. While no leader is known or reachable it waits, up
// to LeaderWait, then answers etcd's "no leader". write says the request
// changes state: a write whose forwarding broke after it was sent may have
// been applied, and is answered etcd's "request timed out" — its outcome
// is unknown — never retried.
func atLeader[T any](s *Server, ctx context.Context, method string, write bool,
	local func(context.Context) (T, error), forward func(context.Context, pb.KVClient) (T, error)) (T, error) {
	var out, zero T
	err := s.router.Do(ctx, forwarded(ctx),
		func(ctx context.Context) error {
			o, err := local(ctx)
			var nle *log.NotLeaderError
			if errors.As(err, &nle) {
				return err // refused before anything was written: look again
			}
			out = o
			return s.statusOf(method, err)
		},
		func(ctx context.Context, leader edict.ProcessID) error {
			c := s.conn(leader)
			if c == nil {
				return &log.NotLeaderError{Leader: leader, Err: errNoAddress}
			}
			if c.GetState() == connectivity.TransientFailure {
				// Not sent: gRPC fails such calls at once. Try again when
				// the connection is back or the leader changed.
				c.Connect()
				return &log.NotLeaderError{Leader: leader, Err: errUnreachable}
			}
			s.metrics.forwarded.WithLabelValues(method).Inc()
			fctx := metadata.AppendToOutgoingContext(ctx, forwardedBy, strconv.FormatUint(uint64(s.cfg.ID), 10))
			o, err := forward(fctx, pb.NewKVClient(c))
			if err == nil {
				if h, ok := any(o).(interface{ GetHeader() *pb.ResponseHeader }); ok && h.GetHeader() != nil {
					h.GetHeader().MemberId = uint64(s.cfg.ID)
				}
				out = o
				return nil
			}
			if done := ctx.Err(); done != nil {
				return status.FromContextError(done).Err()
			}
			ans := status.Convert(err)
			switch {
			case ans.Code() == codes.Unavailable && ans.Message() == notLeaderMsg:
				return &log.NotLeaderError{Leader: leader, Err: errMoved} // look again
			case fromServer(ans):
				return err // the leader's own answer
			case write:
				s.log.Warn("forwarding a write to the leader failed after it was sent; outcome unknown",
					"method", method, "leader", uint64(leader), "err", err)
				return rpctypes.ErrGRPCTimeout
			}
			// A read is safe to send again.
			return &log.NotLeaderError{Leader: leader, Err: fmt.Errorf("%w: %w", errUnreachable, err)}
		})
	var nle *log.NotLeaderError
	switch {
	case !errors.As(err, &nle):
		if err != nil {
			return zero, err
		}
		return out, nil
	case errors.Is(err, route.ErrMisdirected):
		return zero, status.Error(codes.Unavailable, notLeaderMsg)
	case ctx.Err() != nil:
		return zero, status.FromContextError(ctx.Err()).Err()
	}
	return zero, rpctypes.ErrGRPCNoLeader
}

// The reasons a request is routed again, for logs.
var (
	errNoAddress   = errors.New("etcdapi: the leader's gRPC address is not known")
	errUnreachable = errors.New("etcdapi: the leader could not be reached")
	errMoved       = errors.New("etcdapi: the process forwarded to no longer leads")
)

// fromServer tells an answer written by an edictkv handler from one gRPC
// made up when the connection failed.
func fromServer(st *status.Status) bool {
	if st.Code() != codes.Unavailable {
		return st.Code() != codes.Canceled && st.Code() != codes.DeadlineExceeded && st.Code() != codes.Unknown
	}
	m := st.Message()
	return strings.HasPrefix(m, "etcdserver: ") || strings.HasPrefix(m, "edictkv")
}

// statusOf turns an error from the Node or the state machine into the
// gRPC answer, with etcd's errors where etcd has one.
func (s *Server) statusOf(method string, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	switch {
	case errors.Is(err, log.ErrOutcomeUnknown), errors.Is(err, context.DeadlineExceeded):
		s.log.Warn("request outcome unknown", "method", method, "err", err)
		return rpctypes.ErrGRPCTimeout
	case errors.Is(err, log.ErrNotCommitted):
		// Appended, then replaced by a new reign's edict: no effect.
		return rpctypes.ErrGRPCLeaderChanged
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, log.ErrShutdown):
		return rpctypes.ErrGRPCStopped
	case errors.Is(err, kvfsm.ErrDuplicateKey):
		return rpctypes.ErrGRPCDuplicateKey
	case errors.Is(err, kvfsm.ErrInvalid):
		return status.Error(codes.InvalidArgument, "etcdserver: "+err.Error())
	}
	s.log.Error("request failed", "method", method, "err", err)
	return status.Error(codes.Internal, fmt.Sprintf("edictkv: %s: %v", method, err))
}
