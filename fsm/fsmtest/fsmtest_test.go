package fsmtest_test

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edictlog/edictlog/fsm"
	"github.com/edictlog/edictlog/fsm/fsmtest"
	"github.com/edictlog/edictlog/fsm/kvdisk"
	"github.com/edictlog/edictlog/fsm/kvfsm"
)

func command(r *rand.Rand) []byte {
	key := fmt.Sprintf("k%d", r.IntN(8))
	c := kvfsm.Command{Put: &kvfsm.Put{Key: key, Value: fmt.Sprintf("v%d", r.IntN(100))}}
	if r.IntN(4) == 0 {
		c = kvfsm.Command{Delete: &kvfsm.Delete{Key: key}}
	}
	b, err := kvfsm.EncodeCommand(c)
	if err != nil {
		panic(err)
	}
	return b
}

type nopCloser struct{}

func (nopCloser) Close() error { return nil }

// broken are DiskFSMs that each break one promise of the contract: the
// suite must fail on every one, naming what broke.
var broken = map[string]struct {
	open func(dir string) (fsm.DiskFSM, io.Closer, error)
	want string // in the suite's failure
}{
	// Sync reports everything durable and writes nothing.
	"sync-writes-nothing": {func(dir string) (fsm.DiskFSM, io.Closer, error) {
		kv, err := kvdisk.Open(dir)
		return &syncLies{KV: kv}, nopCloser{}, err
	}, "SyncSurvivesReopen"},
	// Restore empties the state before it reads the stream.
	"restore-not-atomic": {func(dir string) (fsm.DiskFSM, io.Closer, error) {
		kv, err := kvdisk.Open(dir)
		return &restoreClears{KV: kv}, nopCloser{}, err
	}, "FailedRestoreKeepsState"},
	// Opened, it reports one entry more durable than its store holds.
	"durable-index-ahead": {func(dir string) (fsm.DiskFSM, io.Closer, error) {
		kv, err := kvdisk.Open(dir)
		return &aheadByOne{KV: kv, lie: true}, nopCloser{}, err
	}, "SyncSurvivesReopen"},
	// ApplyBatch leaves out the last entry of every batch but its index.
	"batch-differs": {func(dir string) (fsm.DiskFSM, io.Closer, error) {
		kv, err := kvdisk.Open(dir)
		return &batchSkips{KV: kv}, nopCloser{}, err
	}, "Deterministic"},
	// Stage keeps the stream in memory: a crash loses what it staged.
	"stage-in-memory": {func(dir string) (fsm.DiskFSM, io.Closer, error) {
		kv, err := kvdisk.Open(dir)
		return &stageInMemory{KV: kv}, nopCloser{}, err
	}, "Staging"},
	// Stage restores at once: the state is replaced before the log has
	// recorded the snapshot.
	"stage-installs": {func(dir string) (fsm.DiskFSM, io.Closer, error) {
		kv, err := kvdisk.Open(dir)
		return &stageInstalls{KV: kv}, nopCloser{}, err
	}, "Staging"},
	// InstallStaged copies what is staged and leaves it staged.
	"install-keeps-staged": {func(dir string) (fsm.DiskFSM, io.Closer, error) {
		kv, err := kvdisk.Open(dir)
		return &installKeeps{KV: kv, dir: dir}, nopCloser{}, err
	}, "Staging"},
	// A snapshot reports one byte more than Persist writes.
	"size-lies": {func(dir string) (fsm.DiskFSM, io.Closer, error) {
		kv, err := kvdisk.Open(dir)
		return &sizeLies{KV: kv}, nopCloser{}, err
	}, "SizedSnapshot"},
}

type stageInMemory struct {
	*kvdisk.KV
	staged []byte
}

func (s *stageInMemory) Stage(index uint64, r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.staged = b
	return nil
}

func (s *stageInMemory) InstallStaged(index uint64) error {
	if s.staged == nil {
		return errors.New("nothing staged")
	}
	b := s.staged
	s.staged = nil
	return s.KV.Restore(strings.NewReader(string(b)))
}

func (s *stageInMemory) DiscardStaged() error { s.staged = nil; return nil }

type stageInstalls struct{ *kvdisk.KV }

