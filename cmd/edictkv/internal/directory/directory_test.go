package directory_test

import (
	"context"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/directory"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/fakelog"
	"github.com/edictlog/edictlog/edict"
)

func newDirectory(t *testing.T) (*directory.Directory, *fakelog.Log) {
	t.Helper()
	fl := fakelog.New()
	t.Cleanup(func() { fl.Close() })
	d, err := directory.New(directory.Config{Self: 1, SelfAddrs: directory.Addresses{HTTP: "h1:1", GRPC: "g1:1"}, SelfPeer: "r1:1",
		Known: map[edict.ProcessID]directory.Addresses{1: {HTTP: "old:1"}, 2: {HTTP: "h2:1"}, 3: {HTTP: "h3:1", GRPC: "g3:1"}},
		Store: directory.StateStore{Log: fl, State: fl.State},
		PeerAddr: func(id edict.ProcessID) string {
			if id == 2 {
				return "r2:1"
			}
			return ""
		}})
	require.NoError(t, err)
	return d, fl
}

// A lookup takes this process's own addresses first, then the replicated
// records, then those known at start.
func TestLookupPrecedence(t *testing.T) {
	d, _ := newDirectory(t)
	ctx := context.Background()
	require.NoError(t, d.Record(ctx, 1, directory.Addresses{HTTP: "stale:1"}))
	require.NoError(t, d.Record(ctx, 2, directory.Addresses{GRPC: "g2:1"}))
	require.NoError(t, d.Record(ctx, 3, directory.Addresses{HTTP: "moved:1"}))
	require.NoError(t, d.Record(ctx, 4, directory.Addresses{HTTP: "h4:1", GRPC: "g4:1"}))
	for _, c := range []struct {
		id         edict.ProcessID
		want       directory.Addresses
		peer       string
		recordedAs directory.Addresses
	}{
		{1, directory.Addresses{HTTP: "h1:1", GRPC: "g1:1"}, "r1:1", directory.Addresses{HTTP: "stale:1"}},
		{2, directory.Addresses{HTTP: "h2:1", GRPC: "g2:1"}, "r2:1", directory.Addresses{GRPC: "g2:1"}},
		{3, directory.Addresses{HTTP: "moved:1", GRPC: "g3:1"}, "", directory.Addresses{HTTP: "moved:1"}},
		{4, directory.Addresses{HTTP: "h4:1", GRPC: "g4:1"}, "", directory.Addresses{HTTP: "h4:1", GRPC: "g4:1"}},
		{5, directory.Addresses{}, "", directory.Addresses{}},
	} {
		assert.Equal(t, c.want, d.Addresses(c.id), "process %d", c.id)
		assert.Equal(t, c.want.HTTP, d.HTTPAddr(c.id))
		assert.Equal(t, c.want.GRPC, d.GRPCAddr(c.id))
		assert.Equal(t, c.peer, d.PeerAddr(c.id))
		assert.Equal(t, c.recordedAs, d.Recorded(c.id))
	}
	assert.Equal(t, "edictkv-7", directory.Name(7))
}

// Record writes every address given in one entry, or nothing: a bad
// address, or none, is refused before the log.
func TestRecord(t *testing.T) {
	d, fl := newDirectory(t)
	ctx := context.Background()
	for _, bad := range []struct {
		id edict.ProcessID
		a  directory.Addresses
	}{
		{2, directory.Addresses{}},
		{0, directory.Addresses{HTTP: "h:1"}},
		{2, directory.Addresses{HTTP: "h:1", GRPC: "no port"}},
		{2, directory.Addresses{HTTP: "[::1"}},
	} {
		require.Error(t, d.Record(ctx, bad.id, bad.a), "%+v", bad)
	}
	assert.Empty(t, fl.Applied())

	require.NoError(t, d.Record(ctx, 2, directory.Addresses{HTTP: "h:1", GRPC: "g:2"}))
	require.Len(t, fl.Applied(), 1, "one entry")
	// The records are in the state's system namespace: a client's range of
	// every key sees none of them, and they make no revision.
	assert.Equal(t, map[string]string{"http": "h:1", "grpc": "g:2"}, fl.State.Member(2))
	all, _, err := fl.State.Range(ctx, &pb.RangeRequest{Key: []byte{0}, RangeEnd: []byte{0}})
	require.NoError(t, err)
	assert.Zero(t, all.Count)
	assert.Equal(t, int64(1), fl.State.Rev())

	// Where writes are not accepted, Record says so, as the log does.
	fl.Follow(3)
	err = d.Record(ctx, 2, directory.Addresses{HTTP: "h:9"})
	var nle *edictlog.NotLeaderError
	require.ErrorAs(t, err, &nle)
	assert.Equal(t, "h:1", d.HTTPAddr(2))
}

func TestNewChecks(t *testing.T) {
	_, err := directory.New(directory.Config{Self: 1})
	require.Error(t, err, "no store")
	_, err = directory.New(directory.Config{Self: 1, Store: directory.StateStore{}, SelfAddrs: directory.Addresses{HTTP: "nope"}})
	require.ErrorIs(t, err, directory.ErrBadAddress)
}
