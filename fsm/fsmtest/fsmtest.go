// Package fsmtest is the conformance suite of package fsm's state machines
// that keep their own state: TestDiskFSM runs an embedder's fsm.DiskFSM
// through the contract the package documentation states, on real
// directories. Run it from a test of the state machine's package:
//
//	func TestConformance(t *testing.T) {
//		fsmtest.TestDiskFSM(t, fsmtest.Suite{Open: open, Command: command})
//	}
//
// What it checks:
//
//   - an empty directory opens as an empty state at index 0;
//   - the index Sync returns survives a reopen, with exactly the state of
//     the entries up to it;
//   - entries applied after the last Sync may be lost in a crash (a copy
//     of the directory taken while the state machine is open, then
//     opened) or at a Close, but never half-applied: what opens is the
//     state of exactly the entries up to its DurableIndex, which lies
//     between the last Sync and the last entry applied, and applying the
//     entries after it again arrives at the same state as never stopping;
//   - a Snapshot taken while entries go on being applied (Persist on
//     another goroutine) restores, on another state machine, to the
//     state of the entries up to the snapshot, whose index DurableIndex
//     and Sync then report, before and after a reopen;
//   - a Restore from a truncated stream, or from a reader that fails —
//     midway, or at its end in place of io.EOF — fails, and leaves the
//     previous state and durable index intact, in memory and after a
//     reopen (and a stream with a flipped byte too, with
//     Suite.DetectsCorruption);
//   - determinism: state machines applying the same entries, one at a time
//     or in batches (fsm.BatchFSM), with Syncs and reopens at different
//     points, reach the same state, and their snapshots restore to it;
//   - a snapshot that reports its size (fsm.SizedSnapshot), wherever the
//     suite persists one, writes exactly that many bytes;
//   - for an fsm.StagingFSM: a Stage, while entries go on being applied,
//     leaves the state as it was, in memory and after a crash, and what it
//     staged survives the crash; InstallStaged then replaces the state
//     with the snapshot's, durably, in the process that staged it and in
//     one that reopened after a crash, and nothing is staged afterwards;
//     a Stage from a truncated, failing or (Suite.DetectsCorruption)
//     damaged stream, or from one of another index than it is given,
//     fails and stages nothing, even where something was staged before;
//     DiscardStaged removes what is staged, for good.
package fsmtest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/fsm"
)

// Suite describes the state machine under test.
type Suite struct {
	// Open opens the state machine kept in dir, creating an empty one if
	// dir is empty or does not exist. The Closer releases it (its files,
	// its locks) so that dir can be opened again; the suite calls it
	// exactly once per Open.
	Open func(dir string) (fsm.DiskFSM, io.Closer, error)
	// Command returns the data of a command the state machine accepts and
	// that changes its state, drawn from r. The suite interleaves entries
	// with empty Data (the log's own) among them.
	Command func(r *rand.Rand) []byte
	// State describes f's state such that two state machines holding the
	// same entries describe it alike (for instance, the answers to
	// queries that cover the whole state). Nil compares the bytes Persist
	// writes, which must then be the same for the same entries.
	State func(f fsm.DiskFSM) ([]byte, error)
	// Entries is how many entries a check applies (default 200).
	Entries int
	// Seed seeds the commands and the points at which the suite syncs,
	// crashes and snapshots (default 1).
	Seed uint64
	// DetectsCorruption: Restore refuses a stream with a byte flipped (it
	// carries a checksum). Not required, snapshot stores keep a digest of
	// their own; with it, the suite checks it.
	DetectsCorruption bool
}

// TestDiskFSM runs the suite.
func TestDiskFSM(t *testing.T, s Suite) {
	if s.Open == nil || s.Command == nil {
		t.Fatal("fsmtest: Suite.Open and Suite.Command are required")
	}
	if s.Entries == 0 {
		s.Entries = 200
	}
	if s.Entries < 16 {
		t.Fatalf("fsmtest: Suite.Entries %d: want at least 16", s.Entries)
	}
	if s.Seed == 0 {
		s.Seed = 1
	}
	h := &harness{s: s}
	h.entries = makeEntries(s, 2*s.Entries)
	t.Run("Empty", h.empty)
	t.Run("SyncSurvivesReopen", h.syncSurvivesReopen)
	t.Run("UnsyncedLostWhole", h.unsyncedLostWhole)
	t.Run("SnapshotRestore", h.snapshotRestore)
	t.Run("FailedRestoreKeepsState", h.failedRestore)
	t.Run("Deterministic", h.deterministic)
	t.Run("Staging", h.staging)
	t.Run("FailedStageStagesNothing", h.failedStage)
}

