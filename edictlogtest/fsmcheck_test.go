package edictlogtest_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"maps"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edictlog/edictlog/edictlogtest"
	"github.com/edictlog/edictlog/fsm"
	"github.com/edictlog/edictlog/fsm/kvdisk"
	"github.com/edictlog/edictlog/fsm/kvfsm"
)

// recorder is a testing.TB that records failures instead of failing the
// test, to see what CheckFSM reports.
type recorder struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recorder) Error(args ...any) { r.Errorf("%s", fmt.Sprint(args...)) }

func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}

func (r *recorder) Fatal(args ...any) { r.Fatalf("%s", fmt.Sprint(args...)) }

func (r *recorder) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.errs) > 0
}

func (r *recorder) Log(args ...any)                 {}
func (r *recorder) Logf(format string, args ...any) {}

// check runs CheckFSM against a recorder, on a goroutine of its own so
// that a Fatal ends only it, and returns what it reported.
func check(t *testing.T, c edictlogtest.FSMCheck) (bool, []string) {
	t.Helper()
	r := &recorder{TB: t}
	var ok bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		ok = edictlogtest.CheckFSM(r, c)
	}()
	<-done
	if ok == r.Failed() {
		t.Fatalf("CheckFSM returned %v with failures %q", ok, r.errs)
	}
	return ok, r.errs
}

func counterCommands() [][]byte {
	var cmds [][]byte
	for i := range 120 {
		cmds = append(cmds, fmt.Appendf(nil, "add c%d %d", i%5, i+1))
		if i%3 == 0 {
			// Refused by Counters; reversing sets c1 to its length.
			cmds = append(cmds, fmt.Appendf(nil, "set c1 %s", strings.Repeat("x", i%4)))
		}
	}
	return cmds
}

var counterQueries = [][]byte{[]byte("c0"), []byte("c1"), []byte("c2"), []byte("c3"), []byte("c4"), []byte("last")}

// expectFailure checks that CheckFSM fails f with a report that says want.
func expectFailure(t *testing.T, newFSM func() fsm.FSM, queries [][]byte, want string) {
	t.Helper()
	ok, errs := check(t, edictlogtest.FSMCheck{
		New:      func() (fsm.FSM, error) { return newFSM(), nil },
		Commands: counterCommands(),
		Queries:  queries,
	})
	if ok {
		t.Fatalf("CheckFSM passed a broken FSM")
	}
	all := strings.Join(errs, "\n")
	if !strings.Contains(all, want) {
		t.Fatalf("CheckFSM reported\n%s\nwant a report containing %q", all, want)
	}
	t.Logf("reported: %s", all)
}

func TestCheckFSMPassesCorrectFSMs(t *testing.T) {
	if ok, errs := check(t, edictlogtest.FSMCheck{
		New:      func() (fsm.FSM, error) { return NewCounters(), nil },
		Commands: counterCommands(),
		Queries:  counterQueries,
	}); !ok {
		t.Fatalf("Counters: %q", errs)
	}
	// Compared by their snapshots' bytes, with no queries.
	if ok, errs := check(t, edictlogtest.FSMCheck{
		New:      func() (fsm.FSM, error) { return NewCounters(), nil },
		Commands: counterCommands(),
	}); !ok {
		t.Fatalf("Counters by snapshot: %q", errs)
	}
	// The repository's own key-value state machine.
	var cmds [][]byte
	for i := range 100 {
		var c kvfsm.Command
		switch i % 4 {
		case 0, 1:
			c = kvfsm.Command{Put: &kvfsm.Put{Key: fmt.Sprintf("k%d", i%9), Value: fmt.Sprint(i)}}
		case 2:
			c = kvfsm.Command{Delete: &kvfsm.Delete{Key: fmt.Sprintf("k%d", i%7)}}
		case 3:
			c = kvfsm.CASValue(fmt.Sprintf("k%d", i%9), fmt.Sprint(i-3), "cas")
		}
		b, err := kvfsm.EncodeCommand(c)
		if err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, b)
	}
	all, err := kvfsm.EncodeQuery(kvfsm.Range{Key: "\x00", RangeEnd: "\x00"})
	if err != nil {
		t.Fatal(err)
	}
	if ok, errs := check(t, edictlogtest.FSMCheck{
		New:      func() (fsm.FSM, error) { return kvfsm.NewKV(), nil },
		Commands: cmds,
		Queries:  [][]byte{all},
	}); !ok {
		t.Fatalf("kvfsm.KV: %q", errs)
	}
	// And its DiskFSM, each state machine in a directory of its own.
	if ok, errs := check(t, edictlogtest.FSMCheck{
		New:      func() (fsm.FSM, error) { return kvdisk.Open(t.TempDir()) },
		Commands: cmds,
		Queries:  [][]byte{all},
	}); !ok {
		t.Fatalf("kvdisk.KV: %q", errs)
	}
}

