package backend

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// reopenable is a backend a test can stop and start again: a Bolt file
// closed and reopened, a Memory crashed.
type reopenable struct {
	be     Backend
	reopen func(t *testing.T, be Backend) Backend
}

func reopenables(t *testing.T) map[string]func() reopenable {
	return map[string]func() reopenable{
		"memory": func() reopenable {
			return reopenable{be: NewMemory(), reopen: func(t *testing.T, be Backend) Backend { return be.(*Memory).Crash() }}
		},
		"bolt": func() reopenable {
			path := filepath.Join(t.TempDir(), "db")
			o := BoltOptions{InitialMmapSize: 1 << 20, NoSync: true}
			b, err := OpenBolt(path, o)
			if err != nil {
				t.Fatal(err)
			}
			return reopenable{be: b, reopen: func(t *testing.T, be Backend) Backend {
				if err := be.Close(); err != nil {
					t.Fatal(err)
				}
				b, err := OpenBolt(path, o)
				if err != nil {
					t.Fatal(err)
				}
				return b
			}}
		},
	}
}

// fill commits pairs k=v of "k=v ..." into bucket a of be.
func fill(t *testing.T, be Backend, pairs string) {
	t.Helper()
	b := &Batch{}
	b.CreateBucket(bA)
	for _, kv := range strings.Fields(pairs) {
		k, v, _ := strings.Cut(kv, "=")
		b.Put(bA, []byte(k), []byte(v))
	}
	if err := be.Commit(b); err != nil {
		t.Fatal(err)
	}
}

