package simstate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/edictlog/edictlog/cmd/edictkv/internal/kvstate"
	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/fsm"
	"github.com/edictlog/edictlog/internal/sim"
)

// Checker is the simulator's Model for Machine: the workload of etcd
// requests its clients send (workload.go) and the checks of every
// replica against one Model built from the committed log. It checks
//
//   - at every apply, on the replica that applied it: the answer (revision,
//     refusal, response, the stamps of the revisions it names) is the
//     model's for that entry; the replica's applied index, revision and
//     compaction revision are the model's after it; and the revision the
//     entry made reads as the model's and maps back to the entry;
//   - at every start (what a crash left, or a snapshot restored at start)
//     and every snapshot installed, and at the end on every running
//     replica: its whole history, every revision it keeps from its
//     compaction revision to its current one — for each, every key alive
//     with its value, create_revision, mod_revision, version and lease,
//     the keys the revision deleted being absent — is the model's, reads
//     below the compaction revision and above the current one are
//     refused as compacted and future, and at the end, before the model,
//     the running replicas against each other at every revision they
//     share;
//   - every read of the workload, at any level and revision: the
//     replica's answer is the model's at the entries it applied;
//   - every command's answer as its proposer got it: the entry committed
//     at its index is that command, and the answer is the model's;
//   - every response its watch clients (watch.go) read, on any process:
//     a watch is sent, across the reconnects of its client to any process,
//     exactly the model's events of its keys from its start revision on —
//     in revision order, each revision's in the order its write made them,
//     with the key as the change left it and, asked for, as it found it
//     (prev_kv; missing only at the serving process's compaction
//     revision), the filters respected, none missing and none repeated;
//     a compaction cancels a watch only past its next revision and not
//     past the serving process's compaction; a progress notification is
//     one the stream asked for, at the revision its process had then, and
//     only once every event of the watches it is for up to it was sent;
//     nothing is sent for a watch after its client cancelled it; and at
//     the end, every watch on a running process, once its store caught
//     up, has been sent every event up to that process's revision.
type Checker struct {
	m   *Model
	seq int // the workload's values
	// noReads leaves out the workload's reads, its txns' ranges at past
	// revisions and the watch clients, so that the history checks are
	// shown catching alone (TestMutations).
	noReads bool
	w       *watchers
}

var _ sim.Model = (*Checker)(nil)

// NewChecker returns the checker of one run, whose watch clients draw
// their moves from seed.
func NewChecker(seed uint64) *Checker { return &Checker{m: NewModel(), w: newWatchers(seed)} }

// watching reports whether the run has watch clients.
func (c *Checker) watching() bool { return c.w != nil && !c.noReads }

// WatchStats are what the run's watch clients did and were sent.
func (c *Checker) WatchStats() watchStats {
	if c.w == nil {
		return watchStats{}
	}
	return c.w.stats
}

func machineOf(st sim.StateMachine) (Machine, error) {
	m, ok := st.(Machine)
	if !ok {
		return Machine{}, fmt.Errorf("the state machine is a %T, not edictkv's", st)
	}
	return m, nil
}

// Applied implements sim.Model.
func (c *Checker) Applied(p edict.ProcessID, st sim.StateMachine, e fsm.Entry, res any) error {
	mc, err := machineOf(st)
	if err != nil {
		return err
	}
	if err := c.applied(mc, e, res); err != nil {
		return err
	}
	if c.watching() {
		return c.w.hook(c, p, mc.State)
	}
	return nil
}

