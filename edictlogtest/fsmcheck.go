package edictlogtest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"sync"
	"testing"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/fsm"
)

// FSMCheck describes an embedder's state machine for CheckFSM.
type FSMCheck struct {
	// New returns a new, empty state machine. Required.
	New func() (fsm.FSM, error)
	// Commands are applied in order, as committed entries, with entries
	// of the log's own (empty Data) among them. Use enough, and varied
	// enough, to reach the states the state machine can be in,
	// refused commands included. Required.
	Commands [][]byte
	// Queries, for an fsm.Querier, are queries whose answers together
	// describe the whole state: two state machines are taken to be in the
	// same state when they answer them alike (answers and errors).
	Queries [][]byte
	// State, if set, describes a state machine's state instead: the same
	// bytes for the same state.
	//
	// Without State or Queries, states are compared by the bytes Persist
	// writes, which must then be the same for the same entries on every
	// replica (sort what you iterate).
	State func(fsm.FSM) ([]byte, error)
	// Seed seeds where the log's own entries fall among the commands and
	// the batch sizes (default 1).
	Seed uint64
}

// CheckFSM runs a state machine through the contract package fsm states
// for it (the FSM, BatchFSM, Snapshot, SizedSnapshot and Querier
// interfaces), reports what it breaks with t.Errorf, and reports whether
// it kept it:
//
//   - Determinism: two replicas applying the same entries — one at a
//     time, and in batches of varied sizes (fsm.BatchFSM) — answer every
//     entry alike and reach the same states. One of them is handed
//     entries whose Data is overwritten once Apply returns, as the log
//     may reuse it: a state machine that keeps Data without copying it
//     diverges. A clock, randomness or map iteration order that leaks
//     into a response or the state shows as divergence too.
//   - Snapshot, Persist and Restore round trip: a fresh state machine
//     restored from what Persist wrote is in the state the snapshot was
//     taken at, and applying the later entries brings it where the
//     original went; a SizedSnapshot writes the size it reports. Restore
//     replaces the whole state: a state machine further along, restored
//     from an earlier snapshot, keeps nothing of its own (not checked for
//     a DiskFSM, which the log never gives a snapshot behind its state).
//   - Persist writes the state as of the Snapshot call, even when later
//     entries are applied before it runs, or while it runs.
//   - Restore reads its stream to its end (io.EOF: snapshot stores check
//     their digests there), fails on a stream whose reader fails, midway
//     or at the end in place of io.EOF, and then keeps its previous state.
//   - Query, for an fsm.Querier, runs beside Apply and ApplyBatch; under
//     the race detector (go test -race) an unsynchronized Query shows.
//
// What it cannot see: nondeterminism that two replicas in one process
// share (a global counter read by both, the same environment), and
// answers of Query taken from the middle of an entry. A state machine
// that keeps its own durable state (fsm.DiskFSM) should also pass
// fsm/fsmtest.TestDiskFSM, which checks durability across crashes.
func CheckFSM(t testing.TB, c FSMCheck) bool {
	t.Helper()
	if c.New == nil || len(c.Commands) == 0 {
		t.Errorf("edictlogtest: CheckFSM: FSMCheck.New and FSMCheck.Commands are required")
		return false
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	k := &checker{t: t, c: c}
	k.entries = k.makeEntries()
	ok := true
	run := func(name string, check func() error) {
		if err := check(); err != nil {
			t.Errorf("edictlogtest: CheckFSM: %s: %v", name, err)
			ok = false
		}
	}
	run("determinism", k.deterministic)
	if ok {
		// These compare with the states the determinism check recorded.
		run("snapshot round trip", k.roundTrip)
		run("Persist after later applies", k.persistAfterApplies)
	} else {
		t.Errorf("edictlogtest: CheckFSM: the snapshot checks compare replicas, and were not run on a state machine that is not deterministic")
	}
	run("Restore", k.restore)
	run("Query beside Apply", k.queries)
	return ok
}

type checker struct {
	t       testing.TB
	c       FSMCheck
	entries []fsm.Entry // entries[i] has index i+1
	// ref[i] is the state after the entries up to checkpoint i, from a
	// replica applying one entry at a time (determinism fills it).
	ref map[uint64][]byte
}

func (k *checker) rng(salt uint64) *rand.Rand { return rand.New(rand.NewPCG(k.c.Seed, salt)) }

func (k *checker) makeEntries() []fsm.Entry {
	r := k.rng(1)
	var es []fsm.Entry
	add := func(data []byte) {
		i := uint64(len(es) + 1)
		es = append(es, fsm.Entry{Index: i, Stamp: stampAt(i), Data: bytes.Clone(data)})
	}
	add(nil) // a reign starts
	for _, cmd := range k.c.Commands {
		if r.IntN(8) == 0 {
			add(nil)
		}
		add(cmd)
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

func (k *checker) newFSM() (fsm.FSM, error) {
	f, err := k.c.New()
	if err != nil {
		return nil, fmt.Errorf("New: %w", err)
	}
	if f == nil {
		return nil, errors.New("New returned a nil FSM")
	}
	return f, nil
}

// state describes f's state.
func (k *checker) state(f fsm.FSM) ([]byte, error) {
	if k.c.State != nil {
		b, err := k.c.State(f)
		if err != nil {
			return nil, fmt.Errorf("State: %w", err)
		}
		return b, nil
	}
	if q, ok := f.(fsm.Querier); ok && len(k.c.Queries) > 0 {
		var b []byte
		for _, query := range k.c.Queries {
			ans, err := q.Query(query)
			if err != nil {
				b = append(b, 'e')
				ans = []byte(err.Error())
			} else {
				b = append(b, 'a')
			}
			b = binary.AppendUvarint(b, uint64(len(ans)))
			b = append(b, ans...)
		}
		return b, nil
	}
	return persist(f)
}

// persist snapshots f and returns what Persist writes.
func persist(f fsm.FSM) ([]byte, error) {
	s, err := f.Snapshot()
	if err != nil {
		return nil, fmt.Errorf("Snapshot: %w", err)
	}
	defer s.Release()
	return persistSnap(s)
}

func persistSnap(s fsm.Snapshot) ([]byte, error) {
	var buf bytes.Buffer
	if err := s.Persist(&buf); err != nil {
		return nil, fmt.Errorf("Persist: %w", err)
	}
	if sz, ok := s.(fsm.SizedSnapshot); ok && sz.Size() != int64(buf.Len()) {
		return nil, fmt.Errorf("SizedSnapshot reports %d bytes, Persist wrote %d", sz.Size(), buf.Len())
	}
	return buf.Bytes(), nil
}

// replica is a state machine and how far it applied.
type replica struct {
	f       fsm.FSM
	applied uint64
}

// apply applies the entries after r.applied up to to: one at a time, or
// in batches of sizes drawn from batch if the state machine takes them.
// With scribble, each entry's Data is overwritten once the call returns.
// It returns the responses.
func (k *checker) apply(r *replica, to uint64, batch *rand.Rand, scribble bool) ([]any, error) {
	var out []any
	b, batches := r.f.(fsm.BatchFSM)
	for r.applied < to {
		n := uint64(1)
		if batches && batch != nil {
			n = min(uint64(1+batch.IntN(16)), to-r.applied)
		}
		es := make([]fsm.Entry, n)
		for i := range es {
			es[i] = k.entries[r.applied+uint64(i)]
			es[i].Data = bytes.Clone(es[i].Data)
		}
		if batches && batch != nil {
			res := b.ApplyBatch(es)
			if len(res) != len(es) {
				return nil, fmt.Errorf("ApplyBatch of %d entries from index %d returned %d responses", len(es), es[0].Index, len(res))
			}
			out = append(out, res...)
		} else {
			out = append(out, r.f.Apply(es[0]))
		}
		if scribble {
			for _, e := range es {
				for i := range e.Data {
					e.Data[i] = 0xa5
				}
			}
		}
		r.applied += n
	}
	return out, nil
}

// checkpoints are the indexes the checks compare states at: about 16,
// evenly spread, 0 and the last included.
func (k *checker) checkpoints() []uint64 {
	n := uint64(len(k.entries))
	step := max(n/16, 1)
	var out []uint64
	for i := uint64(0); i < n; i += step {
		out = append(out, i)
	}
	return append(out, n)
}

// midpoint is a checkpoint below the last index, near the middle.
func (k *checker) midpoint() uint64 {
	points := k.checkpoints()
	return points[(len(points)-1)/2]
}

func (k *checker) deterministic() error {
	fa, err := k.newFSM()
	if err != nil {
		return err
	}
	fb, err := k.newFSM()
	if err != nil {
		return err
	}
	a, b := &replica{f: fa}, &replica{f: fb}
	batch := k.rng(2)
	k.ref = map[uint64][]byte{}
	var resA, resB []any
	points := k.checkpoints()
	for i, p := range points {
		if i > 0 {
			r, err := k.apply(a, p, nil, false)
			if err != nil {
				return err
			}
			resA = append(resA, r...)
			r, err = k.apply(b, p, batch, true)
			if err != nil {
				return err
			}
			resB = append(resB, r...)
		}
		sa, err := k.state(a.f)
		if err != nil {
			return err
		}
		sb, err := k.state(b.f)
		if err != nil {
			return err
		}
		k.ref[p] = sa
		if !bytes.Equal(sa, sb) {
			ask := "is Apply deterministic, and does it copy the Data it keeps?"
			if _, ok := b.f.(fsm.BatchFSM); ok {
				ask = "is Apply deterministic, does ApplyBatch do what Apply does, entry by entry, and do they copy the Data they keep?"
			}
			return fmt.Errorf("two replicas that applied the same entries up to %d are in different states (one applied them one at a time, the other in batches with each entry's Data overwritten once applied): %s", p, ask)
		}
	}
	for i := range resA {
		if !reflect.DeepEqual(resA[i], resB[i]) {
			return fmt.Errorf("entry %d (%q): two replicas answered %#v and %#v: a response must be a function of the state and the entry alone", i+1, k.entries[i].Data, resA[i], resB[i])
		}
	}
	return nil
}

// refAt returns the state after the entries up to p, a checkpoint.
func (k *checker) refAt(p uint64) ([]byte, error) {
	b, ok := k.ref[p]
	if !ok {
		return nil, fmt.Errorf("edictlogtest: no reference state at %d", p)
	}
	return b, nil
}

// eofReader reads b and remembers whether it returned io.EOF.
type eofReader struct {
	r   *bytes.Reader
	eof bool
}

func (e *eofReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err == io.EOF {
		e.eof = true
	}
	return n, err
}

// restoreFrom restores a fresh state machine from b, checking that
// Restore read b to its end.
func (k *checker) restoreFrom(b []byte, index uint64) (fsm.FSM, error) {
	f, err := k.newFSM()
	if err != nil {
		return nil, err
	}
	r := &eofReader{r: bytes.NewReader(b)}
	if err := f.Restore(r); err != nil {
		return nil, fmt.Errorf("Restore of the snapshot at index %d: %w", index, err)
	}
	if !r.eof {
		return nil, fmt.Errorf("Restore of the snapshot at index %d returned without reading its stream to the end (%d of %d bytes read, io.EOF never seen): snapshot stores check a stream's digest only at its end, so a Restore that stops early trusts a stream no one checked", index, len(b)-r.r.Len(), len(b))
	}
	return f, nil
}

func (k *checker) roundTrip() error {
	n := uint64(len(k.entries))
	final, err := k.refAt(n)
	if err != nil {
		return err
	}
	snaps := map[uint64][]byte{}
	for _, p := range []uint64{0, k.midpoint(), n} {
		f, err := k.newFSM()
		if err != nil {
			return err
		}
		r := &replica{f: f}
		if _, err := k.apply(r, p, nil, false); err != nil {
			return err
		}
		b, err := persist(f)
		if err != nil {
			return fmt.Errorf("at index %d: %w", p, err)
		}
		snaps[p] = b
		g, err := k.restoreFrom(b, p)
		if err != nil {
			return err
		}
		want, err := k.refAt(p)
		if err != nil {
			return err
		}
		got, err := k.state(g)
		if err != nil {
			return err
		}
		if !bytes.Equal(got, want) {
			return fmt.Errorf("a state machine restored from a snapshot taken at index %d is not in the state the snapshot was taken in", p)
		}
		rg := &replica{f: g, applied: p}
		if _, err := k.apply(rg, n, k.rng(3), false); err != nil {
			return err
		}
		if got, err = k.state(g); err != nil {
			return err
		}
		if !bytes.Equal(got, final) {
			return fmt.Errorf("a state machine restored from a snapshot taken at index %d, then given the entries up to %d, is not in the state of a replica that applied them all", p, n)
		}
	}
	// Restore replaces the whole state: one that applied every entry,
	// restored from an earlier snapshot, holds nothing of what came
	// after it. (A DiskFSM need not take a snapshot behind its state:
	// the log never gives it one.)
	f, err := k.newFSM()
	if err != nil {
		return err
	}
	if _, ok := f.(fsm.DiskFSM); ok {
		return nil
	}
	if _, err := k.apply(&replica{f: f}, n, nil, false); err != nil {
		return err
	}
	for _, p := range []uint64{k.midpoint(), 0} {
		if err := f.Restore(bytes.NewReader(snaps[p])); err != nil {
			return fmt.Errorf("Restore of the snapshot at index %d into a state machine that applied the entries up to %d: %w", p, n, err)
		}
		want, err := k.refAt(p)
		if err != nil {
			return err
		}
		got, err := k.state(f)
		if err != nil {
			return err
		}
		if !bytes.Equal(got, want) {
			return fmt.Errorf("a state machine that applied the entries up to %d, restored from a snapshot taken at index %d, is not in the snapshot's state: Restore must replace all state, not add to it", n, p)
		}
	}
	return nil
}

func (k *checker) persistAfterApplies() error {
	n := uint64(len(k.entries))
	p := k.midpoint()
	want, err := k.refAt(p)
	if err != nil {
		return err
	}
	for _, concurrent := range []bool{false, true} {
		f, err := k.newFSM()
		if err != nil {
			return err
		}
		r := &replica{f: f}
		if _, err := k.apply(r, p, nil, false); err != nil {
			return err
		}
		s, err := f.Snapshot()
		if err != nil {
			return fmt.Errorf("Snapshot at index %d: %w", p, err)
		}
		var b []byte
		var perr, aerr error
		if concurrent {
			var wg sync.WaitGroup
			wg.Go(func() { b, perr = persistSnap(s) })
			_, aerr = k.apply(r, n, k.rng(4), true)
			wg.Wait()
		} else {
			_, aerr = k.apply(r, n, k.rng(4), true)
			b, perr = persistSnap(s)
		}
		s.Release()
		if aerr != nil {
			return aerr
		}
		if perr != nil {
			return fmt.Errorf("snapshot at index %d: %w", p, perr)
		}
		g, err := k.restoreFrom(b, p)
		if err != nil {
			return err
		}
		got, err := k.state(g)
		if err != nil {
			return err
		}
		if !bytes.Equal(got, want) {
			how := "after"
			if concurrent {
				how = "while"
			}
			return fmt.Errorf("a snapshot taken at index %d, persisted %s the entries up to %d were applied, does not restore to the state at %d: Persist must write the state as of the Snapshot call (does the snapshot share memory with the live state?)", p, how, n, p)
		}
	}
	return nil
}

// failingReader yields b up to failAt, then fails: at b's end in place
// of io.EOF, or midway.
type failingReader struct {
	b      []byte
	failAt int
	off    int
}

var errInjected = errors.New("edictlogtest: injected read error")

func (r *failingReader) Read(p []byte) (int, error) {
	if r.off >= r.failAt {
		return 0, errInjected
	}
	n := copy(p, r.b[r.off:r.failAt])
	r.off += n
	return n, nil
}

func (k *checker) restore() error {
	n := uint64(len(k.entries))
	p := k.midpoint()
	f, err := k.newFSM()
	if err != nil {
		return err
	}
	r := &replica{f: f}
	if _, err := k.apply(r, n, nil, false); err != nil {
		return err
	}
	b, err := persist(f)
	if err != nil {
		return err
	}
	if _, err := k.restoreFrom(b, n); err != nil {
		return err
	}
	for _, midway := range []bool{false, true} {
		if midway && len(b) < 2 {
			continue
		}
		// A state machine in another state, which a failed Restore must
		// leave as it was.
		g, err := k.newFSM()
		if err != nil {
			return err
		}
		rg := &replica{f: g}
		if _, err := k.apply(rg, p, nil, false); err != nil {
			return err
		}
		before, err := k.state(g)
		if err != nil {
			return err
		}
		fr := &failingReader{b: b, failAt: len(b)}
		if midway {
			fr.failAt = len(b) / 2
		}
		where := "at its end, in place of io.EOF"
		if midway {
			where = fmt.Sprintf("after %d of its %d bytes", len(b)/2, len(b))
		}
		if err := g.Restore(fr); err == nil {
			return fmt.Errorf("Restore returned nil from a stream whose reader failed %s: a snapshot store reports a damaged stream that way", where)
		}
		after, err := k.state(g)
		if err != nil {
			return err
		}
		if !bytes.Equal(before, after) {
			return fmt.Errorf("a Restore that failed (the stream's reader failed %s) changed the state: on error the FSM must keep its previous state", where)
		}
	}
	return nil
}

func (k *checker) queries() error {
	f, err := k.newFSM()
	if err != nil {
		return err
	}
	q, ok := f.(fsm.Querier)
	if !ok || len(k.c.Queries) == 0 {
		return nil
	}
	r := &replica{f: f}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			for _, query := range k.c.Queries {
				select {
				case <-stop:
					return
				default:
				}
				_, _ = q.Query(query)
			}
		}
	})
	_, err = k.apply(r, uint64(len(k.entries)), k.rng(5), false)
	close(stop)
	wg.Wait()
	return err
}
