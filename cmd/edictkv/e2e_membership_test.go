package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edictlog/edictlog/cmd/edictkv/kvjson"
)

// cli runs a client subcommand of the built binary and returns its
// stdout; a non-zero exit fails the test with its stderr.
func cli(t *testing.T, args ...string) string {
	t.Helper()
	out, err := tryCLI(args...)
	if err != nil {
		t.Fatalf("edictkv %s: %v", strings.Join(args, " "), err)
	}
	return out
}

func tryCLI(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// waitFor polls cond until it returns nil or the deadline passes; the
// machine is shared, so deadlines are generous and never asserted on.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func status(p *proc) (kvjson.StatusJSON, error) {
	var st kvjson.StatusJSON
	code, b, err := call("GET", "http://"+p.api+"/v1/status", "")
	if err == nil && code != 200 {
		err = fmt.Errorf("status %d: %s", code, b)
	}
	if err == nil {
		err = json.Unmarshal(b, &st)
	}
	return st, err
}

// putIndex writes key through p (as cluster.put does) and returns the
// write's log index.
func (c *cluster) putIndex(p *proc, key, value string) uint64 {
	c.t.Helper()
	c.put(p, key, value)
	code, b, err := call("GET", "http://"+p.api+"/v1/kv/"+key, "")
	var g kvjson.GetResponse
	if err != nil || code != 200 || json.Unmarshal(b, &g) != nil {
		c.t.Fatalf("read back %s via node %d: %d %s %v", key, p.id, code, b, err)
	}
	return g.ModIndex
}