func (c *Checker) applied(mc Machine, e fsm.Entry, res any) error {
	if e.Index >= c.m.Next() {
		if err := c.m.Learn(e.Index, e.Data, e.Stamp); err != nil {
			return err
		}
	} else if want := c.m.entries[e.Index].data; !bytes.Equal(want, e.Data) {
		return fmt.Errorf("applied %d bytes at index %d, where the committed entry holds %d others", len(e.Data), e.Index, len(want))
	}
	if err := c.checkResult(e.Index, res); err != nil {
		return fmt.Errorf("the answer to entry %d: %w", e.Index, err)
	}
	rev, compact := c.m.At(e.Index)
	if err := checkPosition(mc, e.Index, rev, compact); err != nil {
		return err
	}
	if before, _ := c.m.At(e.Index - 1); rev != before {
		got, err := readRev(mc, rev)
		if err != nil {
			return err
		}
		if err := c.checkRev(rev, got); err != nil {
			return err
		}
		if i, err := mc.RevisionIndex(rev); err != nil || i != e.Index {
			return fmt.Errorf("revision %d maps to index %d (%v), made by entry %d", rev, i, err, e.Index)
		}
	}
	return nil
}

// Started implements sim.Model.
func (c *Checker) Started(p edict.ProcessID, st sim.StateMachine, applied uint64) error {
	if err := c.checkReplica(st, applied); err != nil {
		return err
	}
	if c.watching() {
		mc, _ := machineOf(st)
		return c.w.hook(c, p, mc.State)
	}
	return nil
}

// Restored implements sim.Model.
func (c *Checker) Restored(p edict.ProcessID, st sim.StateMachine, index uint64) error {
	if err := c.checkReplica(st, index); err != nil {
		return err
	}
	if c.watching() {
		mc, _ := machineOf(st)
		return c.w.restored(c, p, mc.State)
	}
	return nil
}

// End implements sim.Model: the running replicas against each other,
// then each against the model.
func (c *Checker) End(up map[edict.ProcessID]sim.ModelState) error {
	ids := slices.Sorted(maps.Keys(up))
	hs := make([]history, len(ids))
	for i, id := range ids {
		mc, err := machineOf(up[id].State)
		if err != nil {
			return err
		}
		if hs[i], err = readHistory(mc); err != nil {
			return fmt.Errorf("%v: %w", id, err)
		}
	}
	for i := range ids {
		for j := i + 1; j < len(ids); j++ {
			a, b := hs[i], hs[j]
			for r := max(a.from, b.from); r <= min(a.to, b.to); r++ {
				if d := diff(a.at(r), b.at(r)); d != "" {
					return fmt.Errorf("%v and %v disagree at revision %d (%v: %s)", ids[i], ids[j], r, ids[i], d)
				}
			}
		}
	}
	for i, id := range ids {
		mc, _ := machineOf(up[id].State)
		if err := c.checkHistory(mc, up[id].Applied, hs[i]); err != nil {
			return fmt.Errorf("%v: %w", id, err)
		}
	}
	if c.watching() {
		return c.w.end(c, up)
	}
	return nil
}

// checkReplica checks the whole history a replica keeps, which has
// applied the entries up to applied.
func (c *Checker) checkReplica(st sim.StateMachine, applied uint64) error {
	mc, err := machineOf(st)
	if err != nil {
		return err
	}
	h, err := readHistory(mc)
	if err != nil {
		return err
	}
	return c.checkHistory(mc, applied, h)
}

// checkPosition checks a replica's applied index, revision and
// compaction revision.
func checkPosition(mc Machine, applied uint64, rev, compact int64) error {
	if got := mc.AppliedIndex(); got != applied {
		return fmt.Errorf("the state's applied index is %d, the log's %d", got, applied)
	}
	if got, gotc := mc.Rev(), mc.CompactRev(); got != rev || gotc != compact {
		return fmt.Errorf("after entry %d the state is at revision %d compacted at %d; the model at %d compacted at %d",
			applied, got, gotc, rev, compact)
	}
	return nil
}

// history is what a replica keeps: the keys alive at every revision from
// its compaction revision (1 before any) to its current one, with the
// stamps its reads gave.
type history struct {
	from, to int64
	states   [][]*mvccpb.KeyValue
	stamps   []map[int64]edict.Stamp
}

