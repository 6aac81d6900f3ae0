package edictlogtest_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/edictlogtest"
	"github.com/edictlog/edictlog/fsm"
)

// Counters is an embedder's state machine: named counters, changed by
// "add <name> <n>" and read by the query "<name>". It is what the example
// tests with the kit alone.
type Counters struct {
	mu sync.RWMutex
	c  map[string]int64
}

func NewCounters() *Counters { return &Counters{c: map[string]int64{}} }

// Apply adds to a counter and answers its new value; a malformed command
// is refused, deterministically, with an error value.
func (f *Counters) Apply(e fsm.Entry) any {
	if len(e.Data) == 0 {
		return nil // the log's own entries
	}
	name, n, ok := strings.Cut(strings.TrimPrefix(string(e.Data), "add "), " ")
	d, err := strconv.ParseInt(n, 10, 64)
	if !ok || err != nil || !strings.HasPrefix(string(e.Data), "add ") {
		return fmt.Errorf("bad command %q", e.Data)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.c[name] += d
	return f.c[name]
}

// Snapshot copies the counters: Persist runs while later entries apply.
func (f *Counters) Snapshot() (fsm.Snapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return countersSnapshot(maps.Clone(f.c)), nil
}

// Restore reads the whole stream (to io.EOF, where the snapshot store
// checks its digest) before it replaces anything.
func (f *Counters) Restore(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	c := map[string]int64{}
	for len(b) > 0 {
		n, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < n+8 {
			return errors.New("counters: damaged snapshot")
		}
		name := string(b[k : k+int(n)])
		c[name] = int64(binary.BigEndian.Uint64(b[k+int(n):]))
		b = b[k+int(n)+8:]
	}
	f.mu.Lock()
	f.c = c
	f.mu.Unlock()
	return nil
}

// Query answers a counter's value.
func (f *Counters) Query(q []byte) ([]byte, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return strconv.AppendInt(nil, f.c[string(q)], 10), nil
}

type countersSnapshot map[string]int64

func (s countersSnapshot) Persist(w io.Writer) error {
	var b []byte
	for _, name := range slices.Sorted(maps.Keys(s)) {
		b = binary.AppendUvarint(b, uint64(len(name)))
		b = append(b, name...)
		b = binary.BigEndian.AppendUint64(b, uint64(s[name]))
	}
	_, err := w.Write(b)
	return err
}

func (countersSnapshot) Release() {}

// The embedder's FSM, checked against the fsm package's contract.
func TestCountersConform(t *testing.T) {
	var cmds [][]byte
	for i := range 200 {
		cmds = append(cmds, fmt.Appendf(nil, "add c%d %d", i%7, i))
	}
	cmds = append(cmds, []byte("bogus"))
	edictlogtest.CheckFSM(t, edictlogtest.FSMCheck{
		New:      func() (fsm.FSM, error) { return NewCounters(), nil },
		Commands: cmds,
		Queries:  [][]byte{[]byte("c0"), []byte("c3"), []byte("c6"), []byte("none")},
	})
}

// The embedder's FSM replicated by three Nodes with no TCP: write, kill the
// leader, write through the new one, read at every level, restart the
// killed process and see it catch up.
func TestCountersCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := edictlogtest.NewCluster(t, edictlogtest.ClusterConfig{
		Nodes: 3,
		FSM:   func(edict.ProcessID, string) (fsm.FSM, error) { return NewCounters(), nil },
	})
	first, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 10; i++ {
		if _, err := c.Apply(ctx, []byte("add hits 1")); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}

	c.Kill(first)
	second, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if second == first {
		t.Fatalf("killed leader %v still leads", first)
	}
	res, err := c.Apply(ctx, []byte("add hits 5"))
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Response; got != int64(15) {
		t.Fatalf("after the failover the counter answered %v, want 15: a write was lost", got)
	}

	// Every level, on every running process: linearizable reads see all
	// 15; a stale read sees them once its process has applied the write.
	for _, id := range c.Running() {
		for _, level := range []edictlog.ReadLevel{edictlog.ReadLease, edictlog.ReadFollower, edictlog.ReadStale} {
			from := id
			if level == edictlog.ReadLease {
				from = edict.None // lease reads are the leader's
			}
			if level == edictlog.ReadStale {
				if err := c.WaitApplied(ctx, id, res.Index); err != nil {
					t.Fatal(err)
				}
			}
			r, err := c.Read(ctx, from, level, []byte("hits"))
			if err != nil {
				t.Fatalf("%v read at %v: %v", level, id, err)
			}
			if string(r.Data) != "15" {
				t.Fatalf("%v read at %v: hits = %s, want 15", level, id, r.Data)
			}
		}
	}

	c.Restart(first)
	if err := c.WaitApplied(ctx, first, res.Index); err != nil {
		t.Fatal(err)
	}
	r, err := c.Read(ctx, first, edictlog.ReadStale, []byte("hits"))
	if err != nil {
		t.Fatal(err)
	}
	if string(r.Data) != "15" {
		t.Fatalf("restarted process %v reads hits = %s, want 15", first, r.Data)
	}
	r, err = c.Read(ctx, first, edictlog.ReadFollower, []byte("hits"))
	if err != nil || string(r.Data) != "15" {
		t.Fatalf("restarted process %v: follower read %s, %v; want 15", first, r.Data, err)
	}
}

// An embedder's state machine replicated by three Nodes in one process,
// with no TCP: write, kill the leader, write through the next one, restart
// the killed process and read what it caught up on. In a test, NewCluster
// takes the test's testing.TB instead, and closes the cluster at its end;
// TestCountersCluster reads at every level too.
func ExampleStartCluster() {
	c, err := edictlogtest.StartCluster(edictlogtest.ClusterConfig{
		Nodes: 3,
		FSM:   func(edict.ProcessID, string) (fsm.FSM, error) { return NewCounters(), nil },
	})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	leader, err := c.WaitLeader(ctx)
	if err != nil {
		panic(err)
	}
	if _, err := c.Apply(ctx, []byte("add hits 2")); err != nil {
		panic(err)
	}
	c.Kill(leader)
	res, err := c.Apply(ctx, []byte("add hits 3")) // through the new leader
	if err != nil {
		panic(err)
	}
	fmt.Println("hits after the failover:", res.Response)

	c.Restart(leader)
	if err := c.WaitApplied(ctx, leader, res.Index); err != nil {
		panic(err)
	}
	r, err := c.Read(ctx, leader, edictlog.ReadStale, []byte("hits"))
	if err != nil {
		panic(err)
	}
	fmt.Printf("the restarted process reads %s\n", r.Data)
	// Output:
	// hits after the failover: 5
	// the restarted process reads 5
}
