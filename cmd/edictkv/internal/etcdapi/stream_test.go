package etcdapi

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/edictlog/edictlog/cmd/edictkv/internal/directory"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/kvservice"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/route"
	"github.com/edictlog/edictlog/edict"
)

// A follower's clients' puts reach the leader over one forwarding stream:
// each applied there once, each answered as the leader answered it, from
// the follower (its member id in the header), refusals included; the
// leader counts them as Puts and the stream as one call, once it ends.
func TestPutsStreamedToTheLeader(t *testing.T) {
	leader := startProcess(t, 1, 1, nil)
	follower := startProcessWith(t, 2, 1, map[edict.ProcessID]directory.Addresses{1: {GRPC: leader.addr}},
		func(kc *kvservice.Config, _ *Config) { kc.State = leader.log.State })
	kv, ctx := pb.NewKVClient(follower.conn), ctxT(t)

	var wg sync.WaitGroup
	revs := make(chan int64, 50)
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := kv.Put(ctx, &pb.PutRequest{Key: fmt.Appendf(nil, "k%02d", i), Value: []byte("v")})
			if assert.NoError(t, err) {
				assert.Equal(t, uint64(2), resp.Header.MemberId)
				revs <- resp.Header.Revision
			}
		}()
	}
	wg.Wait()
	close(revs)
	seen := map[int64]bool{}
	for r := range revs {
		assert.False(t, seen[r], "revision %d answered twice", r)
		seen[r] = true
	}
	assert.Len(t, seen, 50)
	assert.Len(t, leader.log.Applied(), 50, "each put applied once, at the leader")
	assert.Empty(t, follower.log.Applied())

	// The leader's refusal comes back as etcd's error.
	_, err := kv.Put(ctx, &pb.PutRequest{Key: []byte("big"), Value: make([]byte, 33)})
	assert.Equal(t, codes.InvalidArgument, status.Code(err))
	leader.router.leader = 3 // it no longer leads: misdirected, not forwarded again
	_, err = kv.Put(ctx, &pb.PutRequest{Key: []byte("a")})
	assert.Equal(t, rpctypes.ErrNoLeader, rpctypes.Error(err), "the fake router gives up at once")
	leader.router.leader = 1

	put := testutil.ToFloat64(leader.api.metrics.requests.WithLabelValues(methodPut, codes.OK.String()))
	assert.Equal(t, 50.0, put, "the leader counts each forwarded put")
	require.NoError(t, follower.api.Close()) // its forwarder: the stream ends, cancelled
	require.Eventually(t, func() bool {
		return testutil.ToFloat64(leader.api.metrics.requests.WithLabelValues(route.StreamMethod, codes.Canceled.String())) == 1
	}, 10*time.Second, time.Millisecond, "one stream carried them")
}

// A leader that drains ends the forwarding streams once it answered the
// calls it ran; calls sent after that run nowhere and are routed again
// (here the fake router gives up at once: etcd's "no leader"), and a new
// stream to it is refused the same way.
func TestForwardingStreamDrains(t *testing.T) {
	leader := startProcess(t, 1, 1, nil)
	follower := startProcessWith(t, 2, 1, map[edict.ProcessID]directory.Addresses{1: {GRPC: leader.addr}},
		func(kc *kvservice.Config, _ *Config) { kc.State = leader.log.State })
	kv, ctx := pb.NewKVClient(follower.conn), ctxT(t)
	_, err := kv.Put(ctx, &pb.PutRequest{Key: []byte("a"), Value: []byte("1")})
	require.NoError(t, err)
	leader.api.Drain()
	for range 2 { // the stream the drain ended, then a new one
		_, err = kv.Put(ctx, &pb.PutRequest{Key: []byte("b"), Value: []byte("2")})
		assert.Equal(t, rpctypes.ErrNoLeader, rpctypes.Error(err))
	}
	assert.Len(t, leader.log.Applied(), 1, "nothing sent after the drain ran")
}