func (h history) at(r int64) []*mvccpb.KeyValue { return h.states[r-h.from] }

// everything is the range of every key.
var everything = []byte{0}

// readRev reads every key at revision r.
func readRev(mc Machine, r int64) ([]*mvccpb.KeyValue, error) {
	resp, _, err := mc.Range(context.Background(), &pb.RangeRequest{Key: everything, RangeEnd: everything, Revision: r})
	if err != nil {
		return nil, fmt.Errorf("reading revision %d (the state at %d, compacted at %d): %w", r, mc.Rev(), mc.CompactRev(), err)
	}
	return resp.Kvs, nil
}

// readHistory reads every revision a replica keeps, and checks that it
// refuses those just outside.
func readHistory(mc Machine) (history, error) {
	h := history{from: max(mc.CompactRev(), 1), to: mc.Rev()}
	ctx := context.Background()
	for r := h.from; r <= h.to; r++ {
		resp, stamps, err := mc.Range(ctx, &pb.RangeRequest{Key: everything, RangeEnd: everything, Revision: r})
		if err != nil {
			return h, fmt.Errorf("reading revision %d (the state at %d, compacted at %d): %w", r, h.to, mc.CompactRev(), err)
		}
		h.states = append(h.states, resp.Kvs)
		h.stamps = append(h.stamps, stamps)
	}
	if h.from > 1 {
		if _, _, err := mc.Range(ctx, &pb.RangeRequest{Key: everything, RangeEnd: everything, Revision: h.from - 1}); !errors.Is(err, kvstate.ErrCompacted) {
			return h, fmt.Errorf("a read at revision %d, below the compaction at %d, answered %v, not ErrCompacted", h.from-1, h.from, err)
		}
	}
	if _, _, err := mc.Range(ctx, &pb.RangeRequest{Key: everything, RangeEnd: everything, Revision: h.to + 1}); !errors.Is(err, kvstate.ErrFutureRev) {
		return h, fmt.Errorf("a read at revision %d, above the current %d, answered %v, not ErrFutureRev", h.to+1, h.to, err)
	}
	return h, nil
}

// checkHistory checks a replica's history against the model's at the
// entries up to applied.
func (c *Checker) checkHistory(mc Machine, applied uint64, h history) error {
	if applied >= c.m.Next() {
		return fmt.Errorf("the state holds entries up to %d; the model knows only those up to %d", applied, c.m.Next()-1)
	}
	rev, compact := c.m.At(applied)
	if err := checkPosition(mc, applied, rev, compact); err != nil {
		return err
	}
	for r := h.from; r <= h.to; r++ {
		if err := c.checkRev(r, h.at(r)); err != nil {
			return err
		}
		if err := c.checkStamps(h.stamps[r-h.from], namesOf(h.at(r))); err != nil {
			return fmt.Errorf("reading revision %d: %w", r, err)
		}
		if r < 2 {
			continue
		}
		if i, err := mc.RevisionIndex(r); err != nil || i != c.m.revIndex[r] {
			return fmt.Errorf("revision %d maps to index %d (%v), made by entry %d", r, i, err, c.m.revIndex[r])
		}
	}
	return nil
}

// checkRev compares what a replica reads at revision r with the model.
func (c *Checker) checkRev(r int64, got []*mvccpb.KeyValue) error {
	if d := diff(got, c.m.State(r)); d != "" {
		return fmt.Errorf("revision %d (%s) reads %s", r, c.describeRev(r), d)
	}
	return nil
}

// describeRev tells what revision r changed, by the model.
func (c *Checker) describeRev(r int64) string {
	if r < 2 {
		return "the empty state"
	}
	var ch []string
	before, after := c.m.State(r-1), c.m.State(r)
	for _, kv := range after {
		if kv.ModRevision == r {
			ch = append(ch, fmt.Sprintf("put %q", kv.Key))
		}
	}
	for _, kv := range before {
		if len(keysIn(after, kv.Key, nil)) == 0 {
			ch = append(ch, fmt.Sprintf("deleted %q", kv.Key))
		}
	}
	return fmt.Sprintf("made by entry %d: %s", c.m.revIndex[r], strings.Join(ch, ", "))
}

