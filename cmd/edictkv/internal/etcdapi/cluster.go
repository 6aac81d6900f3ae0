package etcdapi

import (
	"context"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/edictlog/edictlog/cmd/edictkv/internal/directory"
	"github.com/edictlog/edictlog/edict"
)

// clusterServer answers MemberList from this process's view of the active
// epoch and the member directory. Membership changes go through edictkv's
// own admin API.
type clusterServer struct {
	pb.UnimplementedClusterServer
	s *Server
}

func (c *clusterServer) MemberList(ctx context.Context, r *pb.MemberListRequest) (*pb.MemberListResponse, error) {
	st := c.s.cfg.Node.Status()
	out := &pb.MemberListResponse{Header: c.s.header()}
	dir := c.s.cfg.Directory
	add := func(id edict.ProcessID, learner bool) {
		out.Members = append(out.Members, &pb.Member{ID: uint64(id), Name: directory.Name(id), IsLearner: learner,
			PeerURLs: urls("tcp", dir.PeerAddr(id)), ClientURLs: urls("http", dir.GRPCAddr(id))})
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