type harness struct {
	s       Suite
	entries []fsm.Entry // entries[i] has index i+1
	// ref[i] is the state after entries 1..i, computed once.
	ref [][]byte
}

// machine is a state machine open in a directory.
type machine struct {
	dir    string
	f      fsm.DiskFSM
	closer io.Closer
	// applied is the index of the last entry given to it.
	applied uint64
}

// makeEntries returns n entries for indexes 1..n: commands, and now and
// then an entry of the log's own (empty Data).
func makeEntries(s Suite, n int) []fsm.Entry {
	r := rand.New(rand.NewPCG(s.Seed, 0x5eed))
	es := make([]fsm.Entry, n)
	for i := range es {
		idx := uint64(i + 1)
		es[i] = fsm.Entry{Index: idx, Stamp: stampAt(idx)}
		if r.IntN(8) != 0 {
			es[i].Data = s.Command(r)
		}
	}
	return es
}

// stampAt is a well-formed stamp, distinct and increasing with i.
func stampAt(i uint64) edict.Stamp {
	return edict.Stamp{
		Epoch:   1,
		QT:      edict.QT{{Process: 1, T: edict.Time{Incarnation: 1, Nanos: 1000}}, {Process: 2, T: edict.Time{Incarnation: 1, Nanos: 1000}}},
		Counter: i,
	}
}

func (h *harness) open(t *testing.T, dir string) *machine {
	t.Helper()
	f, c, err := h.s.Open(dir)
	if err != nil {
		t.Fatalf("open %s: %v", dir, err)
	}
	m := &machine{dir: dir, f: f, closer: c}
	m.applied = h.durable(t, m)
	return m
}

func (h *harness) close(t *testing.T, m *machine) {
	t.Helper()
	if err := m.closer.Close(); err != nil {
		t.Fatalf("close %s: %v", m.dir, err)
	}
}

func (h *harness) reopen(t *testing.T, m *machine) *machine {
	t.Helper()
	h.close(t, m)
	return h.open(t, m.dir)
}

func (h *harness) durable(t *testing.T, m *machine) uint64 {
	t.Helper()
	d, err := m.f.DurableIndex()
	if err != nil {
		t.Fatalf("DurableIndex: %v", err)
	}
	return d
}

func (h *harness) sync(t *testing.T, m *machine) {
	t.Helper()
	d, err := m.f.Sync()
	if err != nil {
		t.Fatalf("Sync after index %d: %v", m.applied, err)
	}
	if d != m.applied {
		t.Fatalf("Sync returned %d, but the last entry applied is %d", d, m.applied)
	}
	if got := h.durable(t, m); got != d {
		t.Fatalf("DurableIndex is %d right after Sync returned %d", got, d)
	}
}

// applyTo applies the entries after m.applied up to index to, one at a
// time, or in batches of random sizes if batch is set and the state
// machine takes batches.
func (h *harness) applyTo(t *testing.T, m *machine, to uint64, batch *rand.Rand) {
	t.Helper()
	if to > uint64(len(h.entries)) {
		t.Fatalf("fsmtest: index %d beyond the %d entries made", to, len(h.entries))
	}
	b, batches := m.f.(fsm.BatchFSM)
	for m.applied < to {
		if batches && batch != nil {
			n := min(uint64(1+batch.IntN(16)), to-m.applied)
			es := cloneEntries(h.entries[m.applied : m.applied+n])
			if got := len(b.ApplyBatch(es)); got != len(es) {
				t.Fatalf("ApplyBatch of %d entries returned %d responses", len(es), got)
			}
			scribble(es)
			m.applied += n
			continue
		}
		es := cloneEntries(h.entries[m.applied : m.applied+1])
		m.f.Apply(es[0])
		scribble(es)
		m.applied++
	}
}