func kvString(kv *mvccpb.KeyValue) string {
	if kv == nil {
		return "absent"
	}
	return fmt.Sprintf("{value %q create %d mod %d version %d lease %d}", kv.Value, kv.CreateRevision, kv.ModRevision, kv.Version, kv.Lease)
}

func sameKV(a, b *mvccpb.KeyValue) bool {
	return bytes.Equal(a.Key, b.Key) && bytes.Equal(a.Value, b.Value) && a.CreateRevision == b.CreateRevision &&
		a.ModRevision == b.ModRevision && a.Version == b.Version && a.Lease == b.Lease
}

// diff describes how got differs from want (both sorted by key), "" if
// they hold the same keys alike.
func diff(got, want []*mvccpb.KeyValue) string {
	var out []string
	i, j := 0, 0
	for (i < len(got) || j < len(want)) && len(out) < 4 {
		switch {
		case j == len(want) || i < len(got) && bytes.Compare(got[i].Key, want[j].Key) < 0:
			out = append(out, fmt.Sprintf("key %q %s where the model has it absent", got[i].Key, kvString(got[i])))
			i++
		case i == len(got) || bytes.Compare(got[i].Key, want[j].Key) > 0:
			out = append(out, fmt.Sprintf("key %q absent where the model has %s", want[j].Key, kvString(want[j])))
			j++
		default:
			if !sameKV(got[i], want[j]) {
				out = append(out, fmt.Sprintf("key %q %s where the model has %s", got[i].Key, kvString(got[i]), kvString(want[j])))
			}
			i, j = i+1, j+1
		}
	}
	return strings.Join(out, "; ")
}

func namesOf(kvs []*mvccpb.KeyValue) []int64 {
	var out []int64
	for _, kv := range kvs {
		if kv.ModRevision > 1 {
			out = append(out, kv.ModRevision)
		}
	}
	return out
}

// checkStamps checks that an answer carries the stamp of exactly the
// revisions it names, each the stamp of the entry that made it.
func (c *Checker) checkStamps(got map[int64]edict.Stamp, names []int64) error {
	want := map[int64]bool{}
	for _, r := range names {
		want[r] = true
	}
	for _, r := range slices.Sorted(maps.Keys(want)) {
		s, ok := got[r]
		switch {
		case !ok:
			return fmt.Errorf("the answer names revision %d but carries no stamp of it", r)
		case !s.Equal(c.m.revStamp[r]):
			return fmt.Errorf("the answer gives revision %d the stamp %v; entry %d, which made it, has %v", r, s, c.m.revIndex[r], c.m.revStamp[r])
		}
	}
	for _, r := range slices.Sorted(maps.Keys(got)) {
		if !want[r] {
			return fmt.Errorf("the answer carries a stamp of revision %d, which it does not name", r)
		}
	}
	return nil
}

// message is a protobuf message of etcd's API.
type message interface {
	Marshal() ([]byte, error)
	String() string
}

// sameMessage compares two messages by their encoding (nil and empty
// fields alike, as on the wire).
func sameMessage(a, b message) (bool, error) {
	ab, err := a.Marshal()
	if err != nil {
		return false, err
	}
	bb, err := b.Marshal()
	if err != nil {
		return false, err
	}
	return bytes.Equal(ab, bb), nil
}

