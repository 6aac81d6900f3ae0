package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// gossipSeen reads p's JSON log and returns the gossip addresses its
// detector logged with msg ("member up" or "member down").
func gossipSeen(t *testing.T, p *proc, msg string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(p.log.Name())
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var rec map[string]any
		if json.Unmarshal(sc.Bytes(), &rec) != nil || rec["component"] != "gossip" || rec["msg"] != msg {
			continue
		}
		if a, ok := rec["addr"].(string); ok {
			seen[a] = true
		}
	}
	return seen
}

// waitGossip polls until p's detector has logged msg for every address
// in addrs.
func waitGossip(t *testing.T, p *proc, msg string, addrs ...string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		seen := gossipSeen(t, p, msg)
		missing := 0
		for _, a := range addrs {
			if !seen[a] {
				missing++
			}
		}
		if missing == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %d's gossip detector did not log %q for all of %v (saw %v)", p.id, msg, addrs, seen)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestGossipEndToEnd runs three processes with the gossip detector and
// an encryption key — given as hex to one and as base64 to the others, so
// they hear each other only if both decode to the same key — and shows
// they elect a leader, serve writes, and replace a SIGKILLed leader.
func TestGossipEndToEnd(t *testing.T) {
	key := bytes.Repeat([]byte{0x5a, 0x13, 0xc7, 0x02}, 8) // 32 bytes: AES-256
	c := newClusterWith(t, 3, true, func(c *cluster, p *proc) []string {
		var join []string
		for _, o := range c.procs {
			if o != p {
				join = append(join, o.gossip)
			}
		}
		k := base64.StdEncoding.EncodeToString(key)
		if p.id == 1 {
			k = hex.EncodeToString(key)
		}
		return []string{"--gossip-addr", p.gossip, "--gossip-join", strings.Join(join, ","), "--cluster-key", k}
	})
	// Every detector hears both others: gossip is on, and the key agrees.
	for _, p := range c.procs {
		var others []string
		for _, o := range c.procs {
			if o != p {
				others = append(others, o.gossip)
			}
		}
		waitGossip(t, p, "member up", others...)
	}

	leader := c.leader()
	acked := map[string]string{}
	for _, p := range c.procs {
		k := fmt.Sprintf("g%d", p.id)
		c.put(p, k, k)
		acked[k] = k
	}

	next := c.killLeader(leader)
	// The survivors' detectors declared it dead (memberlist's failure
	// detection, not only its lapsed lease).
	for _, p := range c.procs {
		if p.cmd != nil {
			waitGossip(t, p, "member down", leader.gossip)
		}
	}
	for i := range 5 {
		k := fmt.Sprintf("after%d", i)
		c.put(c.other(nil), k, k)
		acked[k] = k
	}
	for k, v := range acked {
		if got, code := c.get(next, k, "lease"); got != v {
			t.Fatalf("after failover %s = %q (status %d), want %q", k, got, code, v)
		}
	}

	// SIGTERM the new leader: it exits cleanly after leaving gossip, and
	// the last process hears that it left.
	last := c.other(next)
	c.mustStop(next, syscall.SIGTERM)
	waitGossip(t, last, "member down", next.gossip)
	if b, _ := os.ReadFile(next.log.Name()); !bytes.Contains(b, []byte(`"msg":"stopped"`)) {
		t.Fatalf("node %d did not log a clean stop", next.id)
	}
}

// TestBadClusterKey: a key that is not hex or base64 of 16, 24 or 32
// bytes is refused before anything starts, by an error that names the
// flag (or its variable) and does not repeat the secret.
func TestBadClusterKey(t *testing.T) {
	dir := t.TempDir()
	base := []string{"--id", "1", "--data-dir", dir, "--peers", "1=127.0.0.1:1/127.0.0.1:2", "--gossip-addr", "127.0.0.1:0"}
	for _, bad := range []string{
		"not a key!",
		base64.StdEncoding.EncodeToString(make([]byte, 15)),
		hex.EncodeToString(make([]byte, 20)),
		base64.StdEncoding.EncodeToString(make([]byte, 33)),
	} {
		err := runServe(append(base, "--cluster-key", bad), os.Stdout, os.Stderr)
		if err == nil || !strings.Contains(err.Error(), "--cluster-key") {
			t.Fatalf("--cluster-key %q: err %v, want one naming --cluster-key", bad, err)
		}
		if strings.Contains(err.Error(), bad) {
			t.Fatalf("the error repeats the key: %v", err)
		}
	}
	// Nothing was created: the flag is checked before the store is opened.
	for _, name := range []string{"log", "edictkv.db"} {
		if _, err := os.Stat(filepath.Join(dir, name)); !os.IsNotExist(err) {
			t.Fatalf("a refused start opened the store (%s): %v", name, err)
		}
	}

	// The same through the environment, as the binary reports it.
	cmd := execServe(t, append(base, "--log-level", "error")...)
	cmd.Env = append(os.Environ(), "EDICTKV_CLUSTER_KEY=abc")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--cluster-key") {
		t.Fatalf("EDICTKV_CLUSTER_KEY=abc: %v, output %q", err, out)
	}

	// A key without gossip would silently do nothing: refused too.
	err = runServe([]string{"--id", "1", "--data-dir", dir, "--peers", "1=127.0.0.1:1/127.0.0.1:2",
		"--cluster-key", hex.EncodeToString(make([]byte, 16))}, os.Stdout, os.Stderr)
	if err == nil || !strings.Contains(err.Error(), "--gossip-addr") {
		t.Fatalf("--cluster-key without --gossip-addr: %v", err)
	}
}

func TestParseClusterKey(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	for _, enc := range []string{
		hex.EncodeToString(key[:16]),
		hex.EncodeToString(key[:24]),
		hex.EncodeToString(key),
		base64.StdEncoding.EncodeToString(key),
		base64.RawStdEncoding.EncodeToString(key[:16]),
		base64.URLEncoding.EncodeToString(key[:24]),
		" " + base64.RawURLEncoding.EncodeToString(key) + "\n",
	} {
		got, err := parseClusterKey(enc)
		if err != nil {
			t.Fatalf("%q: %v", enc, err)
		}
		if want := key[:len(got)]; !bytes.Equal(got, want) || (len(got) != 16 && len(got) != 24 && len(got) != 32) {
			t.Fatalf("%q decoded to %x", enc, got)
		}
	}
	if got, err := parseClusterKey(""); got != nil || err != nil {
		t.Fatalf("empty key: %x %v, want none", got, err)
	}
}

// execServe is the built binary's serve command with args.
func execServe(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"serve"}, args...)...)
	dieWithTest(cmd)
	return cmd
}
