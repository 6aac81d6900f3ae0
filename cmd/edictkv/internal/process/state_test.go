package process

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/edictlog/edictlog/cmd/edictkv/internal/directory"
	"github.com/edictlog/edictlog/cmd/edictkv/kvjson"
	"github.com/edictlog/edictlog/edict"
)

// A data directory with the log's store and no state file is the earlier
// format: refused, naming it, and left as it was.
func TestOldFormatRefused(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, logFile)
	if err := os.WriteFile(old, []byte("a log store"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Listen(Config{ID: 1, DataDir: dir, RaftAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", Logger: quietLogger()})
	if !errors.Is(err, ErrOldFormat) {
		t.Fatalf("Listen on an old data directory: %v, want ErrOldFormat", err)
	}
	if _, err := os.Stat(filepath.Join(dir, stateFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refusal created the state file: %v", err)
	}
	if b, _ := os.ReadFile(old); string(b) != "a log store" {
		t.Fatal("the refusal changed the log's store")
	}
}

// startOne starts a cluster of one process in dir.
func startOne(t *testing.T, dir string) *Process {
	t.Helper()
	p, err := Listen(Config{ID: 1, DataDir: dir, RaftAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(map[edict.ProcessID]Peer{1: {RaftAddr: p.RaftAddr(), HTTPAddr: p.HTTPAddr()}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "process 1 leads", func() bool { return p.Node.Status().IsLeader })
	return p
}

// The state is kept in its file across a restart: keys, their history and
// revisions, and the system namespace; revisions go on from where they
// were.
func TestStateSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	p := startOne(t, dir)
	url := func(path string) string { return "http://" + p.HTTPAddr() + path }
	mustStatus(t, do(t, http.MethodPut, url("/v1/kv/k"), "1"), http.StatusOK)
	var w kvjson.WriteResponse
	a := do(t, http.MethodPut, url("/v1/kv/k"), "2")
	mustStatus(t, a, http.StatusOK)
	a.json(t, &w)
	if w.Index != 3 {
		t.Fatalf("the second write made revision %d, want 3", w.Index)
	}
	if err := p.dir.Record(context.Background(), 2, directory.Addresses{HTTP: "127.0.0.1:9"}); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}

	p = startOne(t, dir)
	defer p.Close()
	if rev := p.State.Rev(); rev != 3 {
		t.Fatalf("reopened at revision %d, want 3", rev)
	}
	if got := p.dir.Recorded(2); got.HTTP != "127.0.0.1:9" {
		t.Fatalf("the member directory's record after a restart: %+v", got)
	}
	a = do(t, http.MethodGet, url("/v1/kv/k?revision=2"), "")
	mustStatus(t, a, http.StatusOK)
	var g kvjson.GetResponse
	a.json(t, &g)
	if *g.Value != "1" || g.Stamp.Token == "" {
		t.Fatalf("the value at revision 2 after a restart: %+v", g)
	}
	a = do(t, http.MethodPut, url("/v1/kv/k"), "3")
	mustStatus(t, a, http.StatusOK)
	a.json(t, &w)
	if w.Index != 4 {
		t.Fatalf("the first write after a restart made revision %d, want 4", w.Index)
	}
}