// responses are the responses a result carries, by kind.
func responses(r *kvstate.Result) map[kvstate.Kind]message {
	out := map[kvstate.Kind]message{}
	if r.Put != nil {
		out[kvstate.KindPut] = r.Put
	}
	if r.DeleteRange != nil {
		out[kvstate.KindDeleteRange] = r.DeleteRange
	}
	if r.Txn != nil {
		out[kvstate.KindTxn] = r.Txn
	}
	if r.Compaction != nil {
		out[kvstate.KindCompaction] = r.Compaction
	}
	if r.Alarm != nil {
		out[kvstate.KindAlarm] = r.Alarm
	}
	return out
}

// checkResult compares what applying the entry at index answered with
// the model's outcome.
func (c *Checker) checkResult(index uint64, res any) error {
	want := c.m.entries[index].want
	r, ok := res.(*kvstate.Result)
	if !ok {
		return fmt.Errorf("a %T, not a *kvstate.Result", res)
	}
	switch {
	case r.Index != index:
		return fmt.Errorf("the result names index %d", r.Index)
	case r.Rev != want.rev:
		return fmt.Errorf("revision %d, the model's %d (refusal %v)", r.Rev, want.rev, r.Err)
	case want.err == nil && r.Err != nil:
		return fmt.Errorf("refused (%v); the model applies it", r.Err)
	case want.err != nil && !errors.Is(r.Err, want.err):
		return fmt.Errorf("answered %v; the model refuses it with %v", r.Err, want.err)
	}
	got := responses(r)
	if want.resp == nil {
		if len(got) != 0 {
			return fmt.Errorf("responses %v where the model has none", got)
		}
	} else {
		g, ok := got[want.kind]
		if !ok || len(got) != 1 {
			return fmt.Errorf("responses %v where the model has a %v response", got, want.kind)
		}
		same, err := sameMessage(g, want.resp)
		if err != nil {
			return err
		}
		if !same {
			return fmt.Errorf("%v response %v; the model's %v", want.kind, g, want.resp)
		}
	}
	if want.err != nil || want.kind == 0 || want.kind == kvstate.KindCompaction {
		if len(r.Stamps) != 0 {
			return fmt.Errorf("stamps %v on an answer that names no revision", r.Stamps)
		}
		return nil
	}
	return c.checkStamps(r.Stamps, want.names)
}

// checkCommand checks the answer a command's proposer got: the entry
// committed at index is the command, and the answer is the model's.
func (c *Checker) checkCommand(cmd []byte, index uint64, res any) error {
	if index >= c.m.Next() {
		return fmt.Errorf("answered at index %d, which no replica applied", index)
	}
	if !bytes.Equal(c.m.entries[index].data, cmd) {
		return fmt.Errorf("answered with the result of index %d, which holds another entry", index)
	}
	return c.checkResult(index, res)
}

// checkRead checks a read served by a replica that applied the entries up
// to applied.
func (c *Checker) checkRead(st sim.StateMachine, applied uint64, req *pb.RangeRequest) error {
	mc, err := machineOf(st)
	if err != nil {
		return err
	}
	if applied >= c.m.Next() {
		return fmt.Errorf("the state holds entries up to %d; the model knows only those up to %d", applied, c.m.Next()-1)
	}
	want, err := c.m.Read(req, applied)
	if err != nil {
		return err
	}
	resp, stamps, err := mc.Range(context.Background(), req)
	switch {
	case want.refusal != nil && !errors.Is(err, want.refusal):
		return fmt.Errorf("%v answered %v (error %v); the model refuses it with %v", req, resp, err, want.refusal)
	case want.refusal != nil:
		return nil
	case err != nil:
		return fmt.Errorf("%v refused (%v); the model answers %v", req, err, want.resp)
	}
	same, err := sameMessage(resp, want.resp)
	if err != nil {
		return err
	}
	if !same {
		return fmt.Errorf("%v answered %v; the model %v", req, resp, want.resp)
	}
	if err := c.checkStamps(stamps, namesOf(resp.Kvs)); err != nil {
		return fmt.Errorf("%v: %w", req, err)
	}
	return nil
}
