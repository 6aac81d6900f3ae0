package storage_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/edictlog/edictlog/storage"
	"github.com/edictlog/edictlog/storage/storagetest"
	"github.com/edictlog/edictlog/wire"
)

// The crash test runs this test binary again as a child (TestCrashChild)
// that writes batches to a store (a bbolt file, or a WALStore's folder) — appends, truncations, resets to a
// snapshot position, stable keys set and deleted, in mixes — compacts and
// bumps the incarnation, and reports on stdout what it is about to write
// ("send", "compact", "bump") and what was acknowledged ("ack",
// "compacted", "inc"). The parent kills it with SIGKILL at a random moment,
// reopens the file and checks that it holds exactly the acknowledged
// batches, plus possibly the one batch that was in flight, complete: never
// part of a batch, never a lost acknowledgement. Then it starts the child
// again on the same file. bolt_crash_test.go crashes every kind of write at
// every step deterministically, in a model of what a kill leaves; this test
// checks the model against real kills.

const crashEnv = "EDICTLOG_CRASH_CHILD_DB"

// crashKills is how many times the parent kills the child.
const crashKills = 25

// crashData is the payload of entry idx when written by batch b, so the
// parent can tell which batch wrote each entry.
func crashData(b, idx uint64) []byte {
	d := storagetest.Data(idx^b<<32, 256)
	copy(d, fmt.Sprintf("b%d/i%d;", b, idx))
	return d
}

func TestCrashChild(t *testing.T) {
	kind, path, _ := strings.Cut(os.Getenv(crashEnv), ":")
	if path == "" {
		t.Skip("runs only as the child of TestCrashKill")
	}
	// Never outlive a parent that died without killing us.
	time.AfterFunc(30*time.Second, func() { os.Exit(3) })
	s, err := openCrashStore(kind, path)
	if err != nil {
		fmt.Printf("error %v\n", err)
		os.Exit(2)
	}
	fmt.Println("bump")
	inc, err := s.BumpIncarnation()
	must(err)
	fmt.Printf("inc %d\n", inc)
	prev, err := getUint64(s, "crash/batch")
	if errors.Is(err, wire.ErrNotFound) {
		prev, err = 0, nil
	}
	must(err)
	rng := rand.New(rand.NewPCG(uint64(os.Getpid()), inc))
	fmt.Println("ready")
	for b := prev + 1; ; b++ {
		first, err := s.FirstIndex()
		must(err)
		last, err := s.LastIndex()
		must(err)
		var trunc, reset uint64
		n := 1 + rng.IntN(48)
		switch k := rng.IntN(24); {
		case k < 4 && last >= first+3:
			trunc = last - uint64(rng.IntN(3))
		case k == 4 && last >= first+3: // truncation only
			trunc, n = last-uint64(rng.IntN(3)), 0
		case k == 5: // stable keys only
			n = 0
		case k == 6: // a snapshot installed past the end of the log
			reset = last + 1 + uint64(rng.IntN(20))
		}
		start := last + 1
		switch {
		case trunc != 0:
			start = trunc
		case reset != 0:
			start = reset + 1
		}
		es := make([]wire.Entry, n)
		for i := range es {
			idx := start + uint64(i)
			es[i] = wire.Entry{Index: idx, Reign: storagetest.Stamp(1, 1), Stamp: storagetest.Stamp(1, idx), Kind: wire.EntryCommand, Data: crashData(b, idx)}
		}
		batch := wire.Batch{
			TruncateFrom: trunc,
			Entries:      es,
			Stable: map[string][]byte{
				"crash/batch": wire.EncodeUint64(b),
				"crash/last":  wire.EncodeUint64(start + uint64(n) - 1),
			},
		}
		if reset != 0 {
			batch.Reset = &wire.Position{Index: reset, Stamp: storagetest.Stamp(1, reset)}
		}
		if b%3 == 0 {
			batch.Delete = []string{"crash/scratch"}
		} else {
			batch.Stable["crash/scratch"] = wire.EncodeUint64(b)
		}
		fmt.Printf("send %d %d %d %d %d\n", b, trunc, start, n, reset)
		must(s.StoreBatch(batch))
		fmt.Printf("ack %d\n", b)
		if rng.IntN(32) == 0 {
			fmt.Println("bump")
			inc, err := s.BumpIncarnation()
			must(err)
			fmt.Printf("inc %d\n", inc)
		}
		if rng.IntN(16) == 0 && last > first+200 {
			upTo := first + 100 + uint64(rng.IntN(100))
			fmt.Printf("compact %d\n", upTo)
			must(s.CompactPrefix(upTo))
			fmt.Println("compacted")
		}
	}
}

