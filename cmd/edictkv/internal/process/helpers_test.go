package process

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/edictlog/edictlog/cmd/edictkv/kvjson"
	"github.com/edictlog/edictlog/edict"
)

// testCluster is three real processes in this test process: bbolt files,
// TCP on 127.0.0.1, HTTP servers.
type testCluster struct {
	t     *testing.T
	procs map[edict.ProcessID]*Process
}

func quietLogger() *slog.Logger {
	if os.Getenv("KV_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func startCluster(t *testing.T, n int, tweak func(*Config)) *testCluster {
	t.Helper()
	dir := t.TempDir()
	c := &testCluster{t: t, procs: map[edict.ProcessID]*Process{}}
	peers := map[edict.ProcessID]Peer{}
	for i := 1; i <= n; i++ {
		id := edict.ProcessID(i)
		cfg := Config{ID: id, DataDir: filepath.Join(dir, fmt.Sprint(i)), RaftAddr: "127.0.0.1:0",
			HTTPAddr: "127.0.0.1:0", ClusterID: "test", Logger: quietLogger()}
		if tweak != nil {
			tweak(&cfg)
		}
		p, err := Listen(cfg)
		if err != nil {
			t.Fatal(err)
		}
		c.procs[id] = p
		peers[id] = Peer{RaftAddr: p.RaftAddr(), HTTPAddr: p.HTTPAddr()}
	}
	for _, p := range c.procs {
		if err := p.Start(peers); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, p := range c.procs {
			_ = p.Close()
		}
	})
	return c
}

// leader waits (generously: the machine is shared) for a process to lead.
func (c *testCluster) leader() edict.ProcessID {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for id, p := range c.procs {
			if p.Node.Status().IsLeader {
				return id
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.t.Fatal("no leader within 30s")
	return 0
}

// follower returns a process other than the leader.
func (c *testCluster) follower(leader edict.ProcessID) edict.ProcessID {
	for id := range c.procs {
		if id != leader {
			return id
		}
	}
	c.t.Fatal("no follower")
	return 0
}

func (c *testCluster) url(id edict.ProcessID, path string) string {
	return "http://" + c.procs[id].HTTPAddr() + path
}

type answer struct {
	status int
	header http.Header
	body   []byte
}

func (a answer) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(a.body, v); err != nil {
		t.Fatalf("decode %s: %v", a.body, err)
	}
}

func (a answer) errorBody(t *testing.T) kvjson.ErrorJSON {
	t.Helper()
	var e kvjson.ErrorJSON
	a.json(t, &e)
	return e
}

var noRedirects = &http.Client{Timeout: 30 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func do(t *testing.T, method, url, body string) answer {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := noRedirects.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: b}
}

func mustStatus(t *testing.T, a answer, want int) {
	t.Helper()
	if a.status != want {
		t.Fatalf("status %d, want %d; body %s", a.status, want, a.body)
	}
}

// eventually polls cond until it holds or the generous deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

// keyCount is the number of keys p's state holds now.
func keyCount(p *Process) int {
	resp, _, err := p.State.Range(context.Background(), &pb.RangeRequest{Key: []byte{0}, RangeEnd: []byte{0}, CountOnly: true})
	if err != nil {
		panic(err)
	}
	return int(resp.Count)
}