// cloneEntries copies es' Data, which scribble overwrites once Apply has
// returned: the log may reuse it, and a state machine must copy what it
// keeps.
func cloneEntries(es []fsm.Entry) []fsm.Entry {
	out := make([]fsm.Entry, len(es))
	for i, e := range es {
		out[i] = e
		out[i].Data = bytes.Clone(e.Data)
	}
	return out
}

func scribble(es []fsm.Entry) {
	for _, e := range es {
		for i := range e.Data {
			e.Data[i] = 0xa5
		}
	}
}

// state describes m's state (Suite.State, or its Persist bytes).
func (h *harness) state(t *testing.T, f fsm.DiskFSM) []byte {
	t.Helper()
	if h.s.State != nil {
		b, err := h.s.State(f)
		if err != nil {
			t.Fatalf("State: %v", err)
		}
		return b
	}
	return persist(t, f)
}

func persist(t *testing.T, f fsm.FSM) []byte {
	t.Helper()
	s, err := f.Snapshot()
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	defer s.Release()
	var buf bytes.Buffer
	if err := s.Persist(&buf); err != nil {
		t.Fatalf("Persist: %v", err)
	}
	checkSize(t, s, buf.Len())
	return buf.Bytes()
}

// checkSize checks that a snapshot that reports its size wrote n bytes.
func checkSize(t *testing.T, s fsm.Snapshot, n int) {
	t.Helper()
	if sz, ok := s.(fsm.SizedSnapshot); ok && sz.Size() != int64(n) {
		t.Fatalf("SizedSnapshot: Size reports %d bytes, Persist wrote %d", sz.Size(), n)
	}
}

// refState is the state after the entries up to index, from a state
// machine that applied them one at a time, never stopping.
func (h *harness) refState(t *testing.T, index uint64) []byte {
	t.Helper()
	if h.ref == nil {
		m := h.open(t, t.TempDir())
		defer h.close(t, m)
		if m.applied != 0 {
			t.Fatalf("a new directory opens at index %d, want 0", m.applied)
		}
		h.ref = append(h.ref, h.state(t, m.f))
		for i := range h.entries {
			h.applyTo(t, m, uint64(i+1), nil)
			h.ref = append(h.ref, h.state(t, m.f))
		}
	}
	return h.ref[index]
}

func (h *harness) checkState(t *testing.T, m *machine, index uint64, what string) {
	t.Helper()
	if got := h.state(t, m.f); !bytes.Equal(got, h.refState(t, index)) {
		t.Fatalf("%s: the state is not that of the entries up to %d", what, index)
	}
}

func (h *harness) rng(salt uint64) *rand.Rand { return rand.New(rand.NewPCG(h.s.Seed, salt)) }

func (h *harness) empty(t *testing.T) {
	m := h.open(t, filepath.Join(t.TempDir(), "new"))
	if m.applied != 0 {
		t.Fatalf("a new directory opens at index %d, want 0", m.applied)
	}
	h.sync(t, m)
	h.checkState(t, m, 0, "a new state machine")
	m = h.reopen(t, m)
	if m.applied != 0 {
		t.Fatalf("an empty state reopens at index %d, want 0", m.applied)
	}
	h.close(t, m)
}

func (h *harness) syncSurvivesReopen(t *testing.T) {
	n := uint64(h.s.Entries)
	m := h.open(t, t.TempDir())
	h.applyTo(t, m, n/2, nil)
	h.sync(t, m)
	m = h.reopen(t, m)
	if m.applied != n/2 {
		t.Fatalf("synced at %d, reopened at %d", n/2, m.applied)
	}
	h.checkState(t, m, n/2, "reopened after a Sync")
	h.applyTo(t, m, n, nil)
	h.sync(t, m)
	m = h.reopen(t, m)
	if m.applied != n {
		t.Fatalf("synced at %d, reopened at %d", n, m.applied)
	}
	h.checkState(t, m, n, "reopened after a second Sync")
	h.close(t, m)
}