// stamped keeps the time it applied its last entry: replicas diverge.
type stamped struct{ *Counters }

func (f stamped) Apply(e fsm.Entry) any {
	r := f.Counters.Apply(e)
	if len(e.Data) > 0 {
		f.mu.Lock()
		f.c["applied-at"] = time.Now().UnixNano()
		f.mu.Unlock()
	}
	return r
}

// chatty answers with the time: its state agrees, its responses do not.
type chatty struct{ *Counters }

func (f chatty) Apply(e fsm.Entry) any {
	f.Counters.Apply(e)
	return time.Now().UnixNano()
}

// hoarder keeps the last command's Data without copying it.
type hoarder struct {
	*Counters
	last *[]byte
}

func newHoarder() fsm.FSM { return hoarder{Counters: NewCounters(), last: new([]byte)} }

func (f hoarder) Apply(e fsm.Entry) any {
	f.mu.Lock()
	if len(e.Data) > 0 {
		*f.last = e.Data
	}
	f.mu.Unlock()
	return f.Counters.Apply(e)
}

func (f hoarder) Query(q []byte) ([]byte, error) {
	if string(q) == "last" {
		f.mu.RLock()
		defer f.mu.RUnlock()
		return bytes.Clone(*f.last), nil
	}
	return f.Counters.Query(q)
}

// aliasing's snapshot is a view of the live state: Persist writes the
// state as of Persist, not as of Snapshot.
type aliasing struct{ *Counters }

func (f aliasing) Snapshot() (fsm.Snapshot, error) { return liveView{f.Counters}, nil }

type liveView struct{ f *Counters }

func (v liveView) Persist(w io.Writer) error {
	v.f.mu.RLock()
	s := countersSnapshot(maps.Clone(v.f.c))
	v.f.mu.RUnlock()
	return s.Persist(w)
}

func (liveView) Release() {}

// framed writes its snapshot behind a length and its Restore reads just
// that many bytes: it never reads to io.EOF.
type framed struct{ *Counters }

func (f framed) Snapshot() (fsm.Snapshot, error) {
	s, err := f.Counters.Snapshot()
	return framedSnap{s}, err
}

type framedSnap struct{ fsm.Snapshot }

func (s framedSnap) Persist(w io.Writer) error {
	var body bytes.Buffer
	if err := s.Snapshot.Persist(&body); err != nil {
		return err
	}
	if _, err := w.Write(binary.BigEndian.AppendUint64(nil, uint64(body.Len()))); err != nil {
		return err
	}
	_, err := w.Write(body.Bytes())
	return err
}

func (f framed) Restore(r io.Reader) error {
	var n [8]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return err
	}
	body := make([]byte, binary.BigEndian.Uint64(n[:]))
	if _, err := io.ReadFull(r, body); err != nil {
		return err
	}
	return f.Counters.Restore(bytes.NewReader(body))
}

