package simstate

import (
	"bytes"
	"fmt"
	"slices"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/edictlog/edictlog/cmd/edictkv/internal/kvstate"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/mvcc"
	"github.com/edictlog/edictlog/edict"
)

// Model is etcd's keyspace computed the simple way from the committed
// log: every revision's whole state, kept forever, and every entry's
// answer. It knows nothing of the MVCC store (no key index, no
// generations, no batches, no physical compaction): it applies etcd's
// rules to maps, so that the store is checked against their meaning, not
// against a copy of its own code. It reads the entries with kvstate's
// envelope decoder, the format both share. It keeps each revision's
// changes in the order its write made them, as the events a watcher is
// sent.
//
// It models the requests the workload writes (Put with prev_kv, Put
// with a lease ID, DeleteRange with prev_kv, Txn with compares on every
// target over a key or a range, nested, and ranges, puts and deletes in
// its branches, Compaction) and refuses any other (ignore_value,
// ignore_lease, filters and sorts in ranges, alarms, member records), so
// that nothing is checked against a guess.
type Model struct {
	// entries[i] is the committed entry at log index i (entries[0]: the
	// empty state before the first).
	entries []entry
	// hist[r] holds the keys alive at revision r, sorted by key (hist[0]
	// is unused; revision 1 is the empty state); revIndex[r] and
	// revStamp[r] are the index and stamp of the entry that made r.
	hist     [][]*mvccpb.KeyValue
	revIndex []uint64
	revStamp []edict.Stamp
	// events[r] are the changes that made revision r, in the order the
	// write made them (etcd's sub revisions): what a watcher of every key
	// is sent for r.
	events  [][]event
	compact int64 // -1 before any compaction
}

// event is one change of a revision, as a watcher is to be sent it.
type event struct {
	del bool
	// kv is the key as the change left it: for a delete, the key alone
	// with the deletion's revision as its mod_revision (etcd's tombstone
	// event).
	kv *mvccpb.KeyValue
	// prev is the key as the change found it, nil if it did not exist.
	prev *mvccpb.KeyValue
}

// entry is a committed entry and what it did.
type entry struct {
	data  []byte
	stamp edict.Stamp
	// rev and compact are the revision and compaction revision after it.
	rev, compact int64
	want         outcome
}

// outcome is what applying an entry answers: kvstate.Result's fields, as
// the model computes them.
type outcome struct {
	rev  int64
	err  error        // the refusal's sentinel, nil if none
	kind kvstate.Kind // 0 for an entry with no request
	// resp is the response of the request's kind (nil when refused).
	resp interface {
		Marshal() ([]byte, error)
		String() string
	}
	// names are the revisions above 1 whose stamps the answer must carry.
	names []int64
}

// NewModel returns the model of an empty keyspace: revision 1, no entry.
func NewModel() *Model {
	return &Model{entries: []entry{{rev: 1, compact: -1}}, hist: [][]*mvccpb.KeyValue{nil, nil},
		revIndex: []uint64{0, 0}, revStamp: []edict.Stamp{{}, {}}, events: [][]event{nil, nil}, compact: -1}
}

// Next is the index of the next entry the model expects.
func (m *Model) Next() uint64 { return uint64(len(m.entries)) }

// Rev is the newest revision; CompactRev the newest compaction's.
func (m *Model) Rev() int64        { return int64(len(m.hist) - 1) }
func (m *Model) CompactRev() int64 { return m.compact }

// At returns the revision and compaction revision after the entry at
// index, which the model must know.
func (m *Model) At(index uint64) (rev, compact int64) {
	e := m.entries[index]
	return e.rev, e.compact
}

// State returns the keys alive at revision rev (1 ≤ rev ≤ Rev), sorted.
// The caller must not change them.
func (m *Model) State(rev int64) []*mvccpb.KeyValue { return m.hist[rev] }

// Learn applies the committed entry at index Next() and records its
// outcome. An entry the model cannot apply is an error: the workload
// wrote something the model does not know.
func (m *Model) Learn(index uint64, data []byte, stamp edict.Stamp) error {
	if index != m.Next() {
		return fmt.Errorf("the model knows the entries up to %d and is shown %d first", m.Next()-1, index)
	}
	o, err := m.apply(bytes.Clone(data), stamp, index)
	if err != nil {
		return fmt.Errorf("the entry at %d: %w", index, err)
	}
	m.entries = append(m.entries, entry{data: bytes.Clone(data), stamp: stamp, rev: m.Rev(), compact: m.compact, want: o})
	return nil
}

