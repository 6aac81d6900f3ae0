package etcdapi

import (
	"context"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/edictlog/edictlog/fsm/kvfsm"
	"github.com/edictlog/edictlog/log"
)

// kvService is etcd's KV service. Compact answers Unimplemented: the state
// machine keeps no history to compact.
type kvService struct {
	pb.UnimplementedKVServer
	s *Server
}

// Range answers from the state machine: a serializable range at the
// stale level here, any other at the lease level at the leader. A
// revision other than the one the answer reflects is refused with etcd's
// errors (edictkv keeps no history: every older revision is compacted).
func (k *kvService) Range(ctx context.Context, r *pb.RangeRequest) (*pb.RangeResponse, error) {
	q, post, err := k.s.limits.rangeOf(r)
	if err != nil {
		return nil, err
	}
	query, err := kvfsm.EncodeQuery(q)
	if err != nil {
		return nil, k.s.statusOf("Range", err)
	}
	read := func(ctx context.Context, level log.ReadLevel) (*pb.RangeResponse, error) {
		ctx, cancel := context.WithTimeout(ctx, k.s.cfg.WriteTimeout)
		defer cancel()
		res, err := k.s.cfg.Node.Read(ctx, level, query)
		if err != nil {
			return nil, err
		}
		out, err := kvfsm.DecodeResult(res.Data)
		if err != nil || out.Range == nil {
			return nil, status.Errorf(codes.Internal, "edictkv: the state machine answered a range with %v (%v)", out, err)
		}
		switch {
		case r.Revision > 0 && uint64(r.Revision) > out.Revision:
			return nil, rpctypes.ErrGRPCFutureRev
		case r.Revision > 0 && uint64(r.Revision) < out.Revision:
			return nil, rpctypes.ErrGRPCCompacted
		}
		return rangeResponse(k.s.header(out.Revision), out.Range, post), nil
	}
	if r.Serializable {
		out, err := read(ctx, log.ReadStale)
		return out, k.s.statusOf("Range", err)
	}
	return atLeader(k.s, ctx, "Range", false,
		func(ctx context.Context) (*pb.RangeResponse, error) { return read(ctx, log.ReadLease) },
		func(ctx context.Context, c pb.KVClient) (*pb.RangeResponse, error) { return c.Range(ctx, r) })
}

// Put writes one key through the log.
func (k *kvService) Put(ctx context.Context, r *pb.PutRequest) (*pb.PutResponse, error) {
	p, err := k.s.limits.putOf(r)
	if err != nil {
		return nil, err
	}
	return write(k.s, ctx, "Put", kvfsm.Command{Put: p},
		func(h *pb.ResponseHeader, res *kvfsm.Result) (*pb.PutResponse, error) {
			if res.Put == nil {
				return nil, mismatch("Put", res)
			}
			return putResponse(h, res.Put), nil
		},
		func(ctx context.Context, c pb.KVClient) (*pb.PutResponse, error) { return c.Put(ctx, r) })
}

// DeleteRange deletes a key or a range through the log.
func (k *kvService) DeleteRange(ctx context.Context, r *pb.DeleteRangeRequest) (*pb.DeleteRangeResponse, error) {
	d, err := k.s.limits.deleteOf(r)
	if err != nil {
		return nil, err
	}
	return write(k.s, ctx, "DeleteRange", kvfsm.Command{Delete: d},
		func(h *pb.ResponseHeader, res *kvfsm.Result) (*pb.DeleteRangeResponse, error) {
			if res.Delete == nil {
				return nil, mismatch("DeleteRange", res)
			}
			return deleteResponse(h, res.Delete), nil
		},
		func(ctx context.Context, c pb.KVClient) (*pb.DeleteRangeResponse, error) {
			return c.DeleteRange(ctx, r)
		})
}

// Txn runs a transaction as one log entry: its compares, and the branch
// they choose, are applied atomically at one revision.
func (k *kvService) Txn(ctx context.Context, r *pb.TxnRequest) (*pb.TxnResponse, error) {
	t, post, err := k.s.limits.txnOf(r)
	if err != nil {
		return nil, err
	}
	return write(k.s, ctx, "Txn", kvfsm.Command{Txn: t},
		func(h *pb.ResponseHeader, res *kvfsm.Result) (*pb.TxnResponse, error) {
			if res.Txn == nil {
				return nil, mismatch("Txn", res)
			}
			return txnResponse(h, res.Txn, post)
		},
		func(ctx context.Context, c pb.KVClient) (*pb.TxnResponse, error) { return c.Txn(ctx, r) })
}

// write commits cmd at the leader and answers with the state machine's
// result.
func write[T any](s *Server, ctx context.Context, method string, cmd kvfsm.Command,
	answer func(*pb.ResponseHeader, *kvfsm.Result) (T, error), forward func(context.Context, pb.KVClient) (T, error)) (T, error) {
	var zero T
	data, err := kvfsm.EncodeCommand(cmd)
	if err != nil {
		return zero, s.statusOf(method, err)
	}
	return atLeader(s, ctx, method, true, func(ctx context.Context) (T, error) {
		ctx, cancel := context.WithTimeout(ctx, s.cfg.WriteTimeout)
		defer cancel()
		res, err := s.cfg.Node.Apply(ctx, data)
		if err != nil {
			return zero, err
		}
		switch out := res.Response.(type) {
		case error:
			// Committed, but refused by the state machine: nothing changed.
			return zero, out
		case *kvfsm.Result:
			return answer(s.header(out.Revision), out)
		}
		return zero, status.Errorf(codes.Internal, "edictkv: %s: unexpected state machine response %T", method, res.Response)
	}, forward)
}

func mismatch(method string, res *kvfsm.Result) error {
	return status.Errorf(codes.Internal, "edictkv: %s answered with the wrong result %+v", method, res)
}