func must(err error) {
	if err != nil {
		fmt.Printf("error %v\n", err)
		os.Exit(2)
	}
}

// crashModel is what the parent knows the file must hold: which batch
// wrote each entry from first on.
type crashModel struct {
	first   uint64
	batchOf []uint64 // batchOf[i] wrote entry first+i
	batch   uint64   // the last batch applied
}

func (m crashModel) last() uint64 { return m.first + uint64(len(m.batchOf)) - 1 }

type crashBatch struct{ b, trunc, start, n, reset uint64 }

func (m crashModel) apply(c crashBatch) crashModel {
	out := crashModel{first: m.first, batch: c.b}
	if c.reset != 0 {
		out.first = c.reset + 1 // and nothing survives
	} else {
		keep := c.start - m.first // entries below start survive
		out.batchOf = append([]uint64(nil), m.batchOf[:keep]...)
	}
	for range c.n {
		out.batchOf = append(out.batchOf, c.b)
	}
	return out
}

// crashStore is what the crash test needs of a store.
type crashStore interface {
	storagetest.Store
	Close() error
}

// openCrashStore opens the store of the given kind at path, with small
// compaction steps and segments so that kills land inside them.
func openCrashStore(kind, path string) (crashStore, error) {
	switch kind {
	case "bolt":
		return storage.OpenBolt(path, &storage.BoltOptions{CompactChunk: 16})
	case "wal":
		return storage.OpenWAL(path, &storage.WALOptions{SegmentSize: 256 << 10})
	}
	return nil, fmt.Errorf("unknown store kind %q", kind)
}

func TestCrashKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	for _, kind := range []string{"bolt", "wal"} {
		t.Run(kind, func(t *testing.T) { crashKill(t, kind) })
	}
}

func crashKill(t *testing.T, kind string) {
	path := kind + ":" + filepath.Join(t.TempDir(), "crash.db")
	model := crashModel{first: 1}
	var lastInc, maxCompact uint64
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	kills, midBatch, midCompaction, midBump, inFlightSeen, resets := 0, 0, 0, 0, 0, 0
	for kills < crashKills {
		lines := runChildUntilKilled(t, path, time.Duration(rng.IntN(40))*time.Millisecond)
		kills++
		var pending *crashBatch
		bumping := false
		acked := model
		for _, l := range lines {
			f := strings.Fields(l)
			switch f[0] {
			case "bump":
				bumping = true
			case "inc":
				n := atou(t, f[1])
				require.Equal(t, lastInc+1, n, "each bump adds one to the incarnation")
				lastInc, bumping = n, false
			case "ready":
			case "send":
				pending = &crashBatch{atou(t, f[1]), atou(t, f[2]), atou(t, f[3]), atou(t, f[4]), atou(t, f[5])}
				if pending.reset != 0 {
					resets++
				}
			case "ack":
				require.NotNil(t, pending)
				require.Equal(t, pending.b, atou(t, f[1]))
				acked = acked.apply(*pending)
				pending = nil
			case "compact":
				maxCompact = max(maxCompact, atou(t, f[1]))
			case "compacted":
			default:
				t.Fatalf("child: %s", l)
			}
		}
		switch last := lines[len(lines)-1]; {
		case pending != nil:
			midBatch++
		case strings.HasPrefix(last, "compact "):
			midCompaction++
		case bumping:
			midBump++
		}
		got := checkCrashFile(t, path, acked, pending, maxCompact, bumping, &lastInc)
		if got.batch != acked.batch {
			inFlightSeen++
		}
		model = got
	}
	t.Logf("%d kills: %d between sending a batch and its acknowledgement (%d of those batches had committed), %d during a compaction, %d during an incarnation bump; %d resets; last batch %d, log %d..%d",
		kills, midBatch, inFlightSeen, midCompaction, midBump, resets, model.batch, model.first, model.last())
	require.Greater(t, model.batch, uint64(crashKills), "the child made progress between kills")
}

