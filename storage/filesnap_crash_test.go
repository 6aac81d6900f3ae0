package storage

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
)

// crashStop is the panic with which the crash hook stops a sequence.
type crashStop struct{ step string }

// runCrashingAt runs f with the crash hook set to stop it just before its
// step k (counting from 0), as a process killed there would stop: nothing
// after it runs, not even clean-up. k < 0 never stops. It returns the steps
// taken and the step it stopped before ("" if it ran to the end).
func runCrashingAt(k int, f func()) (steps []string, stoppedAt string) {
	crashHook = func(step string) {
		if len(steps) == k {
			panic(crashStop{step})
		}
		steps = append(steps, step)
	}
	defer func() {
		crashHook = nil
		if r := recover(); r != nil {
			c, ok := r.(crashStop)
			if !ok {
				panic(r)
			}
			stoppedAt = c.step
		}
	}()
	f()
	return steps, ""
}

// snapCrashCase is a sequence of the snapshot store to stop at every step.
type snapCrashCase struct {
	name   string
	retain int // of the store reopened after the crash
	// setup fills dir with the state before the sequence; it returns the
	// data of each complete snapshot, by ID.
	setup func(t *testing.T, dir string) map[string][]byte
	// run is the sequence. It records the data of snapshots it creates in
	// data, before they can be published.
	run func(t *testing.T, dir string, data map[string][]byte)
}

// snapCrashCases covers every sequence of FileSnapshotStore that changes
// the folder: creating and publishing a snapshot (then retiring old ones),
// deleting one, cancelling one, and the clean-up at open of what such
// sequences leave when cut short.
func snapCrashCases() []snapCrashCase {
	three := func(t *testing.T, dir string) map[string][]byte {
		s := mustSnapStore(t, dir, 3)
		data := map[string][]byte{}
		for i := range uint64(3) {
			writeTestSnap(t, s, 10*(i+1), data, 1)
		}
		return data
	}
	return []snapCrashCase{
		{
			name: "create, publish and retire three", retain: 1, setup: three,
			run: func(t *testing.T, dir string, data map[string][]byte) {
				writeTestSnap(t, mustSnapStore(t, dir, 1), 40, data, 3)
			},
		},
		{
			name: "create and publish an empty snapshot", retain: 4, setup: three,
			run: func(t *testing.T, dir string, data map[string][]byte) {
				writeTestSnap(t, mustSnapStore(t, dir, 4), 40, data, 0)
			},
		},
		{
			name: "delete", retain: 3, setup: three,
			run: func(t *testing.T, dir string, data map[string][]byte) {
				s := mustSnapStore(t, dir, 3)
				ms, err := s.List()
				require.NoError(t, err)
				require.NoError(t, s.Delete(ms[1].ID))
			},
		},
		{
			name: "cancel", retain: 3, setup: three,
			run: func(t *testing.T, dir string, data map[string][]byte) {
				sink, err := mustSnapStore(t, dir, 3).Create(testSnapMeta(40))
				require.NoError(t, err)
				_, err = sink.Write([]byte("never published"))
				require.NoError(t, err)
				require.NoError(t, sink.Cancel())
			},
		},
		{
			// Leftovers of a create and of a delete cut short; opening
			// the store removes them, and may itself be cut short.
			name: "open after crashes", retain: 3,
			setup: func(t *testing.T, dir string) map[string][]byte {
				data := three(t, dir)
				s := mustSnapStore(t, dir, 3)
				_, at := runCrashingAt(5, func() { writeTestSnap(t, s, 40, map[string][]byte{}, 1) })
				require.NotEmpty(t, at)
				ms, err := s.List()
				require.NoError(t, err)
				steps, at := runCrashingAt(3, func() { require.NoError(t, s.Delete(ms[2].ID)) })
				require.NotEmpty(t, at, "steps %q", steps)
				delete(data, ms[2].ID)
				return data
			},
			run: func(t *testing.T, dir string, data map[string][]byte) { mustSnapStore(t, dir, 3) },
		},
	}
}

