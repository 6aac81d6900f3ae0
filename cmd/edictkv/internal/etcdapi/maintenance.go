package etcdapi

import (
	"context"
	"errors"
	"slices"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/mvcc"
	"github.com/edictlog/edictlog/edict"
)

// Version is what Maintenance.Status reports as the server version: the
// etcd release whose API edictkv answers (go.etcd.io/etcd/api/v3 v3.6.8,
// its watch semantics included), not edictkv's own. Clients gate features
// on it: Kubernetes' apiserver uses RequestWatchProgress (consistent reads
// from its watch cache) only with etcd 3.4.31+ or 3.5.13+, whose progress
// notifications come only once every watcher of the stream is synced, as
// edictkv's do.
const Version = "3.6.8"

// methodAlarm is Maintenance.Alarm's full name, by which it is forwarded.
const methodAlarm = "/etcdserverpb.Maintenance/Alarm"

// Storage is the state's store as Maintenance reports on it and maintains
// it (*mvcc.Store).
type Storage interface {
	// Size and SizeInUse are etcd's db_size and db_size_in_use.
	Size() int64
	SizeInUse() int64
	// HashByRev is etcd's HashKV.
	HashByRev(rev int64) (mvcc.KeyValueHash, int64, error)
	// Defrag is etcd's defragmentation (errors.ErrUnsupported: the
	// store cannot).
	Defrag() error
}

// maintenanceServer answers Status, Alarm, HashKV, Defragment and
// MoveLeader; the rest answers Unimplemented. Status, HashKV and
// Defragment are this process's own, as in etcd: each member answers
// for itself.
type maintenanceServer struct {
	pb.UnimplementedMaintenanceServer
	s *Server
}

// Status reports this process's view, as etcd's: raft_index is the log's
// commit index known here and raft_applied_index its applied index (log
// indexes, not revisions); raft_term the reign index (see Server.fill);
// db_size and db_size_in_use the state's file (all of it, and what holds
// data; compaction frees pages, defragmentation gives them back);
// db_size_quota the space quota; errors "no leader" when none is known,
// and every active alarm.
func (m *maintenanceServer) Status(ctx context.Context, r *pb.StatusRequest) (*pb.StatusResponse, error) {
	st := m.s.cfg.Node.Status()
	out := &pb.StatusResponse{Header: m.s.header(), Version: Version, Leader: uint64(st.Leader),
		RaftIndex: st.Commit, RaftTerm: m.s.cfg.Node.ReignIndex(), RaftAppliedIndex: st.Applied,
		IsLearner: slices.Contains(st.Learners, m.s.cfg.ID), DbSizeQuota: m.s.cfg.KV.QuotaBytes(),
		DowngradeInfo: &pb.DowngradeInfo{}}
	if sg := m.s.cfg.Storage; sg != nil {
		out.DbSize, out.DbSizeInUse = sg.Size(), sg.SizeInUse()
	}
	if st.Leader == edict.None {
		out.Errors = append(out.Errors, rpctypes.ErrGRPCNoLeader.Error())
	}
	for _, a := range m.s.cfg.KV.Alarms() {
		out.Errors = append(out.Errors, a.String())
	}
	return out, nil
}

// HashKV is etcd's: the hash of this process's keys and history up to
// r.revision (0: the current revision), which replicas that applied the
// same history share whatever their physical compaction progress (see
// mvcc.Store.HashByRev). The header's revision is the current one.
func (m *maintenanceServer) HashKV(ctx context.Context, r *pb.HashKVRequest) (*pb.HashKVResponse, error) {
	sg := m.s.cfg.Storage
	if sg == nil {
		return nil, status.Error(codes.Unimplemented, "edictkv: this process has no store to hash")
	}
	h, rev, err := sg.HashByRev(r.Revision)
	switch {
	case errors.Is(err, mvcc.ErrCompacted):
		return nil, rpctypes.ErrGRPCCompacted
	case errors.Is(err, mvcc.ErrFutureRev):
		return nil, rpctypes.ErrGRPCFutureRev
	case err != nil:
		m.s.log.Error("hashkv failed", "revision", r.Revision, "err", err)
		return nil, status.Errorf(codes.Internal, "edictkv: hashkv: %v", err)
	}
	resp := &pb.HashKVResponse{Header: &pb.ResponseHeader{Revision: rev}, Hash: h.Hash,
		CompactRevision: h.CompactRevision, HashRevision: h.Revision}
	m.s.fill(resp.Header, false)
	return resp, nil
}

// Defragment is etcd's: this process's state file is rewritten to hold
// only its data, giving back what compaction freed (mvcc.Store.Defrag).
// Its commits and new reads wait meanwhile, as etcd's do; its content
// does not change.
func (m *maintenanceServer) Defragment(ctx context.Context, r *pb.DefragmentRequest) (*pb.DefragmentResponse, error) {
	sg := m.s.cfg.Storage
	if sg == nil {
		return nil, status.Error(codes.Unimplemented, "edictkv: this process has no store to defragment")
	}
	m.s.log.Info("defragmenting", "size", sg.Size(), "in_use", sg.SizeInUse())
	if err := sg.Defrag(); err != nil {
		if errors.Is(err, errors.ErrUnsupported) {
			return nil, status.Errorf(codes.Unimplemented, "edictkv: %v", err)
		}
		m.s.log.Error("defragmenting failed", "err", err)
		return nil, status.Errorf(codes.Internal, "edictkv: defragment: %v", err)
	}
	m.s.log.Info("defragmented", "size", sg.Size(), "in_use", sg.SizeInUse())
	return &pb.DefragmentResponse{Header: m.s.header()}, nil
}

// Alarm lists, activates or deactivates alarms through the log at the
// leader, as etcd does (see kvservice.Service.Alarm).
func (m *maintenanceServer) Alarm(ctx context.Context, r *pb.AlarmRequest) (*pb.AlarmResponse, error) {
	return atLeader(m.s, ctx, methodAlarm, r, true, func(ctx context.Context) (*pb.AlarmResponse, error) {
		return m.s.cfg.KV.Alarm(ctx, r)
	})
}

// MoveLeader hands leadership to another member through the router's
// handover gate: the calls this process is serving as leader finish
// first, and new ones wait for the next leader. As in etcd, only the
// leader accepts it.
func (m *maintenanceServer) MoveLeader(ctx context.Context, r *pb.MoveLeaderRequest) (*pb.MoveLeaderResponse, error) {
	st := m.s.cfg.Node.Status()
	target := edict.ProcessID(r.TargetID)
	switch {
	case !st.IsLeader:
		return nil, rpctypes.ErrGRPCNotLeader
	case target == m.s.cfg.ID:
		return &pb.MoveLeaderResponse{Header: m.s.header()}, nil
	case target == edict.None || !slices.Contains(st.Members, target):
		return nil, rpctypes.ErrGRPCBadLeaderTransferee
	}
	_, err := m.s.cfg.Router.HandOver(ctx, target)
	var nle *edictlog.NotLeaderError
	if errors.As(err, &nle) {
		return nil, rpctypes.ErrGRPCNotLeader
	}
	if err != nil {
		return nil, m.s.statusOf("MoveLeader", err)
	}
	return &pb.MoveLeaderResponse{Header: m.s.header()}, nil
}