// unsyncedLostWhole crashes (a copy of the open directory) and closes a
// state machine at random points after its last Sync.
func (h *harness) unsyncedLostWhole(t *testing.T) {
	r := h.rng(1)
	n := uint64(h.s.Entries)
	m := h.open(t, t.TempDir())
	synced := uint64(0)
	for round := range 6 {
		h.applyTo(t, m, min(n, m.applied+1+uint64(r.IntN(int(n/4)))), nil)
		if r.IntN(2) == 0 {
			h.sync(t, m)
			synced = m.applied
			h.applyTo(t, m, min(n, m.applied+uint64(r.IntN(int(n/8)+1))), nil)
		}
		applied := m.applied
		// A crash: the directory as it is on disk now, the machine open.
		img := filepath.Join(t.TempDir(), fmt.Sprintf("crash-%d", round))
		copyDir(t, m.dir, img)
		c := h.open(t, img)
		h.checkPrefix(t, c, synced, applied, "after a crash")
		h.applyTo(t, c, applied, nil)
		h.checkState(t, c, applied, "after a crash and the lost entries applied again")
		h.close(t, c)
		// A Close without a Sync.
		m = h.reopen(t, m)
		h.checkPrefix(t, m, synced, applied, "after a Close without Sync")
		synced = m.applied // what it reopened with is durable
		h.applyTo(t, m, applied, nil)
		h.checkState(t, m, applied, "after a reopen and the lost entries applied again")
	}
	h.close(t, m)
}

// checkPrefix checks that m, reopened after its last Sync at synced and
// its last Apply at applied, holds the state of exactly the entries up to
// its durable index, somewhere between the two.
func (h *harness) checkPrefix(t *testing.T, m *machine, synced, applied uint64, what string) {
	t.Helper()
	if m.applied < synced || m.applied > applied {
		t.Fatalf("%s: durable index %d, want between the last Sync's %d and the last entry applied, %d", what, m.applied, synced, applied)
	}
	h.checkState(t, m, m.applied, what)
}

func (h *harness) snapshotRestore(t *testing.T) {
	r := h.rng(2)
	n := uint64(h.s.Entries)
	a := h.open(t, t.TempDir())
	k := n/2 + uint64(r.IntN(int(n/4)))
	h.applyTo(t, a, k, nil)
	snap, err := a.f.Snapshot()
	if err != nil {
		t.Fatalf("Snapshot at %d: %v", k, err)
	}
	// Persist runs while the state machine goes on applying and syncing,
	// as the log runs it.
	var buf bytes.Buffer
	done := make(chan error, 1)
	go func() { done <- snap.Persist(&buf) }()
	h.applyTo(t, a, n, nil)
	h.sync(t, a)
	if err := <-done; err != nil {
		t.Fatalf("Persist of the snapshot at %d: %v", k, err)
	}
	checkSize(t, snap, buf.Len())
	snap.Release()
	data := buf.Bytes()

	// b holds other entries (fewer), and is replaced whole.
	b := h.open(t, t.TempDir())
	h.applyTo(t, b, k/3, nil)
	h.sync(t, b)
	h.applyTo(t, b, k/2, nil)
	if err := b.f.Restore(bytes.NewReader(data)); err != nil {
		t.Fatalf("Restore of a snapshot at %d: %v", k, err)
	}
	if d := h.durable(t, b); d != k {
		t.Fatalf("restored a snapshot at %d: DurableIndex %d", k, d)
	}
	b.applied = k
	h.checkState(t, b, k, "restored")
	h.sync(t, b)
	b = h.reopen(t, b)
	if b.applied != k {
		t.Fatalf("restored a snapshot at %d and reopened: DurableIndex %d (Restore must be durable)", k, b.applied)
	}
	h.checkState(t, b, k, "restored and reopened")
	h.applyTo(t, b, n, nil)
	h.checkState(t, b, n, "restored, then the entries after the snapshot applied")
	h.close(t, b)

	// And a restore into a new directory.
	c := h.open(t, t.TempDir())
	if err := c.f.Restore(bytes.NewReader(data)); err != nil {
		t.Fatalf("Restore of a snapshot at %d into an empty state: %v", k, err)
	}
	c.applied = h.durable(t, c)
	if c.applied != k {
		t.Fatalf("restored a snapshot at %d into an empty state: DurableIndex %d", k, c.applied)
	}
	h.checkState(t, c, k, "restored into an empty state")
	h.close(t, c)
	h.close(t, a)
}

