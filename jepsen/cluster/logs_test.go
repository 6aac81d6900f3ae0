package cluster

import (
	"os"
	"path/filepath"
	"testing"
)

// Installs, refusals and other failures are told apart; lines that are
// not the hook's, or not JSON, are skipped.
func TestCountSnapshots(t *testing.T) {
	log := `### cluster: starting node 1
{"msg":"jepsen snapshot sent","peer":4,"installed":true}
{"msg":"jepsen snapshot sent","peer":4,"installed":true}
{"msg":"jepsen snapshot sent","peer":2,"installed":true}
{"msg":"jepsen snapshot sent","peer":3,"installed":false,"err":"transport: send snapshot to p3: transport: snapshot rejected by receiver: log: snapshot from p1 refused"}
{"msg":"jepsen snapshot sent","peer":3,"installed":false,"err":"transport: peer unreachable: dial tcp: connect: invalid argument"}
{"msg":"jepsen snapshot received","from":1}
{"msg":"node started"}
{"msg":"jepsen snapshot sent","peer":
`
	path := filepath.Join(t.TempDir(), "n1.log")
	if err := os.WriteFile(path, []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	got := SnapshotCounts{InstalledTo: map[int]int{}}
	if err := countSnapshots(path, &got); err != nil {
		t.Fatal(err)
	}
	if got.Installed != 3 || got.InstalledTo[4] != 2 || got.InstalledTo[2] != 1 || got.Refused != 1 || got.Failed != 1 || got.Received != 1 {
		t.Fatalf("counts %+v", got)
	}
	if err := countSnapshots(filepath.Join(t.TempDir(), "absent.log"), &got); err != nil {
		t.Fatalf("a node that never started has no log: %v", err)
	}
}