func TestSnapshotCrashAtEveryStep(t *testing.T) {
	for _, c := range snapCrashCases() {
		t.Run(c.name, func(t *testing.T) {
			// The state before the sequence is built once and copied.
			tmpl := t.TempDir()
			data := c.setup(t, tmpl)
			fresh := func() (string, map[string][]byte) {
				dir := t.TempDir()
				copyTree(t, tmpl, dir)
				return dir, maps.Clone(data)
			}
			dir, d := fresh()
			all, _ := runCrashingAt(-1, func() { c.run(t, dir, d) })
			require.NotEmpty(t, all)
			for k := 0; k <= len(all); k++ {
				dir, d := fresh()
				before := slices.Sorted(maps.Keys(d))
				steps, at := runCrashingAt(k, func() { c.run(t, dir, d) })
				require.Equal(t, k < len(all), at != "")
				where := "after the last step"
				if at != "" {
					where = fmt.Sprintf("before step %d of %d (%s)", k, len(all), at)
				}
				checkSnapshotsAfterCrash(t, dir, c.retain, expectedSnapshots(before, steps), d, where)
			}
			t.Logf("stopped before each of %d steps: %q", len(all), all)
		})
	}
}

// copyTree copies the files and folders in src into dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	require.NoError(t, os.CopyFS(dst, os.DirFS(src)))
}