// streamOf is the snapshot stream of a backend of the same kind holding
// pairs.
func streamOf(t *testing.T, kind func() reopenable, pairs string) []byte {
	t.Helper()
	src := kind().be
	defer src.Close()
	fill(t, src, pairs)
	tx, err := src.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Release()
	var buf bytes.Buffer
	if _, err := tx.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func current(t *testing.T, be Backend) string {
	t.Helper()
	tx, err := be.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Release()
	return dump(t, tx, bA)
}

func stagedState(t *testing.T, be Backend) string {
	t.Helper()
	rs, err := be.Staged()
	if errors.Is(err, ErrNotStaged) {
		return "(none)"
	}
	if err != nil {
		t.Fatal(err)
	}
	tx, err := rs.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Release()
	return dump(t, tx, bA)
}

// A staged database waits beside the current one, across restarts, until
// it is installed or discarded; a second Stage replaces the first; a
// plain Restore leaves it alone.
func TestStage(t *testing.T) {
	const old, one, two = "k=old ", "k=one ", "k=two "
	for name, kind := range reopenables(t) {
		t.Run(name, func(t *testing.T) {
			r := kind()
			be := r.be
			fill(t, be, "k=old")
			if got := stagedState(t, be); got != "(none)" {
				t.Fatalf("a new backend has %q staged", got)
			}
			rs, err := be.Restore(bytes.NewReader(streamOf(t, kind, "k=one")))
			if err != nil {
				t.Fatal(err)
			}
			if err := rs.Stage(); err != nil {
				t.Fatal(err)
			}
			if got := current(t, be); got != old {
				t.Fatalf("staging changed the database to %q", got)
			}
			if got := stagedState(t, be); got != one {
				t.Fatalf("staged %q, want %q", got, one)
			}
			be = r.reopen(t, be)
			if got, staged := current(t, be), stagedState(t, be); got != old || staged != one {
				t.Fatalf("reopened with %q, %q staged; want %q, %q", got, staged, old, one)
			}
			// A second Stage replaces the first; a plain Restore does not.
			rs2, err := be.Restore(bytes.NewReader(streamOf(t, kind, "k=two")))
			if err != nil {
				t.Fatal(err)
			}
			if err := rs2.Stage(); err != nil {
				t.Fatal(err)
			}
			plain, err := be.Restore(bytes.NewReader(streamOf(t, kind, "k=three")))
			if err != nil {
				t.Fatal(err)
			}
			plain.Discard()
			be = r.reopen(t, be)
			if got := stagedState(t, be); got != two {
				t.Fatalf("staged %q after a second Stage, want %q", got, two)
			}
			st, err := be.Staged()
			if err != nil {
				t.Fatal(err)
			}
			if err := st.Install(); err != nil {
				t.Fatal(err)
			}
			if got, staged := current(t, be), stagedState(t, be); got != two || staged != "(none)" {
				t.Fatalf("installed: %q, %q staged", got, staged)
			}
			be = r.reopen(t, be)
			if got, staged := current(t, be), stagedState(t, be); got != two || staged != "(none)" {
				t.Fatalf("installed and reopened: %q, %q staged", got, staged)
			}
			// Discarded, for good.
			rs3, err := be.Restore(bytes.NewReader(streamOf(t, kind, "k=four")))
			if err != nil {
				t.Fatal(err)
			}
			if err := rs3.Stage(); err != nil {
				t.Fatal(err)
			}
			if err := be.DiscardStaged(); err != nil {
				t.Fatal(err)
			}
			if got := stagedState(t, be); got != "(none)" {
				t.Fatalf("discarded, %q staged", got)
			}
			be = r.reopen(t, be)
			if got, staged := current(t, be), stagedState(t, be); got != two || staged != "(none)" {
				t.Fatalf("discarded and reopened: %q, %q staged", got, staged)
			}
			be.Close()
		})
	}
}

// A Bolt file's Restore, Stage and Install, as a process killed before
// each step leaves the directory: the directory opens with the old
// database or the new one, never another; with the new one staged, whole,
// or nothing staged; and with no temporary file left. The new database
// is staged from the moment Stage's rename happened, and the current
// one from the moment Install's rename happened.
func TestBoltStageCrashPoints(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "db")
	o := BoltOptions{InitialMmapSize: 1 << 20}
	be, err := OpenBolt(path, o)
	if err != nil {
		t.Fatal(err)
	}
	fill(t, be, "k=old")
	stream := streamOf(t, reopenables(t)["bolt"], "k=new x=y")
	type image struct{ step, dir string }
	var images []image
	crashHook = func(step string) {
		img := t.TempDir()
		copyDir(t, dir, img)
		images = append(images, image{step, img})
	}
	func() {
		defer func() { crashHook = nil }()
		rs, err := be.Restore(bytes.NewReader(stream))
		if err != nil {
			t.Fatal(err)
		}
		if err := rs.Stage(); err != nil {
			t.Fatal(err)
		}
		crashPoint("staged")
		if err := rs.Install(); err != nil {
			t.Fatal(err)
		}
		crashPoint("installed")
	}()
	if err := be.Close(); err != nil {
		t.Fatal(err)
	}
	want := map[string][2]string{
		"restore: create":    {"k=old ", "(none)"},
		"restore: write":     {"k=old ", "(none)"},
		"restore: fsync":     {"k=old ", "(none)"},
		"stage: rename":      {"k=old ", "(none)"},
		"stage: fsync dir":   {"k=old ", "k=new x=y "},
		"staged":             {"k=old ", "k=new x=y "},
		"install: rename":    {"k=old ", "k=new x=y "},
		"install: fsync dir": {"k=new x=y ", "(none)"},
		"installed":          {"k=new x=y ", "(none)"},
	}
	var steps []string
	for _, img := range images {
		steps = append(steps, img.step)
		w, ok := want[img.step]
		if !ok {
			t.Fatalf("a step no one expects: %q", img.step)
		}
		b, err := OpenBolt(filepath.Join(img.dir, "db"), o)
		if err != nil {
			t.Fatalf("a crash before %q: %v", img.step, err)
		}
		if got, staged := current(t, b), stagedState(t, b); got != w[0] || staged != w[1] {
			t.Errorf("a crash before %q: the database holds %q, %q staged; want %q, %q", img.step, got, staged, w[0], w[1])
		}
		ents, _ := os.ReadDir(img.dir)
		for _, e := range ents {
			if strings.Contains(e.Name(), restoreInfix) {
				t.Errorf("a crash before %q: %s left after the open", img.step, e.Name())
			}
		}
		// The start then installs what is staged, or has nothing to do.
		if rs, err := b.Staged(); err == nil {
			if err := rs.Install(); err != nil {
				t.Fatalf("a crash before %q: installing what is staged: %v", img.step, err)
			}
			if got := current(t, b); got != "k=new x=y " {
				t.Fatalf("a crash before %q: installed %q", img.step, got)
			}
		}
		b.Close()
	}
	if len(images) != len(want) {
		t.Fatalf("steps %q, want one image each of %d", steps, len(want))
	}
	if !slices.Contains(steps, "stage: fsync dir") || !slices.Contains(steps, "install: rename") {
		t.Fatalf("steps %q", steps)
	}
}

func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o600); err != nil {
			t.Fatal(fmt.Errorf("copy %s: %w", e.Name(), err))
		}
	}
}
