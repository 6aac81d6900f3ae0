package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/cmd/edictkv/kvjson"
	"github.com/edictlog/edictlog/edict"
)

// /readyz: ready means a leader is known, what this process was told is
// committed is applied, and the read barrier passed: the process has
// applied the commit index the leader had when asked. /v1/status says
// the same.
func TestReadyz(t *testing.T) {
	f := newFixture(t)
	readyz := func() (int, string) {
		a := f.do(t, "GET", "/readyz", "")
		return a.code, string(a.body)
	}
	statusReady := func() bool {
		var st kvjson.StatusJSON
		require.NoError(t, json.Unmarshal(f.do(t, "GET", "/v1/status", "").body, &st))
		return st.Ready
	}
	set := func(edit func(n *fakeNode)) {
		f.node.mu.Lock()
		defer f.node.mu.Unlock()
		edit(f.node)
	}

	code, body := readyz()
	assert.Equal(t, http.StatusOK, code, body)
	assert.True(t, statusReady())
	f.node.mu.Lock()
	assert.Equal(t, []edictlog.ReadLevel{edictlog.ReadFollower, edictlog.ReadFollower}, f.node.levels, "the barrier is a follower read")
	f.node.mu.Unlock()

	// Caught up with what it knows, but not with the leader: the barrier
	// does not return in time.
	set(func(n *fakeNode) {
		n.st.Commit, n.st.Applied = 5, 5
		n.barrier = func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
	})
	code, body = readyz()
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, "not caught up")
	assert.Contains(t, body, "applied index 5")
	assert.False(t, statusReady())

	set(func(n *fakeNode) {
		n.barrier = func(context.Context) error { return &edictlog.NotLeaderError{Err: edictlog.ErrNoLeader} }
	})
	code, body = readyz()
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, "read barrier at the leader failed")

	// The local checks come first, and need no barrier.
	set(func(n *fakeNode) {
		n.st.Commit = 9
		n.levels = nil
		n.barrier = nil
	})
	code, body = readyz()
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, "applied index 5 behind commit index 9")
	set(func(n *fakeNode) { n.st.Leader, n.st.IsLeader = edict.None, false })
	code, body = readyz()
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, "no leader known")
	f.node.mu.Lock()
	assert.Empty(t, f.node.levels)
	f.node.mu.Unlock()

	set(func(n *fakeNode) { n.st.Leader, n.st.Commit = 2, 5 })
	code, body = readyz()
	assert.Equal(t, http.StatusOK, code, body)
}