// expectedSnapshots is the set of complete snapshots after steps: those
// before, plus those published, less those whose removal began (retired,
// or, removed in place, the first of its files removed).
func expectedSnapshots(before, steps []string) []string {
	set := map[string]bool{}
	for _, id := range before {
		set[id] = true
	}
	for _, st := range steps {
		id, what, ok := strings.Cut(strings.TrimPrefix(st, "snapshot "), ": ")
		switch {
		case !ok || !strings.HasPrefix(st, "snapshot "):
		case what == "publish":
			set[id] = true
		case what == "retire" || strings.HasPrefix(what, "remove "):
			delete(set, id)
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// checkSnapshotsAfterCrash reopens dir as a process starting after the
// crash would, and requires that it opens, lists exactly want, reads each
// back intact, holds nothing else, and takes a new snapshot. A failure is
// reported and the caller goes on to the next crash point.
func checkSnapshotsAfterCrash(t *testing.T, dir string, retain int, want []string, data map[string][]byte, where string) {
	t.Helper()
	s, err := NewFileSnapshotStore(dir, retain)
	if !assert.NoError(t, err, "reopen %s", where) {
		return
	}
	ms, err := s.List()
	if !assert.NoError(t, err, "list %s", where) {
		return
	}
	var got []string
	for _, m := range ms {
		got = append(got, m.ID)
	}
	slices.Sort(got)
	if !assert.Equal(t, want, got, "snapshots listed %s", where) {
		return
	}
	for _, id := range got {
		_, r, err := s.Open(id)
		if !assert.NoError(t, err, "open snapshot %s %s", id, where) {
			return
		}
		b, err := io.ReadAll(r)
		require.NoError(t, r.Close())
		if !assert.NoError(t, err, "read snapshot %s %s", id, where) ||
			!assert.True(t, bytes.Equal(data[id], b), "snapshot %s %s holds other data", id, where) {
			return
		}
	}
	names, err := os.ReadDir(dir)
	require.NoError(t, err)
	var left []string
	for _, n := range names {
		left = append(left, n.Name())
	}
	slices.Sort(left)
	if !assert.Equal(t, got, left, "the folder %s, once reopened, holds only the complete snapshots", where) {
		return
	}
	id := writeTestSnap(t, s, 1000, data, 1)
	ms, err = s.List()
	require.NoError(t, err)
	assert.Equal(t, id, ms[0].ID, "a snapshot taken after the crash %s", where)
}

func mustSnapStore(t *testing.T, dir string, retain int) *FileSnapshotStore {
	t.Helper()
	s, err := NewFileSnapshotStore(dir, retain)
	require.NoError(t, err)
	return s
}

func testSnapMeta(index uint64) wire.SnapshotMeta {
	return wire.SnapshotMeta{Index: index, Stamp: testStamp(index), Config: wire.EpochConfig{Epoch: 1, Members: []edict.ProcessID{1}}}
}

// writeTestSnap writes a snapshot at index in writes pieces and records its
// data in data under its ID before closing it.
func writeTestSnap(t *testing.T, s *FileSnapshotStore, index uint64, data map[string][]byte, writes int) string {
	t.Helper()
	sink, err := s.Create(testSnapMeta(index))
	require.NoError(t, err)
	var all []byte
	for i := range writes {
		p := bytes.Repeat([]byte(fmt.Sprintf("snapshot %d piece %d;", index, i)), 100)
		_, err := sink.Write(p)
		require.NoError(t, err)
		all = append(all, p...)
	}
	data[sink.ID()] = all
	require.NoError(t, sink.Close())
	return sink.ID()
}

// TestSnapshotDurableOrder pins the order of the steps. A crash of the
// process at any of them is TestSnapshotCrashAtEveryStep's; a power loss may
// in addition undo a step that no fsync has made durable, and this order is
// what keeps that from exposing an incomplete "<id>" folder: the folder's
// contents are durable before it is published, the publish is durable before
// Close returns, and a retirement is durable before any file of the retired
// snapshot is removed.
func TestSnapshotDurableOrder(t *testing.T) {
	dir := t.TempDir()
	s := mustSnapStore(t, dir, 1)
	data := map[string][]byte{}
	old := writeTestSnap(t, s, 10, data, 1)
	var id string
	steps, _ := runCrashingAt(-1, func() { id = writeTestSnap(t, s, 20, data, 2) })
	for i := range steps {
		steps[i] = strings.NewReplacer(id, "new", old, "old").Replace(steps[i])
	}
	require.Equal(t, []string{
		"snapshot new: create folder",
		"snapshot new: create data",
		"snapshot new: write data",
		"snapshot new: write data",
		"snapshot new: fsync data",
		"snapshot new: write meta",
		"snapshot new: fsync meta",
		"snapshot new: fsync folder",
		"snapshot new: publish",
		"snapshot new: fsync parent",
		"snapshot old: retire",
		"snapshot old: fsync parent",
		"snapshot old: remove data",
		"snapshot old: remove meta",
		"snapshot old: remove folder",
	}, steps)
}

// TestSnapshotOpenCleansOnlyLeftovers: opening removes only what a crash
// can leave ("<id>.tmp", "<id>.removing"); a published folder that is not
// complete was damaged and stays an error, and names that are not the
// store's are left alone.
func TestSnapshotOpenCleansOnlyLeftovers(t *testing.T) {
	dir := t.TempDir()
	s := mustSnapStore(t, dir, 3)
	data := map[string][]byte{}
	id := writeTestSnap(t, s, 10, data, 1)
	damaged := writeTestSnap(t, s, 20, data, 1)
	require.NoError(t, os.Remove(filepath.Join(dir, damaged, snapMetaFile)))
	leftovers := []string{id + snapTmpExt, damaged + snapRemovingExt}
	foreign := []string{"notes.tmp", "old.removing", id + ".bak"}
	for _, n := range append(leftovers, foreign...) {
		require.NoError(t, os.Mkdir(filepath.Join(dir, n), 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(dir, n, snapDataFile), []byte("x"), 0o600))
	}

	s = mustSnapStore(t, dir, 3)
	_, err := s.List()
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorContains(t, err, filepath.Join(dir, damaged, snapMetaFile))
	for _, n := range leftovers {
		require.NoDirExists(t, filepath.Join(dir, n))
	}
	for _, n := range foreign {
		require.DirExists(t, filepath.Join(dir, n))
	}
	require.NoError(t, s.Delete(damaged))
	ms, err := s.List()
	require.NoError(t, err)
	require.Len(t, ms, 1)
	require.Equal(t, id, ms[0].ID)
}