// A fourth process joins a running cluster through the CLI: it starts with
// serve --join, is added with add-learner, catches up, is promoted into a
// new epoch of four members; then the leader is removed with the CLI and
// the remaining three carry on with every acknowledged write.
func TestMembershipChanges(t *testing.T) {
	c := newCluster(t, 3)
	leader := c.leader()
	acked := map[string]string{}
	var lastIndex uint64
	for i := range 20 {
		k := fmt.Sprintf("before%d", i)
		lastIndex = c.putIndex(c.procs[i%3], k, k)
		acked[k] = k
	}
	st, err := status(leader)
	if err != nil {
		t.Fatal(err)
	}
	epoch0 := st.Epoch

	// edictkv get reads at the HTTP API's default level, follower: a
	// follower answers from its own state, linearizably, with no hop.
	var g kvjson.GetResponse
	if err := json.Unmarshal([]byte(cli(t, "get", "--addr", c.other(leader).api, "--json", "before19")), &g); err != nil {
		t.Fatal(err)
	}
	if g.Value == nil || *g.Value != "before19" || g.Consistency != "follower" {
		t.Fatalf("edictkv get at a follower: %+v, want before19 at the follower level", g)
	}

	// Process 4 starts with --join: --peers lists the three members, not
	// it. It is in no epoch until the cluster adds it.
	p4 := &proc{id: 4, raft: freePort(t), api: freePort(t), dir: filepath.Join(t.TempDir(), "4")}
	c.procs = append(c.procs, p4)
	c.start(p4, "--join")
	waitFor(t, "node 4 answering", 20*time.Second, func() error {
		s, err := status(p4)
		if err == nil && (!slices.Equal(s.Members, []uint64{1, 2, 3}) || s.IsLeader || len(s.Learners) != 0) {
			t.Fatalf("a joining process before add-learner: %+v", s)
		}
		return err
	})

	// add-learner through a follower: the request is forwarded to the
	// leader, which registers 4's HTTP address and adds it.
	f := c.other(leader)
	out := cli(t, "add-learner", "--addr", f.api, "--id", "4", "--raft-addr", p4.raft, "--http-addr", p4.api)
	if !strings.Contains(out, `"ok": true`) {
		t.Fatalf("add-learner answered %q", out)
	}
	waitFor(t, "node 4 a learner that applied the earlier writes", 20*time.Second, func() error {
		s, err := status(p4)
		switch {
		case err != nil:
			return err
		case !slices.Equal(s.Learners, []uint64{4}) || !slices.Equal(s.Members, []uint64{1, 2, 3}):
			return fmt.Errorf("node 4 sees members %v, learners %v", s.Members, s.Learners)
		case s.Applied < lastIndex:
			return fmt.Errorf("node 4 applied %d of %d", s.Applied, lastIndex)
		}
		return nil
	})
	// What it applied is the data itself: stale reads are served from
	// node 4's own state.
	for k, v := range acked {
		if got, code := c.get(p4, k, "stale"); got != v {
			t.Fatalf("stale read of %s on the learner: %q (status %d), want %q", k, got, code, v)
		}
	}

	// promote: a new epoch of four members.
	out = cli(t, "promote", "--addr", p4.api, "--id", "4")
	if !strings.Contains(out, `"ok": true`) {
		t.Fatalf("promote answered %q", out)
	}
	var epoch1 uint64
	waitFor(t, "a leader of a new epoch of four members, known to all", 20*time.Second, func() error {
		var cl kvjson.ClusterJSON
		out, err := tryCLI("members", "--json", "--addr", p4.api)
		if err != nil {
			return err
		}
		if err := json.Unmarshal([]byte(out), &cl); err != nil {
			return err
		}
		if cl.Epoch <= epoch0 || cl.Leader == 0 || len(cl.Members) != 4 {
			return fmt.Errorf("members --json: %s", out)
		}
		for _, m := range cl.Members {
			if m.Role != "member" || m.Status == nil || m.Status.Epoch != cl.Epoch || len(m.Status.Members) != 4 {
				return fmt.Errorf("member %d: %s", m.ID, out)
			}
		}
		epoch1 = cl.Epoch
		return nil
	})
	// The table form names every member too.
	table := cli(t, "members", "--addr", f.api)
	for _, p := range c.procs {
		if !strings.Contains(table, p.api) {
			t.Fatalf("members table lacks node %d (%s):\n%s", p.id, p.api, table)
		}
	}
	for _, p := range c.procs {
		k := fmt.Sprintf("epoch1-%d", p.id)
		c.put(p, k, k)
		acked[k] = k
	}
	for k, v := range acked {
		c.mustRead(k, v)
	}

	// remove the leader (the hardest case: it commits the edict that
	// takes it out, then hands over), asked through another process.
	victim := c.leader()
	via := c.other(victim)
	cli(t, "remove", "--addr", via.api, "--id", fmt.Sprint(victim.id))
	var rest []uint64
	for _, p := range c.procs {
		if p != victim {
			rest = append(rest, uint64(p.id))
		}
	}
	waitFor(t, "a leader of a new epoch of the other three", 20*time.Second, func() error {
		for _, p := range c.procs {
			if p == victim {
				continue
			}
			s, err := status(p)
			if err != nil {
				return err
			}
			if s.Epoch <= epoch1 || !slices.Equal(s.Members, rest) || s.Leader == 0 || s.Leader == uint64(victim.id) {
				return fmt.Errorf("node %d: epoch %d, members %v, leader %d", p.id, s.Epoch, s.Members, s.Leader)
			}
		}
		return nil
	})
	t.Logf("epoch %d: 4 members; removed the leader %d; now %v", epoch1, victim.id, rest)
	// The removed process is out: stop it, and the three carry on alone.
	c.mustStop(victim, syscall.SIGTERM)
	for _, p := range c.procs {
		if p.cmd == nil {
			continue
		}
		k := fmt.Sprintf("epoch2-%d", p.id)
		c.put(p, k, k)
		acked[k] = k
	}
	for k, v := range acked {
		c.mustRead(k, v)
	}
	code, b, err := call("GET", "http://"+via.api+"/v1/cluster", "")
	var cl kvjson.ClusterJSON
	if err != nil || code != 200 || json.Unmarshal(b, &cl) != nil || len(cl.Members) != 3 {
		t.Fatalf("/v1/cluster after the removal: %d %s %v", code, b, err)
	}
	for _, m := range cl.Members {
		if m.ID == uint64(victim.id) {
			t.Fatalf("the removed node %d is still listed: %s", victim.id, b)
		}
	}
}