func (h *harness) failedRestore(t *testing.T) {
	r := h.rng(3)
	n := uint64(h.s.Entries)
	src := h.open(t, t.TempDir())
	h.applyTo(t, src, n, nil)
	data := persist(t, src.f)
	h.close(t, src)
	if len(data) < 2 {
		t.Fatalf("a snapshot of %d entries is %d bytes", n, len(data))
	}

	m := h.open(t, t.TempDir())
	synced := n / 4
	h.applyTo(t, m, synced, nil)
	h.sync(t, m)
	h.applyTo(t, m, n/2, nil) // applied, not synced
	applied := m.applied

	type attempt struct {
		what string
		r    io.Reader
	}
	var attempts []attempt
	for _, cut := range []int{0, 1, len(data) / 2, len(data) - 1, 1 + r.IntN(len(data)-1)} {
		attempts = append(attempts, attempt{fmt.Sprintf("truncated to %d of %d bytes", cut, len(data)), bytes.NewReader(data[:cut])})
	}
	for _, at := range []int{0, len(data) / 3, len(data) - 1, len(data)} {
		attempts = append(attempts, attempt{fmt.Sprintf("a reader failing after %d of %d bytes", at, len(data)),
			io.MultiReader(bytes.NewReader(data[:at]), failingReader{})})
	}
	if h.s.DetectsCorruption {
		for _, at := range []int{0, len(data) / 2, len(data) - 1, r.IntN(len(data))} {
			bad := bytes.Clone(data)
			bad[at] ^= 0x40
			attempts = append(attempts, attempt{fmt.Sprintf("byte %d of %d flipped", at, len(data)), bytes.NewReader(bad)})
		}
	}
	// A state machine may make applied entries durable before a Sync
	// asks (a database committing in batches, or before it starts a
	// Restore): the durable index may rise up to what was applied, never
	// fall, and never pass it.
	durable := synced
	for _, a := range attempts {
		if err := m.f.Restore(a.r); err == nil {
			t.Fatalf("Restore from a stream %s succeeded", a.what)
		}
		d := h.durable(t, m)
		if d < durable || d > applied {
			t.Fatalf("a failed Restore (%s) moved the durable index from %d to %d (applied: %d)", a.what, durable, d, applied)
		}
		durable = d
		h.checkState(t, m, applied, "after a failed Restore ("+a.what+")")
	}
	// On disk too: the state of some index from the durable one on.
	m = h.reopen(t, m)
	if m.applied < durable || m.applied > applied {
		t.Fatalf("after failed Restores, reopened at %d, want one from the durable %d to the applied %d", m.applied, durable, applied)
	}
	h.checkState(t, m, m.applied, "reopened after failed Restores")
	// And it still restores a whole stream.
	if err := m.f.Restore(bytes.NewReader(data)); err != nil {
		t.Fatalf("Restore after failed ones: %v", err)
	}
	m.applied = n
	h.checkState(t, m, n, "restored after failed Restores")
	h.close(t, m)
}

// failingReader fails every read, in place of io.EOF too.
type failingReader struct{}

var errInjected = errors.New("fsmtest: injected read error")

func (failingReader) Read([]byte) (int, error) { return 0, errInjected }

func (h *harness) deterministic(t *testing.T) {
	r := h.rng(4)
	n := uint64(2 * h.s.Entries)
	// a applies one entry at a time and never stops (the reference); b
	// in batches, syncing, crashing and reopening at random points.
	b := h.open(t, t.TempDir())
	for b.applied < n {
		h.applyTo(t, b, min(n, b.applied+1+uint64(r.IntN(int(n/5)))), r)
		switch r.IntN(3) {
		case 0:
			h.sync(t, b)
		case 1:
			b = h.reopen(t, b) // what was not synced is applied again
		}
	}
	h.checkState(t, b, n, "applied in batches with reopens")
	data := persist(t, b.f)
	h.close(t, b)
	c := h.open(t, t.TempDir())
	if err := c.f.Restore(bytes.NewReader(data)); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	c.applied = n
	h.checkState(t, c, n, "restored from a snapshot of a state machine that applied in batches")
	h.close(t, c)
}