// runChildUntilKilled starts the child, kills it with SIGKILL delay after it
// is ready, and returns every line it printed. The child's stdout is a
// file, not a pipe: a pipe would wake the parent on every line, and on a
// busy machine the child would then often be descheduled right after a
// print, so kills would cluster there instead of inside writes.
func runChildUntilKilled(t *testing.T, path string, delay time.Duration) []string {
	t.Helper()
	_, file, _ := strings.Cut(path, ":")
	out, err := os.CreateTemp(filepath.Dir(file), "child-*.out")
	require.NoError(t, err)
	defer os.Remove(out.Name())
	defer out.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashEnv+"="+path)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = out, &stderr
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	read := func() []string {
		b, err := os.ReadFile(out.Name())
		require.NoError(t, err)
		return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(time.Millisecond) {
		select {
		case err := <-exited:
			t.Fatalf("child exited before it was ready (%v): %q; stderr: %s", err, read(), stderr.String())
		default:
		}
		if b, _ := os.ReadFile(out.Name()); bytes.Contains(b, []byte("ready\n")) {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("child not ready after 20s: %q", read())
		}
	}
	time.Sleep(delay)
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	err = <-exited
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	require.Equal(t, "signal: killed", exit.Error(), "stderr: %s", stderr.String())
	// Everything the child wrote before it died is in the file.
	return read()
}

// checkCrashFile opens the file after a kill and checks it holds acked, or
// acked plus the pending batch, and the last incarnation acknowledged, or
// one more if a bump was in flight; it returns the model of what it holds.
func checkCrashFile(t *testing.T, path string, acked crashModel, pending *crashBatch, maxCompact uint64, bumping bool, lastInc *uint64) crashModel {
	t.Helper()
	kind, file, _ := strings.Cut(path, ":")
	s, err := openCrashStore(kind, file)
	require.NoError(t, err, "reopen after SIGKILL")
	defer s.Close()
	want := acked
	stored, err := getUint64(s, "crash/batch")
	if errors.Is(err, wire.ErrNotFound) {
		stored, err = 0, nil
	}
	require.NoError(t, err)
	switch {
	case stored == acked.batch:
	case pending != nil && stored == pending.b:
		want = acked.apply(*pending)
	default:
		t.Fatalf("file holds batch %d; acknowledged %d, in flight %+v", stored, acked.batch, pending)
	}
	first, err := s.FirstIndex()
	require.NoError(t, err)
	last, err := s.LastIndex()
	require.NoError(t, err)
	require.Equal(t, want.last(), last, "last index after batch %d", stored)
	if stored > 0 {
		sl, err := getUint64(s, "crash/last")
		require.NoError(t, err)
		require.Equal(t, last, sl, "stable state and log moved together")
	}
	// Compaction steps may or may not have happened, but only forwards and
	// only as far as asked.
	require.GreaterOrEqual(t, first, want.first)
	require.LessOrEqual(t, first, max(want.first, maxCompact+1))
	scratch, err := getUint64(s, "crash/scratch")
	switch {
	case stored%3 == 0:
		require.ErrorIs(t, err, wire.ErrNotFound, "batch %d deleted the scratch key", stored)
	default:
		require.NoError(t, err)
		require.Equal(t, stored, scratch, "the scratch key moved with the batch")
	}
	es, err := s.Entries(first, last+1, 0)
	require.NoError(t, err)
	for _, e := range es {
		b := want.batchOf[e.Index-want.first]
		require.True(t, bytes.Equal(crashData(b, e.Index), e.Data), "entry %d should be batch %d's, holds %q", e.Index, b, e.Data[:16])
	}
	inc, err := getUint64(s, wire.KeyIncarnation)
	require.NoError(t, err)
	if inc != *lastInc {
		require.True(t, bumping && inc == *lastInc+1, "incarnation %d after a kill; acknowledged %d, a bump in flight: %v", inc, *lastInc, bumping)
	}
	*lastInc = inc
	return crashModel{first: first, batchOf: want.batchOf[first-want.first:], batch: stored}
}

func atou(t *testing.T, s string) uint64 {
	n, err := strconv.ParseUint(s, 10, 64)
	require.NoError(t, err)
	return n
}

func getUint64(s crashStore, key string) (uint64, error) {
	b, err := s.Get(key)
	if err != nil {
		return 0, err
	}
	return wire.DecodeUint64(key, b)
}
