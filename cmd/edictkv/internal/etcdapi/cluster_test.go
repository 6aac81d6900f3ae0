package etcdapi

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/edictlog/edictlog/cmd/edictkv/internal/directory"
	"github.com/edictlog/edictlog/edict"
)

// MemberUpdate changes a member's transport address through the log at
// the leader, also when asked of a follower; etcd's errors for a member
// not found and bad URLs.
func TestMemberUpdate(t *testing.T) {
	leader := startProcess(t, 1, 1, nil)
	follower := startProcess(t, 2, 1, map[edict.ProcessID]directory.Addresses{1: {GRPC: leader.addr}})
	ctx := ctxT(t)

	got, err := pb.NewClusterClient(leader.conn).MemberUpdate(ctx, &pb.MemberUpdateRequest{ID: 2, PeerURLs: []string{"tcp://10.0.0.2:7000"}})
	require.NoError(t, err)
	assert.Equal(t, "10.0.0.2:7000", leader.node.addr(2))
	assert.Len(t, got.Members, 3)
	assert.Equal(t, uint64(1), got.Header.MemberId)

	// etcd's URL form, asked of a follower: forwarded to the leader.
	_, err = pb.NewClusterClient(follower.conn).MemberUpdate(ctx, &pb.MemberUpdateRequest{ID: 3, PeerURLs: []string{"http://node3.example:7000"}})
	require.NoError(t, err)
	assert.Equal(t, "node3.example:7000", leader.node.addr(3), "the learner's address, set at the leader")
	assert.Empty(t, follower.node.addr(3), "nothing set by the follower itself")

	c := pb.NewClusterClient(leader.conn)
	_, err = c.MemberUpdate(ctx, &pb.MemberUpdateRequest{ID: 9, PeerURLs: []string{"tcp://10.0.0.9:7000"}})
	assert.Equal(t, rpctypes.ErrMemberNotFound, rpctypes.Error(err))
	for _, urls := range [][]string{nil, {"tcp://a:1", "tcp://b:1"}, {"tcp://no-port"}, {"ftp://a:1"}, {"tcp://a:1/path"}, {"%"}} {
		_, err = c.MemberUpdate(ctx, &pb.MemberUpdateRequest{ID: 2, PeerURLs: urls})
		assert.Equal(t, codes.InvalidArgument, status.Code(err), "%q", urls)
		assert.Contains(t, err.Error(), "given member URLs are invalid", "%q", urls)
	}
	assert.Equal(t, "10.0.0.2:7000", leader.node.addr(2), "no refused update changed anything")
}
