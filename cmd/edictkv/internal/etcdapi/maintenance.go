package etcdapi

import (
	"context"
	"errors"
	"slices"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/log"
)

// Version is what Maintenance.Status reports as the server version: the
// etcd API version edictkv answers (clients such as etcdctl gate features
// on it), not edictkv's own.
const Version = "3.6.0"

// maintenanceServer answers Status, Alarm and MoveLeader; the rest
// answers Unimplemented.

// methodAlarm is Maintenance.Alarm's full name, by which it is forwarded.
const methodAlarm = "/etcdserverpb.Maintenance/Alarm"

type maintenanceServer struct {
	pb.UnimplementedMaintenanceServer
	s *Server
}

// Status reports this process's view: raft_index is the commit index,
// raft_term the reign index (see Server.fill).
func (m *maintenanceServer) Status(ctx context.Context, r *pb.StatusRequest) (*pb.StatusResponse, error) {
	st := m.s.cfg.Node.Status()
	out := &pb.StatusResponse{Header: m.s.header(), Version: Version, Leader: uint64(st.Leader),
		RaftIndex: st.Commit, RaftTerm: m.s.cfg.Node.ReignIndex(), RaftAppliedIndex: st.Applied,
		IsLearner: slices.Contains(st.Learners, m.s.cfg.ID)}
	if m.s.cfg.DBSize != nil {
		out.DbSize = m.s.cfg.DBSize()
		out.DbSizeInUse = out.DbSize
	}
	if st.Leader == edict.None {
		out.Errors = append(out.Errors, rpctypes.ErrGRPCNoLeader.Error())
	}
	return out, nil
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
	var nle *log.NotLeaderError
	if errors.As(err, &nle) {
		return nil, rpctypes.ErrGRPCNotLeader
	}
	if err != nil {
		return nil, m.s.statusOf("MoveLeader", err)
	}
	return &pb.MoveLeaderResponse{Header: m.s.header()}, nil
}
