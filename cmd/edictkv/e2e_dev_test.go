package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The README's quick start: `edictkv dev` runs three processes with
// gossip, a PUT at one is read at another, and SIGTERM stops them all
// and removes the data folder. Every gossip port is bound by its own
// process (none picked ahead and bound later, which another program
// could take in between), so each process reports its own.
func TestDevQuickStart(t *testing.T) {
	cmd := exec.Command(binary, "dev", "--http-port", strings.TrimPrefix(freePort(t), "127.0.0.1:"), "--grpc-port", "0")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	cmd.Stderr = &logs
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("dev's log:\n%s", tail(logs.Bytes(), 8000))
		}
	})
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()

	nodeLine := regexp.MustCompile(`^  node (\d)  http://(\S+)  gossip (\S+)$`)
	dataLine := regexp.MustCompile(`^edictkv dev: 3 processes, data in (\S+)$`)
	var https, gossips []string
	var data string
	lines := bufio.NewScanner(stdout)
	for lines.Scan() && !strings.HasPrefix(lines.Text(), "try:") {
		if m := dataLine.FindStringSubmatch(lines.Text()); m != nil {
			data = m[1]
		}
		if m := nodeLine.FindStringSubmatch(lines.Text()); m != nil {
			https, gossips = append(https, m[2]), append(gossips, m[3])
		}
	}
	go func() {
		for lines.Scan() {
		}
	}()
	if len(https) != 3 || data == "" {
		t.Fatalf("dev printed %d nodes (http %v) and data folder %q", len(https), https, data)
	}
	seen := map[string]bool{}
	for i, g := range gossips {
		if strings.HasSuffix(g, ":0") || seen[g] {
			t.Fatalf("node %d's gossip address %q: not its own bound port (all: %v)", i+1, g, gossips)
		}
		seen[g] = true
	}

	deadline := time.Now().Add(60 * time.Second)
	for {
		code, body, err := call("PUT", "http://"+https[0]+"/v1/kv/a", "hello")
		if err == nil && code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("PUT at node 1: %d %s %v", code, body, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	code, body, err := call("GET", "http://"+https[1]+"/v1/kv/a", "")
	if err != nil || code != 200 || !strings.Contains(string(body), "hello") {
		t.Fatalf("GET at node 2: %d %s %v", code, body, err)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		stopped = true
		if err != nil {
			t.Fatalf("dev exited with %v after SIGTERM", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("dev did not stop within 30s of SIGTERM")
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Fatalf("the data folder %s is still there (%v)", data, err)
	}
}