// keysIn returns the keys of state in the API's range [key, end): end
// empty for key alone, "\x00" for every key from key on.
func keysIn(state []*mvccpb.KeyValue, key, end []byte) []*mvccpb.KeyValue {
	var out []*mvccpb.KeyValue
	for _, kv := range state {
		if inSpan(kv.Key, key, end) {
			out = append(out, kv)
		}
	}
	return out
}

// inSpan reports whether k is in the API's range [key, end).
func inSpan(k, key, end []byte) bool {
	switch {
	case len(end) == 0:
		return bytes.Equal(k, key)
	case len(end) == 1 && end[0] == 0:
		return bytes.Compare(k, key) >= 0
	}
	return bytes.Compare(k, key) >= 0 && bytes.Compare(k, end) < 0
}

// watchEvents returns the changes to the keys in [key, end) (keysIn's
// convention) at the revisions from from to to that the model has, those
// opts filter out left out: what a watcher of those keys is sent for
// them, in order.
func (m *Model) watchEvents(key, end []byte, opts mvcc.WatchOption, from, to int64) []event {
	var out []event
	for r := max(from, 2); r <= min(to, m.Rev()); r++ {
		for _, e := range m.events[r] {
			if e.del && opts&mvcc.WatchNoDelete != 0 || !e.del && opts&mvcc.WatchNoPut != 0 || !inSpan(e.kv.Key, key, end) {
				continue
			}
			out = append(out, e)
		}
	}
	return out
}

// rangeIn answers r from state (the keys alive at the revision read),
// with header revision hdr: Count all the keys in the range, Kvs the
// first Limit of them in key order, More if the limit cut them.
func rangeIn(state []*mvccpb.KeyValue, r *pb.RangeRequest, hdr int64) (*pb.RangeResponse, error) {
	if r.SortOrder != pb.RangeRequest_NONE || r.SortTarget != pb.RangeRequest_KEY ||
		r.MinModRevision != 0 || r.MaxModRevision != 0 || r.MinCreateRevision != 0 || r.MaxCreateRevision != 0 {
		return nil, fmt.Errorf("the model has no sorts nor filters: %v", r)
	}
	in := keysIn(state, r.Key, r.RangeEnd)
	resp := &pb.RangeResponse{Header: &pb.ResponseHeader{Revision: hdr}, Count: int64(len(in))}
	if r.CountOnly {
		return resp, nil
	}
	if r.Limit > 0 && int64(len(in)) > r.Limit {
		in, resp.More = in[:r.Limit], true
	}
	for _, kv := range in {
		c := *kv
		if r.KeysOnly {
			c.Value = nil
		}
		resp.Kvs = append(resp.Kvs, &c)
	}
	return resp, nil
}

// answer is what a read answers: a refusal (ErrCompacted, ErrFutureRev)
// or a response.
type answer struct {
	resp    *pb.RangeResponse
	refusal error
}

// Read answers a range read served by a replica that applied the entries
// up to index.
func (m *Model) Read(r *pb.RangeRequest, index uint64) (answer, error) {
	rev, compact := m.At(index)
	at := r.Revision
	switch {
	case at > rev:
		return answer{refusal: kvstate.ErrFutureRev}, nil
	case at <= 0:
		at = rev
	case at < compact:
		return answer{refusal: kvstate.ErrCompacted}, nil
	}
	resp, err := rangeIn(m.hist[at], r, rev)
	return answer{resp: resp}, err
}

// work is a write's view of the keyspace: the state before it, then its
// own changes.
type work struct {
	m       *Model
	begin   int64 // the revision before the write
	keys    map[string]*mvccpb.KeyValue
	changed bool
	names   []int64
	events  []event // its changes, in order
}

func (m *Model) newWork() *work {
	w := &work{m: m, begin: m.Rev(), keys: map[string]*mvccpb.KeyValue{}}
	for _, kv := range m.hist[m.Rev()] {
		w.keys[string(kv.Key)] = kv
	}
	return w
}

// readRev is the revision the write reads at: its own once it changed
// something.
func (w *work) readRev() int64 {
	if w.changed {
		return w.begin + 1
	}
	return w.begin
}

func (w *work) state() []*mvccpb.KeyValue {
	out := make([]*mvccpb.KeyValue, 0, len(w.keys))
	for _, kv := range w.keys {
		out = append(out, kv)
	}
	slices.SortFunc(out, func(a, b *mvccpb.KeyValue) int { return bytes.Compare(a.Key, b.Key) })
	return out
}

func (w *work) name(kvs ...*mvccpb.KeyValue) {
	for _, kv := range kvs {
		if kv != nil && kv.ModRevision > 1 {
			w.names = append(w.names, kv.ModRevision)
		}
	}
}

