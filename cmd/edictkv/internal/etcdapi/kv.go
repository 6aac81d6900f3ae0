package etcdapi

import (
	"context"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/edictlog/edictlog/log"
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

// Range is a serializable read at the stale level, answered here; any
// other at the lease level, at the leader.
func (k *kvServer) Range(ctx context.Context, r *pb.RangeRequest) (*pb.RangeResponse, error) {
	if r.Serializable {
		resp, _, err := k.s.cfg.KV.Range(ctx, log.ReadStale, r)
		if err != nil {
			return nil, k.s.statusOf(methodRange, err)
		}
		k.s.fill(resp.Header, false)
		return resp, nil
	}
	return atLeader(k.s, ctx, methodRange, r, false, func(ctx context.Context) (*pb.RangeResponse, error) {
		resp, _, err := k.s.cfg.KV.Range(ctx, log.ReadLease, r)
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

func (k *kvServer) Txn(ctx context.Context, r *pb.TxnRequest) (*pb.TxnResponse, error) {
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
