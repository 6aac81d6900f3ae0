package etcdapi

import (
	"context"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/kvservice"
)

// The KV service's full method names, by which calls are forwarded.
const (
	methodRange       = "/etcdserverpb.KV/Range"
	methodPut         = "/etcdserverpb.KV/Put"
	methodDeleteRange = "/etcdserverpb.KV/DeleteRange"
	methodTxn         = "/etcdserverpb.KV/Txn"
	methodCompact     = "/etcdserverpb.KV/Compact"
)

// kvServer is etcd's KV service over the KV service (internal/kvservice).
type kvServer struct {
	pb.UnimplementedKVServer
	s *Server
}

// Range is answered by the process asked, from its own state. A
// serializable read is at the stale level. Any other is linearizable, at
// the follower level: a lease read at the leader, and elsewhere a follower
// read (the leader's commit index, given under its lease in one round
// trip, applied here first), as etcd's followers confirm a read index and
// answer locally. Only a linearizable read that finds no leader waits for
// one, up to the router's wait, then answers etcd's "no leader".
func (k *kvServer) Range(ctx context.Context, r *pb.RangeRequest) (*pb.RangeResponse, error) {
	if r.Serializable {
		resp, err := k.s.cfg.KV.RangeUnstamped(ctx, edictlog.ReadStale, r)
		if err != nil {
			return nil, k.s.statusOf(methodRange, err)
		}
		k.s.fill(resp.Header, false)
		return resp, nil
	}
	return here(k.s, ctx, methodRange, func(ctx context.Context) (*pb.RangeResponse, error) {
		resp, err := k.s.cfg.KV.RangeUnstamped(ctx, edictlog.ReadFollower, r)
		return resp, err
	})
}

func (k *kvServer) Put(ctx context.Context, r *pb.PutRequest) (*pb.PutResponse, error) {
	return atLeader(k.s, ctx, methodPut, r, true, func(ctx context.Context) (*pb.PutResponse, error) {
		resp, _, err := k.s.cfg.KV.Put(ctx, r)
		return resp, err
	})
}

func (k *kvServer) DeleteRange(ctx context.Context, r *pb.DeleteRangeRequest) (*pb.DeleteRangeResponse, error) {
	return atLeader(k.s, ctx, methodDeleteRange, r, true, func(ctx context.Context) (*pb.DeleteRangeResponse, error) {
		resp, _, err := k.s.cfg.KV.DeleteRange(ctx, r)
		return resp, err
	})
}

// Txn is a write, at the leader, unless it only reads (every op of both
// branches a range): then it is answered here as a read, as etcd's server
// answers it — serializable if every range is, else linearizable, as
// Range.
func (k *kvServer) Txn(ctx context.Context, r *pb.TxnRequest) (*pb.TxnResponse, error) {
	if kvservice.ReadOnlyTxn(r) {
		if kvservice.SerializableTxn(r) {
			resp, err := k.s.cfg.KV.ReadTxnUnstamped(ctx, edictlog.ReadStale, r)
			if err != nil {
				return nil, k.s.statusOf(methodTxn, err)
			}
			k.s.fill(resp.Header, false)
			return resp, nil
		}
		return here(k.s, ctx, methodTxn, func(ctx context.Context) (*pb.TxnResponse, error) {
			resp, err := k.s.cfg.KV.ReadTxnUnstamped(ctx, edictlog.ReadFollower, r)
			return resp, err
		})
	}
	return atLeader(k.s, ctx, methodTxn, r, true, func(ctx context.Context) (*pb.TxnResponse, error) {
		resp, _, err := k.s.cfg.KV.Txn(ctx, r)
		return resp, err
	})
}

// Compact is a write of the leader's, as in etcd.
func (k *kvServer) Compact(ctx context.Context, r *pb.CompactionRequest) (*pb.CompactionResponse, error) {
	return atLeader(k.s, ctx, methodCompact, r, true, func(ctx context.Context) (*pb.CompactionResponse, error) {
		return k.s.cfg.KV.Compact(ctx, r)
	})
}
