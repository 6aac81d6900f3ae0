package etcdapi

import (
	"context"
	"errors"
	"fmt"
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

// clusterService answers MemberList from this process's view of the
// active epoch. Membership changes go through edictkv's own admin API.
type clusterService struct {
	pb.UnimplementedClusterServer
	s *Server
}

// MemberName is the name MemberList gives process id.
func MemberName(id edict.ProcessID) string { return fmt.Sprintf("edictkv-%d", uint64(id)) }

func (c *clusterService) MemberList(ctx context.Context, r *pb.MemberListRequest) (*pb.MemberListResponse, error) {
	st := c.s.cfg.Node.Status()
	out := &pb.MemberListResponse{Header: c.s.header(st.Applied)}
	add := func(id edict.ProcessID, learner bool) {
		out.Members = append(out.Members, &pb.Member{ID: uint64(id), Name: MemberName(id), IsLearner: learner,
			PeerURLs: urls("tcp", c.s.cfg.Directory.PeerAddr(id)), ClientURLs: urls("http", c.s.cfg.Directory.ClientAddr(id))})
	}
	for _, id := range st.Members {
		add(id, false)
	}
	for _, id := range st.Learners {
		add(id, true)
	}
	return out, nil
}

func urls(scheme, addr string) []string {
	if addr == "" {
		return nil
	}
	return []string{scheme + "://" + addr}
}

// maintenanceService answers Status, Alarm (listing: there are none) and
// MoveLeader; the rest answers Unimplemented.
type maintenanceService struct {
	pb.UnimplementedMaintenanceServer
	s *Server
}

// Status reports this process's view: raft_index is the commit index,
// raft_term the reign index (see Server.header).
func (m *maintenanceService) Status(ctx context.Context, r *pb.StatusRequest) (*pb.StatusResponse, error) {
	st := m.s.cfg.Node.Status()
	out := &pb.StatusResponse{Header: m.s.header(st.Applied), Version: Version, Leader: uint64(st.Leader),
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

func (m *maintenanceService) Alarm(ctx context.Context, r *pb.AlarmRequest) (*pb.AlarmResponse, error) {
	if r.Action != pb.AlarmRequest_GET {
		return nil, unimplemented("alarms: Alarm %v", r.Action)
	}
	return &pb.AlarmResponse{Header: m.s.header(m.s.cfg.Node.Status().Applied)}, nil
}

// MoveLeader hands leadership to another member; like etcd, only the
// leader accepts it.
func (m *maintenanceService) MoveLeader(ctx context.Context, r *pb.MoveLeaderRequest) (*pb.MoveLeaderResponse, error) {
	st := m.s.cfg.Node.Status()
	target := edict.ProcessID(r.TargetID)
	switch {
	case !st.IsLeader:
		return nil, rpctypes.ErrGRPCNotLeader
	case target == m.s.cfg.ID:
		return &pb.MoveLeaderResponse{Header: m.s.header(st.Applied)}, nil
	case !slices.Contains(st.Members, target):
		return nil, rpctypes.ErrGRPCBadLeaderTransferee
	}
	err := m.s.cfg.Node.TransferLeadership(ctx, target)
	var nle *log.NotLeaderError
	if errors.As(err, &nle) {
		return nil, rpctypes.ErrGRPCNotLeader
	}
	if err != nil {
		return nil, m.s.statusOf("MoveLeader", err)
	}
	return &pb.MoveLeaderResponse{Header: m.s.header(m.s.cfg.Node.Status().Applied)}, nil
}
