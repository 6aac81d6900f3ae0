package process

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/edictlog/edictlog/edict"
)

// A graceful shutdown of the leader hands leadership over: the others
// have a new leader and writes through them succeed.
func TestShutdownHandsOverLeadership(t *testing.T) {
	c := startCluster(t, 3, nil)
	leader := c.leader()
	f := c.follower(leader)
	mustStatus(t, do(t, http.MethodPut, c.url(f, "/v1/kv/before"), "1"), http.StatusOK)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.procs[leader].Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	delete(c.procs, leader)
	// No eventually here: the write must succeed the first time.
	mustStatus(t, do(t, http.MethodPut, c.url(f, "/v1/kv/after"), "2"), http.StatusOK)
	a := do(t, http.MethodGet, c.url(f, "/v1/kv/before"), "")
	mustStatus(t, a, http.StatusOK)
	if next := c.leader(); next == leader {
		t.Fatalf("leader %d still leads after shutdown", leader)
	}
}

// The reign counter follows the Node's events: every reign is counted
// once, at the process that led it, however quickly leadership moves,
// including the reign under way when the count started.
func TestReignsCounted(t *testing.T) {
	c := startCluster(t, 3, nil)
	first := c.leader()
	other := c.follower(first)
	reigns := func(id edict.ProcessID) string {
		for _, line := range strings.Split(string(do(t, http.MethodGet, c.url(id, "/metrics"), "").body), "\n") {
			if strings.HasPrefix(line, "edictkv_reigns_started_total ") {
				return strings.TrimPrefix(line, "edictkv_reigns_started_total ")
			}
		}
		t.Fatalf("process %d exports no reign count", id)
		return ""
	}
	if got := reigns(first); got != "1" {
		t.Fatalf("the first leader counts %s reigns, want 1", got)
	}
	transfer := func(from, to edict.ProcessID) {
		mustStatus(t, do(t, http.MethodPost, c.url(from, "/v1/cluster/transfer"), fmt.Sprintf(`{"id":%d}`, to)), http.StatusOK)
		eventually(t, fmt.Sprintf("process %d leads", to), func() bool { return c.procs[to].Node.Status().IsLeader })
	}
	for range 3 {
		transfer(first, other)
		transfer(other, first)
	}
	// Status shows a reign a moment before the Node's observers hear of
	// it: the counts are read until they settle.
	for id, want := range map[edict.ProcessID]string{first: "4", other: "3"} {
		eventually(t, fmt.Sprintf("process %d counts %s reigns", id, want), func() bool { return reigns(id) == want })
	}
	for id := range c.procs {
		if id != first && id != other {
			if got := reigns(id); got != "0" {
				t.Errorf("process %d never led, yet counts %s reigns", id, got)
			}
		}
	}
}