func (s *stageInstalls) Stage(index uint64, r io.Reader) error { return s.KV.Restore(r) }

func (s *stageInstalls) InstallStaged(index uint64) error {
	if d, _ := s.DurableIndex(); d != index {
		return errors.New("nothing staged")
	}
	return nil
}

type installKeeps struct {
	*kvdisk.KV
	dir string
}

func (s *installKeeps) InstallStaged(index uint64) error {
	p := filepath.Join(s.dir, "staged")
	b, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	if err := s.KV.InstallStaged(index); err != nil {
		return err
	}
	return os.WriteFile(p, b, 0o600)
}

type sizeLies struct{ *kvdisk.KV }

func (s *sizeLies) Snapshot() (fsm.Snapshot, error) {
	sn, err := s.KV.Snapshot()
	if err != nil {
		return nil, err
	}
	return plusOne{sn.(fsm.SizedSnapshot)}, nil
}

type plusOne struct{ fsm.SizedSnapshot }

func (p plusOne) Size() int64 { return p.SizedSnapshot.Size() + 1 }

type syncLies struct {
	*kvdisk.KV
	claimed uint64
}

func (s *syncLies) Sync() (uint64, error) {
	s.claimed = s.Revision()
	return s.claimed, nil
}

func (s *syncLies) DurableIndex() (uint64, error) {
	d, err := s.KV.DurableIndex()
	return max(d, s.claimed), err
}

type restoreClears struct{ *kvdisk.KV }

func (r *restoreClears) Restore(rd io.Reader) error {
	empty, err := emptySnapshot()
	if err != nil {
		return err
	}
	if err := r.KV.Restore(empty); err != nil {
		return err
	}
	return r.KV.Restore(rd)
}

func emptySnapshot() (io.Reader, error) {
	s, err := kvfsm.NewKV().Snapshot()
	if err != nil {
		return nil, err
	}
	defer s.Release()
	var b strings.Builder
	if err := s.Persist(&b); err != nil {
		return nil, err
	}
	return strings.NewReader(b.String()), nil
}

type aheadByOne struct {
	*kvdisk.KV
	lie bool // until the next Sync or Restore
}

func (a *aheadByOne) DurableIndex() (uint64, error) {
	d, err := a.KV.DurableIndex()
	if a.lie && d > 0 {
		d++
	}
	return d, err
}

func (a *aheadByOne) Sync() (uint64, error) { a.lie = false; return a.KV.Sync() }

func (a *aheadByOne) Restore(r io.Reader) error { a.lie = false; return a.KV.Restore(r) }

type batchSkips struct{ *kvdisk.KV }

func (b *batchSkips) ApplyBatch(es []fsm.Entry) []any {
	out := b.KV.ApplyBatch(es[:len(es)-1])
	last := es[len(es)-1]
	last.Data = nil
	return append(out, b.KV.Apply(last))
}

// TestSuiteCatchesBrokenMachines runs the suite on each broken DiskFSM in
// a child process, which must fail naming the broken promise; and on
// kvdisk, which must pass.
func TestSuiteCatchesBrokenMachines(t *testing.T) {
	if name := os.Getenv("FSMTEST_BROKEN"); name != "" {
		return // the child's own run is TestBrokenChild
	}
	for name, b := range broken {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(os.Args[0], "-test.run=^TestBrokenChild$", "-test.count=1")
			cmd.Env = append(os.Environ(), "FSMTEST_BROKEN="+name)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) {
				t.Fatalf("the suite passed a DiskFSM whose %s (err %v):\n%s", name, err, out)
			}
			if !strings.Contains(string(out), b.want) {
				t.Fatalf("the suite failed on %s, but not in %q:\n%s", name, b.want, out)
			}
		})
	}
}

// TestBrokenChild is the child of TestSuiteCatchesBrokenMachines.
func TestBrokenChild(t *testing.T) {
	name := os.Getenv("FSMTEST_BROKEN")
	if name == "" {
		t.Skip("run by TestSuiteCatchesBrokenMachines")
	}
	fsmtest.TestDiskFSM(t, fsmtest.Suite{Open: broken[name].open, Command: command, Entries: 64})
}
