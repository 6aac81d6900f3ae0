package edictlog_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/fsm/kvfsm"
	"github.com/stretchr/testify/require"
)

var errNoKey = errors.New("no such key")

func getKey(key string) func(*kvfsm.KV) (string, error) {
	return func(kv *kvfsm.KV) (string, error) {
		e, ok := kv.Get(key)
		if !ok {
			return "", errNoKey
		}
		return e.Value, nil
	}
}

// A typed read runs the caller's function against the state machine at
// every level with the level's guarantee: a linearizable read (lease at
// the leader, follower at a follower) sees a write acknowledged before
// it. The function's own error comes back as a *QueryError beside a
// result that keeps the read's index and level.
func TestReadFuncAtEveryLevel(t *testing.T) {
	c := newNetCluster(t, 3, steadyLease)
	l := c.waitLeader(10 * time.Second)
	res := c.put("k", "v1")
	f := c.others(l.id)[0]
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	for _, tc := range []struct {
		n     *netNode
		level edictlog.ReadLevel
		read  func(context.Context, *edictlog.Node, edictlog.ReadLevel, func(*kvfsm.KV) (string, error)) (edictlog.Value[string], error)
	}{
		{l, edictlog.ReadLease, edictlog.ReadFunc[*kvfsm.KV, string]},
		{f, edictlog.ReadFollower, edictlog.ReadFunc[*kvfsm.KV, string]},
		{l, edictlog.ReadLease, edictlog.ReadFuncBetweenApplies[*kvfsm.KV, string]},
		{f, edictlog.ReadFollower, edictlog.ReadFuncBetweenApplies[*kvfsm.KV, string]},
	} {
		name := fmt.Sprintf("%v on node %v", tc.level, tc.n.id)
		v, err := tc.read(ctx, tc.n.Node, tc.level, getKey("k"))
		require.NoError(t, err, name)
		require.Equal(t, "v1", v.Value, name)
		require.GreaterOrEqual(t, v.Index, res.Index, name)

		v, err = tc.read(ctx, tc.n.Node, tc.level, getKey("missing"))
		var qe *edictlog.QueryError
		require.ErrorAs(t, err, &qe, name)
		require.ErrorIs(t, err, errNoKey, name)
		require.GreaterOrEqual(t, qe.Index, res.Index, name)
		require.Equal(t, qe.Index, v.Index, "the result keeps the read's index beside the function's error")
		require.Equal(t, qe.Level, v.Level)
	}
	// A stale read at a follower, once it applied the write.
	waitApplied(t, res.Index, f)
	v, err := edictlog.ReadFunc(ctx, f.Node, edictlog.ReadStale, getKey("k"))
	require.NoError(t, err)
	require.Equal(t, "v1", v.Value)
	require.Equal(t, edictlog.ReadStale, v.Level)

	// A lease read at a follower is refused by the log, not the function.
	_, err = edictlog.ReadFunc(ctx, f.Node, edictlog.ReadLease, getKey("k"))
	var nl *edictlog.NotLeaderError
	require.ErrorAs(t, err, &nl)
	require.NotErrorAs(t, err, new(*edictlog.QueryError))

	// A type the state machine is not is an error before any read.
	_, err = edictlog.ReadFunc(ctx, l.Node, edictlog.ReadLease, func(*headFSM) (int, error) { return 0, nil })
	require.ErrorContains(t, err, "kvfsm.KV")

	// Read keeps the index beside Query's error too.
	rr, err := l.Read(ctx, edictlog.ReadLease, []byte("not a query"))
	var qe *edictlog.QueryError
	require.ErrorAs(t, err, &qe)
	require.Equal(t, qe.Index, rr.Index)
	require.GreaterOrEqual(t, rr.Index, res.Index)
}