// copyDir copies the files under src to dst, as a crash would leave them
// for the next start (what the state machine wrote, synced or not: a
// process crash, not a power loss).
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o700)
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s: not a regular file", p)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o600)
	})
	if err != nil {
		t.Fatalf("copy %s: %v", src, err)
	}
}

// stager is m's state machine as an fsm.StagingFSM; the test is skipped
// if it is not one.
func stager(t *testing.T, m *machine) fsm.StagingFSM {
	t.Helper()
	st, ok := m.f.(fsm.StagingFSM)
	if !ok {
		t.Skip("not an fsm.StagingFSM")
	}
	return st
}

// snapshotAt is a snapshot of the entries up to k, from a state machine
// of its own.
func (h *harness) snapshotAt(t *testing.T, k uint64) []byte {
	t.Helper()
	src := h.open(t, t.TempDir())
	defer h.close(t, src)
	h.applyTo(t, src, k, nil)
	return persist(t, src.f)
}

func (h *harness) installStaged(t *testing.T, m *machine, k uint64, what string) {
	t.Helper()
	if err := stager(t, m).InstallStaged(k); err != nil {
		t.Fatalf("%s: InstallStaged(%d): %v", what, k, err)
	}
	if d := h.durable(t, m); d != k {
		t.Fatalf("%s: installed the snapshot staged at %d: DurableIndex %d", what, k, d)
	}
	m.applied = k
	h.checkState(t, m, k, what+": installed")
}

func (h *harness) staging(t *testing.T) {
	r := h.rng(5)
	n := uint64(h.s.Entries)
	m := h.open(t, t.TempDir())
	st := stager(t, m)
	k := n/2 + uint64(r.IntN(int(n/4)))
	data := h.snapshotAt(t, k)

	synced := k / 4
	h.applyTo(t, m, synced, nil)
	h.sync(t, m)
	// The stream is staged while entries go on being applied, as the log
	// stages it.
	done := make(chan error, 1)
	go func() { done <- st.Stage(k, bytes.NewReader(data)) }()
	h.applyTo(t, m, k/2, nil)
	if err := <-done; err != nil {
		t.Fatalf("Stage of a snapshot at %d: %v", k, err)
	}
	applied := m.applied
	h.checkState(t, m, applied, "after a Stage")
	if d := h.durable(t, m); d < synced || d > applied {
		t.Fatalf("a Stage moved the durable index to %d (synced %d, applied %d)", d, synced, applied)
	}

	// A crash now: the old state opens, with the snapshot staged beside
	// it, which InstallStaged then installs.
	img := filepath.Join(t.TempDir(), "crash-staged")
	copyDir(t, m.dir, img)
	c := h.open(t, img)
	h.checkPrefix(t, c, synced, applied, "after a crash with a snapshot staged")
	h.installStaged(t, c, k, "after a crash with a snapshot staged")
	c = h.reopen(t, c)
	if c.applied != k {
		t.Fatalf("installed a snapshot staged at %d and reopened: DurableIndex %d (InstallStaged must be durable)", k, c.applied)
	}
	h.checkState(t, c, k, "installed after a crash, and reopened")
	if err := stager(t, c).InstallStaged(k); err == nil {
		t.Fatalf("InstallStaged(%d) succeeded a second time: something was still staged", k)
	}
	h.close(t, c)

	// And in the process that staged it.
	h.installStaged(t, m, k, "staged")
	img = filepath.Join(t.TempDir(), "crash-installed")
	copyDir(t, m.dir, img)
	c = h.open(t, img)
	if c.applied != k {
		t.Fatalf("a crash after InstallStaged(%d) opens at %d", k, c.applied)
	}
	h.checkState(t, c, k, "a crash after InstallStaged")
	if err := stager(t, c).InstallStaged(k); err == nil {
		t.Fatalf("InstallStaged(%d) succeeded after a crash that followed the install: something was still staged", k)
	}
	h.close(t, c)
	h.applyTo(t, m, n, nil)
	h.checkState(t, m, n, "installed, then the entries after the snapshot applied")
	m = h.reopen(t, m)
	if m.applied < k || m.applied > n {
		t.Fatalf("installed at %d, applied to %d, reopened at %d", k, n, m.applied)
	}
	h.checkState(t, m, m.applied, "installed, applied after it, and reopened")

	// A Stage discarded stays discarded, after a reopen too.
	if err := stager(t, m).Stage(k, bytes.NewReader(data)); err != nil {
		t.Fatalf("Stage: %v", err)
	}
	if err := stager(t, m).DiscardStaged(); err != nil {
		t.Fatalf("DiscardStaged: %v", err)
	}
	if err := stager(t, m).InstallStaged(k); err == nil {
		t.Fatalf("InstallStaged(%d) succeeded after DiscardStaged", k)
	}
	before := m.applied
	m = h.reopen(t, m)
	if err := stager(t, m).InstallStaged(k); err == nil {
		t.Fatalf("InstallStaged(%d) succeeded after DiscardStaged and a reopen", k)
	}
	if m.applied != before {
		t.Fatalf("a discarded Stage and a reopen moved the durable index from %d to %d", before, m.applied)
	}
	h.checkState(t, m, m.applied, "after DiscardStaged and a reopen")
	h.close(t, m)
}

