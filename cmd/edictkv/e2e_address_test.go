package main

import (
	"fmt"
	"syscall"
	"testing"
	"time"
)

// A process restarted on a new --raft-addr, with the --peers it was first
// given (its old transport address among them) and with no operator call,
// serves again: the others learn the address from its connections, a
// write through it is answered once it has applied it, and it answers a
// linearizable read.
func TestRestartOnNewRaftAddr(t *testing.T) {
	c := newCluster(t, 3)
	leader := c.leader()
	c.put(leader, "a", "1")
	f := c.other(leader)
	c.mustStop(f, syscall.SIGKILL)
	old := f.raft
	f.raft = freePort(t)
	started := time.Now()
	c.start(f)
	c.ready(f)
	c.put(f, "b", "2")
	wrote := time.Since(started)
	waitFor(t, "a follower read through the restarted process", 30*time.Second, func() error {
		if v, code := c.get(f, "b", "follower"); v != "2" {
			return fmt.Errorf("read b via node %d: %q (status %d)", f.id, v, code)
		}
		return nil
	})
	t.Logf("node %d restarted on %s (was %s): a write through it answered %v after its start",
		f.id, f.raft, old, wrote.Round(time.Millisecond))
	c.mustRead("a", "1")
}
