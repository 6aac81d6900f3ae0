package process

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/edictlog/edictlog/cmd/edictkv/internal/directory"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/kvstate"
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

// A learner that joins after the leader compacted its log is sent a copy
// of the leader's state (Snapshot, Persist) and restores it: it then
// holds every key and its history from the compaction revision on, the
// member directory's records, and the same revisions.
func TestLearnerRestoresTheState(t *testing.T) {
	small := func(cfg *Config) { cfg.SnapshotEvery, cfg.TrailingEntries = 16, 4 }
	c := startCluster(t, 3, small)
	leader := c.leader()
	for i := range 60 {
		mustStatus(t, do(t, http.MethodPut, c.url(leader, fmt.Sprintf("/v1/kv/k%d", i%10)), fmt.Sprint(i)), http.StatusOK)
	}
	lp := c.procs[leader]
	compact, err := (&kvstate.Request{Compaction: &pb.CompactionRequest{Revision: lp.State.Rev() - 5}}).Encode()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lp.Node.Apply(context.Background(), compact); err != nil {
		t.Fatal(err)
	}
	if err := lp.dir.Record(context.Background(), 9, directory.Addresses{HTTP: "127.0.0.1:9"}); err != nil {
		t.Fatal(err)
	}
	mustStatus(t, do(t, http.MethodPut, c.url(leader, "/v1/kv/last"), "x"), http.StatusOK)
	eventually(t, "the leader compacted its log", func() bool { return lp.Node.Status().FirstIndex > 2 })

	cfg := Config{ID: 4, DataDir: filepath.Join(t.TempDir(), "4"), RaftAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
		ClusterID: "test", Join: true, Logger: quietLogger()}
	small(&cfg)
	p4, err := Listen(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p4.Close()
	peers := map[edict.ProcessID]Peer{}
	for id, p := range c.procs {
		peers[id] = Peer{RaftAddr: p.RaftAddr(), HTTPAddr: p.HTTPAddr()}
	}
	if err := p4.Start(peers); err != nil {
		t.Fatal(err)
	}
	mustStatus(t, do(t, http.MethodPost, c.url(leader, "/v1/cluster/learners"),
		fmt.Sprintf(`{"id":4,"raft_addr":%q,"http_addr":%q}`, p4.RaftAddr(), p4.HTTPAddr())), http.StatusOK)
	eventually(t, "the learner caught up", func() bool { return p4.State.Rev() == lp.State.Rev() })

	if first := p4.Node.Status().FirstIndex; first <= 2 {
		t.Fatalf("the learner's log starts at %d: it replayed the log rather than restoring a copy", first)
	}
	if got, want := p4.State.CompactRev(), lp.State.CompactRev(); got != want {
		t.Fatalf("the learner is compacted at %d, the leader at %d", got, want)
	}
	ctx := context.Background()
	for rev := lp.State.CompactRev(); rev <= lp.State.Rev(); rev++ {
		r := &pb.RangeRequest{Key: []byte{0}, RangeEnd: []byte{0}, Revision: rev}
		want, wantStamps, err := lp.State.Range(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		got, gotStamps, err := p4.State.Range(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		want.Header, got.Header = nil, nil
		if !reflect.DeepEqual(want, got) || !reflect.DeepEqual(wantStamps, gotStamps) {
			t.Fatalf("at revision %d the learner answers %v, the leader %v", rev, got, want)
		}
	}
	if got := p4.State.Member(9); got["http"] != "127.0.0.1:9" {
		t.Fatalf("the learner's member directory: %v", got)
	}
}

// The log's store: a WALStore in a new data directory, the one an existing
// directory holds otherwise, and a refusal to start an empty log beside a
// real one.
func TestLogStoreOf(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		want, kind, path string
	}{
		{"", "wal", walDir},
		{"wal", "wal", walDir},
		{"bolt", "bolt", logFile},
	} {
		kind, path, err := logStoreOf(dir, c.want)
		if err != nil || kind != c.kind || path != filepath.Join(dir, c.path) {
			t.Fatalf("new dir, %q: %s %s %v; want %s %s", c.want, kind, path, err, c.kind, c.path)
		}
	}
	if _, _, err := logStoreOf(dir, "rocks"); err == nil || !strings.Contains(err.Error(), "rocks") {
		t.Fatalf("unknown store: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, logFile), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if kind, _, err := logStoreOf(dir, ""); kind != "bolt" || err != nil {
		t.Fatalf("a dir with %s: %s %v", logFile, kind, err)
	}
	if _, _, err := logStoreOf(dir, "wal"); err == nil || !strings.Contains(err.Error(), logFile) {
		t.Fatalf("wal asked in a dir with %s: %v", logFile, err)
	}
	if err := os.Mkdir(filepath.Join(dir, walDir), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, _, err := logStoreOf(dir, ""); err == nil || !strings.Contains(err.Error(), "two logs") {
		t.Fatalf("both: %v", err)
	}
	if err := os.Remove(filepath.Join(dir, logFile)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := logStoreOf(dir, "bolt"); err == nil || !strings.Contains(err.Error(), walDir) {
		t.Fatalf("bolt asked in a dir with %s/: %v", walDir, err)
	}
}