func (h *harness) failedStage(t *testing.T) {
	r := h.rng(6)
	n := uint64(h.s.Entries)
	m := h.open(t, t.TempDir())
	st := stager(t, m)
	k := n - uint64(r.IntN(int(n/4)))
	data := h.snapshotAt(t, k)
	h.applyTo(t, m, n/4, nil)
	h.sync(t, m)
	h.applyTo(t, m, n/3, nil)
	applied := m.applied

	type attempt struct {
		what  string
		index uint64
		r     io.Reader
	}
	var attempts []attempt
	for _, cut := range []int{0, 1, len(data) / 2, len(data) - 1} {
		attempts = append(attempts, attempt{fmt.Sprintf("truncated to %d of %d bytes", cut, len(data)), k, bytes.NewReader(data[:cut])})
	}
	for _, at := range []int{0, len(data) / 2, len(data)} {
		attempts = append(attempts, attempt{fmt.Sprintf("a reader failing after %d of %d bytes", at, len(data)), k,
			io.MultiReader(bytes.NewReader(data[:at]), failingReader{})})
	}
	if h.s.DetectsCorruption {
		for _, at := range []int{0, len(data) / 2, len(data) - 1} {
			bad := bytes.Clone(data)
			bad[at] ^= 0x40
			attempts = append(attempts, attempt{fmt.Sprintf("byte %d of %d flipped", at, len(data)), k, bytes.NewReader(bad)})
		}
	}
	attempts = append(attempts, attempt{fmt.Sprintf("a whole snapshot of %d staged as one of %d", k, k+1), k + 1, bytes.NewReader(data)})
	for _, a := range attempts {
		// Something staged before, which the failed Stage must not leave.
		if err := st.Stage(k, bytes.NewReader(data)); err != nil {
			t.Fatalf("Stage: %v", err)
		}
		if err := st.Stage(a.index, a.r); err == nil {
			t.Fatalf("Stage from a stream %s succeeded", a.what)
		}
		h.checkState(t, m, applied, "after a failed Stage ("+a.what+")")
		for _, i := range []uint64{k, k + 1} {
			if err := st.InstallStaged(i); err == nil {
				t.Fatalf("InstallStaged(%d) succeeded after a failed Stage (%s)", i, a.what)
			}
		}
		h.checkState(t, m, applied, "after a failed Stage ("+a.what+") and a refused InstallStaged")
	}
	m = h.reopen(t, m)
	if err := stager(t, m).InstallStaged(k); err == nil {
		t.Fatal("InstallStaged succeeded after failed Stages and a reopen")
	}
	h.checkState(t, m, m.applied, "reopened after failed Stages")
	h.close(t, m)
}
