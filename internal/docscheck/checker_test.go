package docscheck

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A small repository of its own, so that what the checker accepts and
// refuses does not move with the real one's code.
var fixture = map[string]string{
	"go.work":            "go 1.26\n",
	"log/node.go":        "package log\n\ntype Node struct{ Peers int }\n\nfunc (n *Node) Apply() {}\n\nfunc Start() {}\n",
	"log/leader.go":      "package log\n\nfunc startReign() {}\n\nfunc sendAppends() {}\n",
	"log/mutation.go":    "package log\n\nconst RuleAcceptReign = \"accept-reign\"\n",
	"log/node_test.go":   "package log\n\nfunc TestNodeStarts(t *testing.T) { t.Run(\"SubCase\", nil) }\n",
	"log/testdata/a.txt": "a transcript\n",
	"kv/one/route/r.go":  "package route\n\nfunc Do() {}\n",
	"kv/two/route/r.go":  "package route\n\nfunc Do() {}\n",
	"elect/gossip/g.go":  "package gossip\n\ntype base struct{}\n\nfunc (base) Observe() {}\n\ntype Detector struct{ base }\n",
	"elect/core.go":      "package elect\n\ntype Core struct{}\n\nfunc (c *Core) Step() {}\n\nfunc (c *Core) maybeStart() {}\n",
	"cmd/tool/main.go":   "package main\n\nfunc main() {}\n",
	"bench/etcd/run.sh":  "#!/bin/sh\n",
	"docs/protocol.md":   "# protocol\n",
	"elect/lease.go":     "package elect\n\n// The grant lasts (DESIGN " + "§4.2).\nfunc grant() {}\n",
	"elect/doc.go":       "// Package elect is the paper's (see /work/" + "shared/" + "papers/p.md).\npackage elect\n",
}

func fixtureIndex(t *testing.T) *Index {
	t.Helper()
	root := t.TempDir()
	for name, body := range fixture {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ix, err := NewIndex(root)
	if err != nil {
		t.Fatal(err)
	}
	return ix
}

func TestCheckerAcceptsWhatExists(t *testing.T) {
	ix := fixtureIndex(t)
	doc := strings.Join([]string{
		"`log.Node`, `log.Node.Apply`, `log.Node.Peers`, `log.Start(cfg)`, `log`, `Node.Apply`.",
		"`elect/gossip`, `gossip.Detector.Observe` (promoted), `elect.Core.Step`, `Core.maybeStart`.",
		"`log/leader.go` `startReign`, `sendAppends` and `startReign`; `Start`, `maybeStart`.",
		"`log/testdata/`, `testdata/a.txt`, `bench/etcd/run.sh`, `docs/protocol.md`, `route/r.go`.",
		"`TestNodeStarts`, `TestNodeStarts/sub_case`, `SubCase`, `log/accept-reign`, `accept-reign`.",
		"`github.com/edictlog/edictlog/log.Node`, `one/route.Do`.",
		"Other projects: `time.Now`, `server/etcdserver/txn`, `go.etcd.io/raft/v3`, `KV.Put`,",
		"`golang.org/x/sys/unix.ClockGettime`, `c.persisted`, `state.db`, `/v1/kv`, `a/b`.",
		"Prose in code type: `lease`, `EDICTKV_DATA_DIR`, `--peers`, `go test ./log/`.",
		"",
		"```go",
		"n, err := log.Start(log.Node{}) // fmt.Println is not ours",
		"```",
	}, "\n")
	if got := ix.CheckDoc("doc.md", doc); len(got) != 0 {
		t.Errorf("problems in a document that names only what exists:\n%v", got)
	}
}

func TestCheckerRefusesWhatIsMissing(t *testing.T) {
	ix := fixtureIndex(t)
	doc := strings.Join([]string{
		"`log.Stop` and `log.Node.Remove`.",                                 // 1
		"`route.Do`.",                                                       // 2: two packages named route
		"`Core.hearEpoch`.",                                                 // 3
		"`log/leader.go` `startReign`, `onAppend`.",                         // 4: onAppend is not in leader.go
		"`log/follower.go`, `elect/gossip/missing/`.",                       // 5
		"`TestNodeStops`, `maybeCommit`.",                                   // 6
		"`log/accept-grantee`.",                                             // 7: no such mutation rule
		"`elect/nosuch.Thing` and `github.com/edictlog/edictlog/log.Gone`.", // 8
		"a span that crosses a line: `log.Node",                             // 9
		"Gone`, is read with a space for the line break.",
		"",
		"```",
		"log.Stopped(ctx)", // 13
		"```",
		"What issue 16 asked for.", // 15
	}, "\n")
	want := []string{
		"doc.md:1: `log.Stop`: package log (log) declares no Stop",
		"doc.md:1: `log.Node.Remove`: log.Node (log) has no field or method Remove",
		"doc.md:2: `route.Do`: route is ambiguous: it names the packages kv/one/route, kv/two/route; write the path",
		"doc.md:3: `Core.hearEpoch`: no type Core in the repository has a field or method hearEpoch (declared in elect)",
		"doc.md:4: `onAppend`: log/leader.go declares no onAppend",
		"doc.md:5: `log/follower.go`: no file or directory log/follower.go in the repository",
		"doc.md:5: `elect/gossip/missing/`: no file or directory elect/gossip/missing/ in the repository",
		"doc.md:6: `TestNodeStops`: no test, benchmark, fuzz target or example TestNodeStops in the repository",
		"doc.md:6: `maybeCommit`: nothing named maybeCommit is declared in the repository",
		"doc.md:7: `log/accept-grantee`: no mutation rule log/accept-grantee (nor file or directory) in the repository",
		"doc.md:8: `elect/nosuch.Thing`: no package elect/nosuch in the repository",
		"doc.md:8: `github.com/edictlog/edictlog/log.Gone`: package log (log) declares no Gone",
		"doc.md:13: `log.Stopped`: package log (log) declares no Stopped",
		"doc.md:15: `issue 16`: cites an issue: say what the text is about, not which issue it served",
	}
	var got []string
	for _, p := range ix.CheckDoc("doc.md", doc) {
		got = append(got, p.String())
	}
	if !slices.Equal(got, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestOutsideCitationsFound(t *testing.T) {
	problems, err := fixtureIndex(t).OutsideCitations()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range problems {
		got = append(got, p.String())
	}
	want := []string{
		"elect/doc.go:1: `/work/" + "shared`: cites a document that is not in the repository",
		"elect/doc.go:1: `shared/" + "papers`: cites a document that is not in the repository",
		"elect/lease.go:3: `DESIGN " + "§`: cites a document that is not in the repository",
	}
	if !slices.Equal(got, want) {
		t.Errorf("citations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