func (w *work) put(r *pb.PutRequest) (*pb.PutResponse, error) {
	if len(r.Key) == 0 || r.IgnoreValue || r.IgnoreLease {
		return nil, fmt.Errorf("the model has no put of the empty key, ignore_value nor ignore_lease: %v", r)
	}
	rev := w.begin + 1
	prev := w.keys[string(r.Key)]
	kv := &mvccpb.KeyValue{Key: bytes.Clone(r.Key), Value: bytes.Clone(r.Value), CreateRevision: rev, ModRevision: rev, Version: 1, Lease: r.Lease}
	if prev != nil {
		kv.CreateRevision, kv.Version = prev.CreateRevision, prev.Version+1
	}
	w.keys[string(r.Key)] = kv
	w.changed = true
	w.events = append(w.events, event{kv: kv, prev: prev})
	resp := &pb.PutResponse{Header: &pb.ResponseHeader{Revision: rev}}
	if r.PrevKv && prev != nil {
		c := *prev
		resp.PrevKv = &c
		w.name(prev)
	}
	return resp, nil
}

func (w *work) deleteRange(r *pb.DeleteRangeRequest) (*pb.DeleteRangeResponse, error) {
	if len(r.Key) == 0 {
		return nil, fmt.Errorf("the model has no delete of the empty key")
	}
	gone := keysIn(w.state(), r.Key, r.RangeEnd)
	for _, kv := range gone {
		delete(w.keys, string(kv.Key))
		w.changed = true
		w.events = append(w.events, event{del: true, kv: &mvccpb.KeyValue{Key: kv.Key, ModRevision: w.begin + 1}, prev: kv})
	}
	resp := &pb.DeleteRangeResponse{Header: &pb.ResponseHeader{Revision: w.readRev()}, Deleted: int64(len(gone))}
	if r.PrevKv {
		for _, kv := range gone {
			c := *kv
			resp.PrevKvs = append(resp.PrevKvs, &c)
		}
		w.name(gone...)
	}
	return resp, nil
}

// compare is etcd's: every key of the compare's range satisfies it; with
// none, a VALUE compare fails and the others compare a zero pair.
func compare(state []*mvccpb.KeyValue, c *pb.Compare) bool {
	kvs := keysIn(state, c.Key, c.RangeEnd)
	if len(kvs) == 0 {
		if c.Target == pb.Compare_VALUE {
			return false
		}
		kvs = []*mvccpb.KeyValue{{}}
	}
	for _, kv := range kvs {
		var d int
		switch c.Target {
		case pb.Compare_VALUE:
			d = bytes.Compare(kv.Value, c.GetValue())
		case pb.Compare_VERSION:
			d = cmp3(kv.Version, c.GetVersion())
		case pb.Compare_CREATE:
			d = cmp3(kv.CreateRevision, c.GetCreateRevision())
		case pb.Compare_MOD:
			d = cmp3(kv.ModRevision, c.GetModRevision())
		case pb.Compare_LEASE:
			d = cmp3(kv.Lease, c.GetLease())
		}
		ok := false
		switch c.Result {
		case pb.Compare_EQUAL:
			ok = d == 0
		case pb.Compare_NOT_EQUAL:
			ok = d != 0
		case pb.Compare_GREATER:
			ok = d > 0
		case pb.Compare_LESS:
			ok = d < 0
		}
		if !ok {
			return false
		}
	}
	return true
}