// careless ignores the stream's read error.
type careless struct{ *Counters }

func (f careless) Restore(r io.Reader) error {
	b, _ := io.ReadAll(r)
	return f.Counters.Restore(bytes.NewReader(b))
}

// merging adds a snapshot's counters to its own.
type merging struct{ *Counters }

func (f merging) Restore(r io.Reader) error {
	g := NewCounters()
	if err := g.Restore(r); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	maps.Copy(f.c, g.c)
	return nil
}

// reversing applies a batch's entries last to first, unlike Apply.
type reversing struct{ *Counters }

func (f reversing) ApplyBatch(es []fsm.Entry) []any {
	out := make([]any, len(es))
	for i := len(es) - 1; i >= 0; i-- {
		out[i] = f.Counters.Apply(es[i])
	}
	return out
}

// Set makes order matter: "set <name> <n>" alongside "add".
func (f reversing) Apply(e fsm.Entry) any {
	if name, n, ok := strings.Cut(strings.TrimPrefix(string(e.Data), "set "), " "); ok && strings.HasPrefix(string(e.Data), "set ") {
		f.mu.Lock()
		defer f.mu.Unlock()
		v := int64(len(n))
		f.c[name] = v
		return v
	}
	return f.Counters.Apply(e)
}

// misSized reports a size its Persist does not write.
type misSized struct{ *Counters }

func (f misSized) Snapshot() (fsm.Snapshot, error) {
	s, err := f.Counters.Snapshot()
	return sized{s}, err
}

type sized struct{ fsm.Snapshot }

func (sized) Size() int64 { return 3 }

// eager clears its state before it has read the stream.
type eager struct{ *Counters }

func (f eager) Restore(r io.Reader) error {
	f.mu.Lock()
	clear(f.c)
	f.mu.Unlock()
	return f.Counters.Restore(r)
}

func TestCheckFSMCatchesBrokenFSMs(t *testing.T) {
	for _, c := range []struct {
		name    string
		new     func() fsm.FSM
		queries [][]byte
		want    string
	}{
		{"nondeterministic state", func() fsm.FSM { return stamped{NewCounters()} }, nil, "different states"},
		{"nondeterministic response", func() fsm.FSM { return chatty{NewCounters()} }, counterQueries, "answered"},
		{"keeps Data", newHoarder, counterQueries, "does it copy the Data"},
		{"snapshot aliases live state", func() fsm.FSM { return aliasing{NewCounters()} }, counterQueries, "Persist must write the state as of the Snapshot call"},
		{"Restore stops early", func() fsm.FSM { return framed{NewCounters()} }, counterQueries, "without reading its stream to the end"},
		{"Restore ignores read errors", func() fsm.FSM { return careless{NewCounters()} }, counterQueries, "Restore returned nil from a stream whose reader failed"},
		{"ApplyBatch differs from Apply", func() fsm.FSM { return reversing{NewCounters()} }, counterQueries, "different states"},
		{"SizedSnapshot misreports", func() fsm.FSM { return misSized{NewCounters()} }, counterQueries, "SizedSnapshot reports 3 bytes"},
		{"Restore merges", func() fsm.FSM { return merging{NewCounters()} }, counterQueries, "Restore must replace all state"},
		{"failed Restore changes state", func() fsm.FSM { return eager{NewCounters()} }, counterQueries, "changed the state"},
	} {
		t.Run(c.name, func(t *testing.T) { expectFailure(t, c.new, c.queries, c.want) })
	}
}

func TestCheckFSMNeedsNewAndCommands(t *testing.T) {
	if ok, _ := check(t, edictlogtest.FSMCheck{Commands: counterCommands()}); ok {
		t.Fatal("passed without New")
	}
	if ok, _ := check(t, edictlogtest.FSMCheck{New: func() (fsm.FSM, error) { return NewCounters(), nil }}); ok {
		t.Fatal("passed without commands")
	}
}
