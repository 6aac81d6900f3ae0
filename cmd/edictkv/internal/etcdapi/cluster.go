package etcdapi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/directory"
	"github.com/edictlog/edictlog/edict"
)

// clusterServer answers MemberList from this process's view of the active
// epoch and the member directory, and MemberUpdate through the log.
// Adding, promoting and removing members go through edictkv's own admin
// API.
type clusterServer struct {
	pb.UnimplementedClusterServer
	s *Server
}

func (c *clusterServer) MemberList(ctx context.Context, r *pb.MemberListRequest) (*pb.MemberListResponse, error) {
	return &pb.MemberListResponse{Header: c.s.header(), Members: c.members()}, nil
}

// members lists the members and learners of the active epoch.
func (c *clusterServer) members() []*pb.Member {
	st := c.s.cfg.Node.Status()
	dir := c.s.cfg.Directory
	var out []*pb.Member
	add := func(id edict.ProcessID, learner bool) {
		out = append(out, &pb.Member{ID: uint64(id), Name: directory.Name(id), IsLearner: learner,
			PeerURLs: urls("tcp", dir.PeerAddr(id)), ClientURLs: urls("http", dir.GRPCAddr(id))})
	}
	for _, id := range st.Members {
		add(id, false)
	}
	for _, id := range st.Learners {
		add(id, true)
	}
	return out
}

// MemberUpdate changes a member's log transport address, as etcd's changes
// its peer URLs: a config edict through the log at the leader
// (edictlog.Node.SetAddress), which keeps the leader and the epoch. A member
// has one transport address, so PeerURLs holds exactly one, host:port
// under the scheme MemberList reports (tcp) or etcd's (http, https; the
// transport's TLS is its own configuration, not the URL's). A member
// restarted on a new address announces it itself when it connects to its
// peers; MemberUpdate is for an address it cannot announce.
func (c *clusterServer) MemberUpdate(ctx context.Context, r *pb.MemberUpdateRequest) (*pb.MemberUpdateResponse, error) {
	id := edict.ProcessID(r.ID)
	addr, err := peerAddr(r.PeerURLs)
	switch {
	case id == edict.None:
		return nil, rpctypes.ErrGRPCMemberNotFound
	case err != nil:
		return nil, status.Error(codes.InvalidArgument, rpctypes.ErrGRPCMemberBadURLs.Error()+": "+err.Error())
	}
	return atLeader(c.s, ctx, "/etcdserverpb.Cluster/MemberUpdate", r, true, func(ctx context.Context) (*pb.MemberUpdateResponse, error) {
		switch err := c.s.cfg.Node.SetAddress(ctx, id, addr); {
		case errors.Is(err, edictlog.ErrNotMember):
			return nil, rpctypes.ErrGRPCMemberNotFound
		case errors.Is(err, edictlog.ErrBadAddress):
			return nil, status.Error(codes.InvalidArgument, rpctypes.ErrGRPCMemberBadURLs.Error()+": "+err.Error())
		case errors.Is(err, edictlog.ErrChangeInProgress):
			return nil, status.Error(codes.FailedPrecondition, "edictkv: "+err.Error())
		case err != nil:
			return nil, err
		}
		return &pb.MemberUpdateResponse{Header: c.s.header(), Members: c.members()}, nil
	})
}

// peerAddr takes the one transport address out of a MemberUpdate's peer
// URLs.
func peerAddr(peerURLs []string) (string, error) {
	if len(peerURLs) != 1 {
		return "", fmt.Errorf("%d peer URLs, want one (a member has one transport address)", len(peerURLs))
	}
	u, err := url.Parse(peerURLs[0])
	if err != nil {
		return "", err
	}
	switch {
	case u.Scheme != "tcp" && u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Errorf("%q: scheme %q, want tcp, http or https", peerURLs[0], u.Scheme)
	case u.Path != "" && u.Path != "/", u.RawQuery != "", u.User != nil:
		return "", fmt.Errorf("%q: a peer URL is scheme://host:port and nothing more", peerURLs[0])
	}
	if _, _, err := net.SplitHostPort(u.Host); err != nil {
		return "", fmt.Errorf("%q: %v", peerURLs[0], err)
	}
	return u.Host, nil
}

func urls(scheme, addr string) []string {
	if addr == "" {
		return nil
	}
	return []string{scheme + "://" + addr}
}