func cmp3(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// path is the branch each txn on the way takes, depth first, all decided
// on the state before the txn.
func path(state []*mvccpb.KeyValue, t *pb.TxnRequest) []bool {
	ok := true
	for _, c := range t.Compare {
		if !compare(state, c) {
			ok = false
			break
		}
	}
	p := []bool{ok}
	for _, op := range branch(t, ok) {
		if nt := op.GetRequestTxn(); nt != nil {
			p = append(p, path(state, nt)...)
		}
	}
	return p
}

func branch(t *pb.TxnRequest, ok bool) []*pb.RequestOp {
	if ok {
		return t.Success
	}
	return t.Failure
}

// checkPath refuses the txn, before anything changes, if a range on the
// chosen path reads a revision not there (compacted or not made yet).
// It returns the path left after t's part.
func (w *work) checkPath(t *pb.TxnRequest, p []bool) ([]bool, error) {
	ok := p[0]
	p = p[1:]
	for _, op := range branch(t, ok) {
		switch {
		case op.GetRequestRange() != nil:
			switch rev := op.GetRequestRange().Revision; {
			case rev == 0:
			case rev > w.begin:
				return nil, kvstate.ErrFutureRev
			case rev < w.m.compact:
				return nil, kvstate.ErrCompacted
			}
		case op.GetRequestTxn() != nil:
			var err error
			if p, err = w.checkPath(op.GetRequestTxn(), p); err != nil {
				return nil, err
			}
		}
	}
	return p, nil
}

// execute runs the chosen branch of t in order, each range seeing the
// writes before it, and returns t's response and the path left.
func (w *work) execute(t *pb.TxnRequest, p []bool) (*pb.TxnResponse, []bool, error) {
	ok := p[0]
	p = p[1:]
	ops := branch(t, ok)
	resp := &pb.TxnResponse{Succeeded: ok, Responses: make([]*pb.ResponseOp, len(ops))}
	for i, op := range ops {
		out := &pb.ResponseOp{}
		resp.Responses[i] = out
		switch {
		case op.GetRequestRange() != nil:
			r := op.GetRequestRange()
			state := w.state()
			if r.Revision > 0 {
				state = w.m.hist[r.Revision]
			}
			rr, err := rangeIn(state, r, w.readRev())
			if err != nil {
				return nil, nil, err
			}
			w.name(rr.Kvs...)
			out.Response = &pb.ResponseOp_ResponseRange{ResponseRange: rr}
		case op.GetRequestPut() != nil:
			pr, err := w.put(op.GetRequestPut())
			if err != nil {
				return nil, nil, err
			}
			out.Response = &pb.ResponseOp_ResponsePut{ResponsePut: pr}
		case op.GetRequestDeleteRange() != nil:
			dr, err := w.deleteRange(op.GetRequestDeleteRange())
			if err != nil {
				return nil, nil, err
			}
			out.Response = &pb.ResponseOp_ResponseDeleteRange{ResponseDeleteRange: dr}
		case op.GetRequestTxn() != nil:
			nested, rest, err := w.execute(op.GetRequestTxn(), p)
			if err != nil {
				return nil, nil, err
			}
			p = rest
			// etcd's: only the outermost txn's header carries the revision.
			nested.Header = &pb.ResponseHeader{}
			out.Response = &pb.ResponseOp_ResponseTxn{ResponseTxn: nested}
		default:
			return nil, nil, fmt.Errorf("an empty op in a txn")
		}
	}
	return resp, p, nil
}

// commit makes w's changes the next revision, made by the entry at index
// with stamp, if it changed anything.
func (w *work) commit(index uint64, stamp edict.Stamp) {
	if !w.changed {
		return
	}
	m := w.m
	m.hist = append(m.hist, w.state())
	m.events = append(m.events, w.events)
	m.revIndex = append(m.revIndex, index)
	m.revStamp = append(m.revStamp, stamp)
	if !stamp.IsZero() {
		w.names = append(w.names, m.Rev())
	}
}

// apply applies one entry's request and returns its outcome.
func (m *Model) apply(data []byte, stamp edict.Stamp, index uint64) (outcome, error) {
	o := outcome{rev: m.Rev()}
	if len(data) == 0 {
		return o, nil
	}
	req, err := kvstate.DecodeRequest(data)
	if err != nil {
		return o, fmt.Errorf("not a request: %w", err)
	}
	o.kind = req.Kind()
	if req.User != "" {
		return o, fmt.Errorf("the model has no users")
	}
	w := m.newWork()
	switch {
	case req.Put != nil:
		resp, err := w.put(req.Put)
		if err != nil {
			return o, err
		}
		w.commit(index, stamp)
		o.resp = resp
	case req.DeleteRange != nil:
		resp, err := w.deleteRange(req.DeleteRange)
		if err != nil {
			return o, err
		}
		w.commit(index, stamp)
		o.resp = resp
	case req.Txn != nil:
		p := path(m.hist[m.Rev()], req.Txn)
		if _, err := w.checkPath(req.Txn, p); err != nil {
			o.err = err
			return o, nil
		}
		resp, _, err := w.execute(req.Txn, p)
		if err != nil {
			return o, err
		}
		resp.Header = &pb.ResponseHeader{Revision: w.readRev()}
		w.commit(index, stamp)
		o.resp = resp
	case req.Compaction != nil:
		switch rev := req.Compaction.Revision; {
		case rev <= m.compact:
			o.err = kvstate.ErrCompacted
		case rev > m.Rev():
			o.err = kvstate.ErrFutureRev
		default:
			m.compact = rev
			o.resp = &pb.CompactionResponse{Header: &pb.ResponseHeader{Revision: m.Rev()}}
		}
		return o, nil
	default:
		return o, fmt.Errorf("the model has no %v request", req.Kind())
	}
	o.rev, o.names = m.Rev(), w.names
	return o, nil
}
