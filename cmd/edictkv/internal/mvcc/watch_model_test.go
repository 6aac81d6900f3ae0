package mvcc

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/edictlog/edictlog/cmd/edictkv/internal/mvcc/backend"
)

var (
	flagWatchSeed  = flag.Uint64("watch.seed", 0, "run the watch model test with this seed only")
	flagWatchSeeds = flag.Int("watch.seeds", 0, "seeds per backend for the watch model test (default 40 memory, 4 bolt; 6 and 1 with -short)")
	flagWatchSteps = flag.Int("watch.steps", 1500, "steps per seed in the watch model test")
)

// wsub is one change of a write transaction: a put, or a deletion of the
// keys in [key, end) (Store.Range's convention).
type wsub struct {
	put      bool
	key, end string
	val      string
	lease    int64
}

// wop is one entry of the log both stores apply: a write transaction, a
// compaction, or an entry that changes nothing.
type wop struct {
	kind byte // 't', 'c', 'n'
	subs []wsub
	rev  int64
}

// mevent is an event of the model's history.
type mevent struct {
	del  bool
	key  string
	kv   mkv // the key after a put
	prev *mkv
}

// wmodel is the history every store of the test follows: the state and
// the events of every revision.
type wmodel struct {
	states  []map[string]mkv // states[r]; states[0] unused
	events  [][]mevent       // events[r]
	compact int64
	maxRev  int // the most changes of one revision
}

func (m *wmodel) rev() int64 { return int64(len(m.states) - 1) }

// apply runs op on the model, as the store does.
func (m *wmodel) apply(op wop) {
	switch op.kind {
	case 'c':
		if op.rev > m.compact && op.rev <= m.rev() {
			m.compact = op.rev
		}
	case 't':
		cur := m.rev()
		rev := cur + 1
		work := maps.Clone(m.states[cur])
		var evs []mevent
		for _, sb := range op.subs {
			if sb.put {
				prev, had := work[sb.key]
				next := mkv{value: sb.val, create: rev, mod: rev, ver: 1, lease: sb.lease}
				ev := mevent{key: sb.key, kv: next}
				if had {
					next.create, next.ver = prev.create, prev.ver+1
					ev.kv, ev.prev = next, &prev
				}
				work[sb.key] = next
				evs = append(evs, ev)
				continue
			}
			for _, k := range slices.Sorted(maps.Keys(work)) {
				if inRange(k, sb.key, sb.end) {
					prev := work[k]
					evs = append(evs, mevent{del: true, key: k, prev: &prev})
					delete(work, k)
				}
			}
		}
		if len(evs) > 0 {
			m.states = append(m.states, work)
			m.events = append(m.events, evs)
			m.maxRev = max(m.maxRev, len(evs))
		}
	}
}

// wwatcher is what the checker knows of one watcher.
type wwatcher struct {
	id       WatchID
	key, end string
	opts     WatchOption
	start    int64
	// next is the first revision not yet covered by a response.
	next int64
	// gone: cancelled by compaction; cancelled: by Cancel or Close.
	gone, cancelled bool
	got             int
}

type wstream struct {
	ws       *WatchStream
	watchers map[WatchID]*wwatcher
	closed   bool
	// readEvery: the stream is read once in that many reading steps;
	// stuckUntil: never before that step.
	readEvery  int
	stuckUntil int
	nextID     WatchID
	// allProgress holds, for each progress for all watchers sent and not
	// read yet, the watchers it was sent for.
	allProgress [][]WatchID
}

// watchRun drives a follower store with watchers and the leader store it
// follows, by log or by snapshot, against the model.
type watchRun struct {
	t *testing.T
	// onFail, if not nil, takes a failure instead of t.
	onFail func(msg string)
	// responses, if not nil, records every response read, as text.
	responses *[]string
	rng       *rand.Rand
	seed      uint64
	kind      string
	opts      Options
	dir       string

	m       *wmodel
	log     []wop
	lead    *Store
	f       *Store
	fIndex  int // log entries the follower applied
	streams []*wstream
	step    int
	trace   []string
	// maxCompact is the highest compaction revision the follower had.
	maxCompact int64
	// What the run covered.
	events, cancels, restores, maxParked int
}

var watchKeys = []string{"a", "a/1", "a/2", "a/2/x", "b", "b/1", "c", "k", "z"}

func (r *watchRun) note(format string, args ...any) {
	r.trace = append(r.trace, fmt.Sprintf("%d: ", r.step)+fmt.Sprintf(format, args...))
	if len(r.trace) > 30 {
		r.trace = r.trace[1:]
	}
}

func (r *watchRun) fatalf(format string, args ...any) {
	r.t.Helper()
	if r.onFail != nil {
		r.onFail(fmt.Sprintf("seed %d (%s), step %d: %s", r.seed, r.kind, r.step, fmt.Sprintf(format, args...)))
	}
	r.t.Fatalf("seed %d (%s), step %d: %s\nlast operations:\n  %s\nreplay: go test ./cmd/edictkv/internal/mvcc/ -run TestWatchModel -watch.seed=%d -watch.steps=%d",
		r.seed, r.kind, r.step, fmt.Sprintf(format, args...), strings.Join(r.trace, "\n  "), r.seed, *flagWatchSteps)
}

func (r *watchRun) open(name string) *Store {
	var s *Store
	var err error
	if r.kind == "memory" {
		s, err = Open(backend.NewMemory(), r.opts)
	} else {
		s, err = OpenFile(filepath.Join(r.dir, name), testBoltOptions, r.opts)
	}
	if err != nil {
		r.fatalf("open: %v", err)
	}
	return s
}

func (r *watchRun) key() string { return watchKeys[r.rng.IntN(len(watchKeys))] }

// keySpec is a watched or deleted range: a key, a prefix, a range, from a
// key on, or everything.
func (r *watchRun) keySpec() (string, string) {
	k := r.key()
	switch r.rng.IntN(6) {
	case 0, 1:
		return k, ""
	case 2:
		return k, k[:len(k)-1] + string(k[len(k)-1]+1) // prefix
	case 3:
		return k, "\x00"
	case 4:
		return "\x00", "\x00"
	default:
		e := r.key()
		if e <= k {
			return k, k + "\x00"
		}
		return k, e
	}
}

func (r *watchRun) genOp() wop {
	switch x := r.rng.IntN(60); {
	case x < 1:
		// Mostly well behind the head, as servers compact; sometimes
		// anywhere, refused ones included.
		rev := r.m.rev() - 10 - r.rng.Int64N(60)
		if r.rng.IntN(4) == 0 {
			rev = r.m.compact + r.rng.Int64N(r.m.rev()-r.m.compact+2) - 1
		}
		return wop{kind: 'c', rev: rev}
	case x < 4:
		return wop{kind: 'n'}
	default:
		op := wop{kind: 't'}
		for range 1 + r.rng.IntN(4) {
			if r.rng.IntN(4) == 0 {
				k, e := r.keySpec()
				op.subs = append(op.subs, wsub{key: k, end: e})
			} else {
				op.subs = append(op.subs, wsub{put: true, key: r.key(), val: fmt.Sprintf("v%d", r.rng.IntN(100)), lease: int64(r.rng.IntN(2))})
			}
		}
		return op
	}
}

// applyOp applies the log entry at index (1-based) to s.
func (r *watchRun) applyOp(s *Store, index int) {
	op := r.log[index-1]
	switch op.kind {
	case 'n':
		if err := s.SetConsistentIndex(uint64(index)); err != nil {
			r.fatalf("entry %d: %v", index, err)
		}
	case 'c':
		_, err := s.Compact(uint64(index), op.rev)
		if err != nil && !errors.Is(err, ErrCompacted) && !errors.Is(err, ErrFutureRev) {
			r.fatalf("entry %d: compact %d: %v", index, op.rev, err)
		}
	case 't':
		tw, err := s.Write(uint64(index))
		if err != nil {
			r.fatalf("entry %d: %v", index, err)
		}
		for _, sb := range op.subs {
			if sb.put {
				_, err = tw.Put([]byte(sb.key), []byte(sb.val), sb.lease, PutOptions{})
			} else {
				_, err = tw.DeleteRange(context.Background(), []byte(sb.key), bytesOrNil(sb.end), false)
			}
			if err != nil {
				tw.End()
				r.fatalf("entry %d: %v", index, err)
			}
		}
		tw.End()
	}
}

// lead appends a new entry to the log and applies it to the leader.
func (r *watchRun) leadOne() {
	op := r.genOp()
	r.log = append(r.log, op)
	r.m.apply(op)
	r.applyOp(r.lead, len(r.log))
	if r.lead.Rev() != r.m.rev() {
		r.fatalf("leader at revision %d, model %d", r.lead.Rev(), r.m.rev())
	}
	r.note("entry %d: %c %d subs, rev %d (model compact %d)", len(r.log), op.kind, len(op.subs), r.m.rev(), r.m.compact)
}

func (r *watchRun) followOne() {
	if r.fIndex == len(r.log) {
		return
	}
	r.fIndex++
	r.applyOp(r.f, r.fIndex)
	r.note("follower applies %d: rev %d", r.fIndex, r.f.Rev())
	r.maxCompact = max(r.maxCompact, r.f.CompactRev())
}

// restore moves the follower to the leader's state by a snapshot:
// Restore, or Stage and InstallStaged.
func (r *watchRun) restore() {
	sn, err := r.lead.Snapshot()
	if err != nil {
		r.fatalf("snapshot: %v", err)
	}
	var buf bytes.Buffer
	if _, err := sn.WriteTo(&buf); err != nil {
		r.fatalf("snapshot: %v", err)
	}
	sn.Close()
	index := sn.Index()
	if r.rng.IntN(2) == 0 {
		if err := r.f.Restore(&buf); err != nil {
			r.fatalf("restore: %v", err)
		}
	} else {
		if err := r.f.Stage(index, &buf, nil); err != nil {
			r.fatalf("stage: %v", err)
		}
		if err := r.f.InstallStaged(index, nil); err != nil {
			r.fatalf("install staged: %v", err)
		}
	}
	r.fIndex = int(index)
	r.restores++
	r.note("follower restored to entry %d: rev %d compact %d", index, r.f.Rev(), r.f.CompactRev())
	if r.f.Rev() != sn.Rev() {
		r.fatalf("restored to revision %d, snapshot at %d", r.f.Rev(), sn.Rev())
	}
	r.maxCompact = max(r.maxCompact, r.f.CompactRev())
}

func (r *watchRun) newWatcher() {
	if len(r.streams) == 0 || r.rng.IntN(5) == 0 {
		st := &wstream{ws: r.f.NewWatchStream(), watchers: map[WatchID]*wwatcher{}, nextID: 1000}
		switch r.rng.IntN(4) {
		case 0:
			st.readEvery = 1
		case 1:
			st.readEvery = 3
		case 2:
			st.readEvery = 15
		default:
			st.readEvery = 1
			st.stuckUntil = r.step + 100 + r.rng.IntN(400)
		}
		r.streams = append(r.streams, st)
	}
	st := r.streams[r.rng.IntN(len(r.streams))]
	if st.closed {
		return
	}
	key, end := r.keySpec()
	cur := r.f.Rev()
	var start int64
	switch r.rng.IntN(7) {
	case 0:
		start = 0
	case 1:
		start = cur + 1
	case 2:
		start = cur + 1 + r.rng.Int64N(6)
	case 3:
		start = 1 + r.rng.Int64N(cur)
	default:
		start = max(1, cur-r.rng.Int64N(40))
	}
	var opts []WatchOption
	var o WatchOption
	for _, x := range []WatchOption{WatchPrevKV, WatchNoPut, WatchNoDelete} {
		if r.rng.IntN(3) == 0 {
			opts = append(opts, x)
			o |= x
		}
	}
	id := AutoWatchID
	if r.rng.IntN(3) == 0 {
		id = st.nextID
		st.nextID++
	}
	got, err := st.ws.Watch(id, []byte(key), bytesOrNil(end), start, opts...)
	if err != nil {
		r.fatalf("watch %q-%q from %d: %v", key, end, start, err)
	}
	if id != AutoWatchID && got != id {
		r.fatalf("watch with id %d got %d", id, got)
	}
	if st.watchers[got] != nil {
		r.fatalf("watch id %d given twice", got)
	}
	w := &wwatcher{id: got, key: key, end: end, opts: o, start: start, next: start}
	if start == 0 {
		w.next = cur + 1
	}
	st.watchers[got] = w
	r.note("watch %d on stream %p: %q-%q from %d (next %d) opts %b", got, st, key, end, start, w.next, o)
}

// expect returns the model's events for w at revisions [from, to].
func (r *watchRun) expect(w *wwatcher, from, to int64) []mevent {
	var out []mevent
	for rev := max(from, 1); rev <= min(to, r.m.rev()); rev++ {
		for _, e := range r.m.events[rev] {
			if !inRange(e.key, w.key, w.end) {
				continue
			}
			if e.del && w.opts&WatchNoDelete != 0 || !e.del && w.opts&WatchNoPut != 0 {
				continue
			}
			out = append(out, e)
		}
	}
	return out
}

func (r *watchRun) mkvOf(k string, s mkv) *mvccpb.KeyValue {
	return &mvccpb.KeyValue{Key: []byte(k), Value: []byte(s.value), CreateRevision: s.create, ModRevision: s.mod, Version: s.ver, Lease: s.lease}
}

// checkResponse checks one response against the model; rev and compact
// are the follower's revisions when it was received.
func (r *watchRun) checkResponse(st *wstream, resp WatchResponse, rev, compact int64) {
	if r.responses != nil {
		*r.responses = append(*r.responses, fmt.Sprintf("%d/%d: %+v", slices.Index(r.streams, st), resp.WatchID, resp))
	}
	if resp.Revision > rev {
		r.fatalf("response %+v promises revision %d, the follower was at %d", resp, resp.Revision, rev)
	}
	if resp.WatchID == AllWatchers {
		if len(resp.Events) != 0 || resp.CompactRevision != 0 {
			r.fatalf("progress for all with events or compaction: %+v", resp)
		}
		if len(st.allProgress) == 0 {
			r.fatalf("a progress for all watchers not asked for: %+v", resp)
		}
		for _, id := range st.allProgress[0] {
			if w := st.watchers[id]; !w.gone {
				r.checkProgress(w, resp.Revision)
			}
		}
		st.allProgress = st.allProgress[1:]
		return
	}
	w := st.watchers[resp.WatchID]
	if w == nil {
		r.fatalf("response for unknown watcher %d", resp.WatchID)
	}
	if w.gone {
		r.fatalf("response for watcher %d after its compaction: %+v", w.id, resp)
	}
	if resp.CompactRevision != 0 {
		if len(resp.Events) != 0 || resp.CompactRevision <= w.next || resp.CompactRevision > compact {
			r.fatalf("watcher %d (next %d) cancelled by compaction %d; the follower's compaction was %d", w.id, w.next, resp.CompactRevision, compact)
		}
		w.gone = true
		r.cancels++
		r.note("watcher %d (next %d) cancelled by compaction at %d", w.id, w.next, resp.CompactRevision)
		return
	}
	if len(resp.Events) == 0 {
		r.checkProgress(w, resp.Revision)
		return
	}
	if resp.Revision < w.next {
		r.fatalf("watcher %d (next %d): response at revision %d goes back", w.id, w.next, resp.Revision)
	}
	want := r.expect(w, w.next, resp.Revision)
	if len(want) != len(resp.Events) {
		r.fatalf("watcher %d %q-%q opts %b: %d events in [%d, %d], want %d:\ngot  %v\nwant %v", w.id, w.key, w.end, w.opts,
			len(resp.Events), w.next, resp.Revision, len(want), resp.Events, want)
	}
	for i, e := range resp.Events {
		x := want[i]
		var wantKV *mvccpb.KeyValue
		if x.del {
			wantKV = &mvccpb.KeyValue{Key: []byte(x.key), ModRevision: e.Kv.ModRevision}
		} else {
			wantKV = r.mkvOf(x.key, x.kv)
		}
		if (e.Type == mvccpb.DELETE) != x.del || !kvEqual(e.Kv, wantKV) {
			r.fatalf("watcher %d event %d: %v, want %v %v", w.id, i, e, x.del, wantKV)
		}
		if x.del && e.Kv.ModRevision < w.next {
			r.fatalf("watcher %d: delete at %d before its next revision %d", w.id, e.Kv.ModRevision, w.next)
		}
		switch {
		case w.opts&WatchPrevKV == 0:
			if e.PrevKv != nil {
				r.fatalf("watcher %d event %d: prev_kv not asked for: %v", w.id, i, e.PrevKv)
			}
		case x.prev == nil:
			if e.PrevKv != nil {
				r.fatalf("watcher %d event %d: prev_kv %v of a key that did not exist", w.id, i, e.PrevKv)
			}
		case e.PrevKv == nil:
			if e.Kv.ModRevision > r.maxCompact {
				r.fatalf("watcher %d event %d (%v): no prev_kv, want %v", w.id, i, e, *x.prev)
			}
		case !kvEqual(e.PrevKv, r.mkvOf(x.key, *x.prev)):
			r.fatalf("watcher %d event %d: prev_kv %v, want %v", w.id, i, e.PrevKv, *x.prev)
		}
	}
	w.got += len(resp.Events)
	r.events += len(resp.Events)
	w.next = resp.Revision + 1
}

// checkProgress: a progress at rev says w has been sent everything up to
// rev.
func (r *watchRun) checkProgress(w *wwatcher, rev int64) {
	if w.start > rev {
		r.fatalf("watcher %d from %d: progress at %d", w.id, w.start, rev)
	}
	if missed := r.expect(w, w.next, rev); len(missed) > 0 {
		r.fatalf("watcher %d (next %d): progress at %d before events %v", w.id, w.next, rev, missed)
	}
	w.next = max(w.next, rev+1)
}

func (r *watchRun) read(st *wstream, force bool) {
	if !force && (r.step < st.stuckUntil || r.rng.IntN(st.readEvery) != 0) {
		return
	}
	for {
		select {
		case resp, ok := <-st.ws.Chan():
			if !ok {
				if !st.closed {
					r.fatalf("stream channel closed")
				}
				return
			}
			r.checkResponse(st, resp, r.f.Rev(), r.f.CompactRev())
			if !force && r.rng.IntN(4) == 0 {
				return
			}
		default:
			return
		}
	}
}

// checkBound checks what the watchers park: one response per watcher at
// most, each at most WatchBatchLimit entries and a revision.
func (r *watchRun) checkBound() {
	h := &r.f.watch
	h.mu.Lock()
	defer h.mu.Unlock()
	events, responses := 0, 0
	for ws := range h.streams {
		seen := map[*watcher]bool{}
		for _, p := range ws.parked {
			if seen[p.w] {
				r.fatalf("two responses parked for watcher %d", p.w.id)
			}
			seen[p.w] = true
			if n := len(p.resp.Events); n > r.opts.WatchBatchLimit+r.m.maxRev {
				r.fatalf("a parked response of %d events, bound %d", n, r.opts.WatchBatchLimit+r.m.maxRev)
			}
			events += len(p.resp.Events)
			responses++
		}
	}
	inList := map[*WatchStream]bool{}
	for _, ws := range h.congested {
		if inList[ws] || !ws.congested {
			r.fatalf("stream %p twice in the congested list, or not marked", ws)
		}
		inList[ws] = true
	}
	for ws := range h.streams {
		if len(ws.parked) > 0 && !inList[ws] {
			r.fatalf("stream %p has %d parked responses, not in the congested list", ws, len(ws.parked))
		}
	}
	r.maxParked = max(r.maxParked, responses)
	if events != h.parkedEvents || responses != h.parkedResponses {
		r.fatalf("%d responses with %d events parked, counted %d and %d", responses, events, h.parkedResponses, h.parkedEvents)
	}
}

func (r *watchRun) run(steps int) {
	for r.step = 0; r.step < steps; r.step++ {
		switch x := r.rng.IntN(100); {
		case x < 30:
			r.leadOne()
		case x < 52:
			r.followOne()
		case x < 54:
			if r.fIndex < len(r.log) {
				r.restore()
			}
		case x < 62:
			r.newWatcher()
		case x < 64:
			if len(r.streams) > 0 {
				st := r.streams[r.rng.IntN(len(r.streams))]
				for _, id := range slices.Sorted(maps.Keys(st.watchers)) {
					w := st.watchers[id]
					if !w.cancelled && !w.gone && r.rng.IntN(3) == 0 {
						err := st.ws.Cancel(id)
						if err != nil && !errors.Is(err, ErrWatcherNotExist) {
							r.fatalf("cancel: %v", err)
						}
						w.cancelled = true
						r.note("cancel %d", id)
						break
					}
				}
			}
		case x < 65:
			if len(r.streams) > 0 && r.rng.IntN(3) == 0 {
				st := r.streams[r.rng.IntN(len(r.streams))]
				st.ws.Close()
				st.closed = true
				for _, w := range st.watchers {
					w.cancelled = true
				}
				r.note("close stream %p", st)
			}
		case x < 77:
			more, err := r.f.WatchStep()
			if err != nil {
				r.fatalf("watch step: %v", err)
			}
			r.note("watch step: more %v %+v", more, r.f.WatchStats())
		case x < 90:
			for _, st := range r.streams {
				r.read(st, false)
			}
		case x < 94:
			if len(r.streams) > 0 {
				st := r.streams[r.rng.IntN(len(r.streams))]
				if st.closed {
					break
				}
				if r.rng.IntN(2) == 0 {
					var ids []WatchID
					for _, id := range slices.Sorted(maps.Keys(st.watchers)) {
						if w := st.watchers[id]; !w.cancelled && !w.gone {
							ids = append(ids, id)
						}
					}
					if st.ws.RequestProgressAll() && len(ids) > 0 {
						st.allProgress = append(st.allProgress, ids)
					}
				} else {
					if ids := slices.Sorted(maps.Keys(st.watchers)); len(ids) > 0 {
						st.ws.RequestProgress(ids[r.rng.IntN(len(ids))])
					}
				}
			}
		default:
			s := r.f
			if r.rng.IntN(2) == 0 {
				s = r.lead
			}
			if _, err := s.CompactStep(); err != nil {
				r.fatalf("compact step: %v", err)
			}
			if r.rng.IntN(3) == 0 {
				if _, err := s.Commit(); err != nil {
					r.fatalf("commit: %v", err)
				}
			}
		}
		r.checkBound()
	}
	r.finish()
}

// finish lets the follower apply the whole log, reads every stream until
// nothing is left, and checks that every watcher still there got every
// event up to the follower's revision.
func (r *watchRun) finish() {
	r.note("finish")
	for r.fIndex < len(r.log) {
		r.followOne()
	}
	for i := 0; ; i++ {
		for _, st := range r.streams {
			r.read(st, true)
		}
		more, err := r.f.WatchStep()
		if err != nil {
			r.fatalf("watch step: %v", err)
		}
		if !more {
			break
		}
		if i > 10000 {
			r.fatalf("watchers never caught up: %+v", r.f.WatchStats())
		}
	}
	for _, st := range r.streams {
		r.read(st, true)
	}
	if st := r.f.WatchStats(); st.Unsynced != 0 || st.Parked != 0 {
		r.fatalf("after catching up: %+v", st)
	}
	for _, st := range r.streams {
		if st.closed {
			continue
		}
		for _, id := range slices.Sorted(maps.Keys(st.watchers)) {
			w := st.watchers[id]
			if w.gone || w.cancelled {
				continue
			}
			if w.start <= r.f.Rev() && !st.ws.RequestProgress(id) {
				r.fatalf("no progress for watcher %d, caught up", id)
			}
			r.read(st, true)
			if missed := r.expect(w, w.next, r.f.Rev()); len(missed) > 0 {
				r.fatalf("watcher %d %q-%q (next %d) never got %v", id, w.key, w.end, w.next, missed)
			}
		}
	}
	r.t.Logf("revision %d, compaction %d, %d streams: %d events checked, %d compaction cancels, %d snapshot installs, up to %d responses parked",
		r.f.Rev(), r.f.CompactRev(), len(r.streams), r.events, r.cancels, r.restores, r.maxParked)
}

// TestWatchModel drives a follower store with watchers through random
// write transactions, deletions, compactions and their steps, commits,
// and snapshot installs (Restore, Stage and InstallStaged) from the leader
// store it follows; its watchers start at random revisions (compacted,
// past, current, future) on keys, prefixes and ranges, with random
// filters and prev_kv, on streams with small channels read at random
// paces, some not at all for hundreds of steps. Every response is checked
// against the model's history: a watcher gets exactly the events of its
// keys from its start revision, in order, with no gap and no repeat, a
// progress promises only what was sent, and a compaction cancels only a
// watcher it passed. Each seed is replayable (see the failure message).
func TestWatchModel(t *testing.T) {
	for _, kind := range []string{"memory", "bolt"} {
		n := *flagWatchSeeds
		if n == 0 {
			n = map[string]int{"memory": 40, "bolt": 4}[kind]
			if testing.Short() {
				n = map[string]int{"memory": 6, "bolt": 1}[kind]
			}
		}
		seeds := make([]uint64, n)
		for i := range seeds {
			seeds[i] = uint64(i + 1)
		}
		if *flagWatchSeed != 0 {
			seeds = []uint64{*flagWatchSeed}
		}
		for _, seed := range seeds {
			t.Run(fmt.Sprintf("%s/seed=%d", kind, seed), func(t *testing.T) {
				runWatchModel(t, seed, kind, nil)
			})
		}
	}
}

// runWatchModel runs one seed of TestWatchModel; a failure goes to onFail
// if not nil, else fails t.
func runWatchModel(t *testing.T, seed uint64, kind string, onFail func(msg string)) {
	rng := rand.New(rand.NewPCG(seed, seed^0x77617463))
	r := &watchRun{t: t, rng: rng, seed: seed, kind: kind, onFail: onFail,
		m: &wmodel{states: []map[string]mkv{nil, {}}, events: [][]mevent{nil, nil}, compact: -1}}
	r.opts = Options{
		BatchLimit:           []int{3, 20, 10000}[rng.IntN(3)],
		CompactionBatchLimit: []int{1, 3, 1000}[rng.IntN(3)],
		WatchBuffer:          []int{1, 2, 4, 16}[rng.IntN(4)],
		WatchBatchLimit:      []int{1, 2, 5, 1000}[rng.IntN(4)],
	}
	if kind == "bolt" {
		r.dir = t.TempDir()
	}
	r.lead = r.open("lead.db")
	r.f = r.open("follower.db")
	defer r.lead.Close()
	defer r.f.Close()
	r.run(*flagWatchSteps)
}

// TestWatchDeterministic: without Options.Background, on the memory
// backend, the same calls give the same responses.
func TestWatchDeterministic(t *testing.T) {
	var runs [2][]string
	for i := range runs {
		rng := rand.New(rand.NewPCG(7, 7^0x77617463))
		r := &watchRun{t: t, rng: rng, seed: 7, kind: "memory", responses: &runs[i],
			m: &wmodel{states: []map[string]mkv{nil, {}}, events: [][]mevent{nil, nil}, compact: -1}}
		r.opts = Options{BatchLimit: 20, CompactionBatchLimit: 3, WatchBuffer: 2, WatchBatchLimit: 5}
		r.lead = r.open("lead.db")
		r.f = r.open("follower.db")
		r.run(600)
		r.lead.Close()
		r.f.Close()
	}
	if len(runs[0]) < 100 {
		t.Fatalf("only %d responses", len(runs[0]))
	}
	for i := range max(len(runs[0]), len(runs[1])) {
		if i >= len(runs[0]) || i >= len(runs[1]) || runs[0][i] != runs[1][i] {
			t.Fatalf("response %d differs between two runs of the same calls (%d and %d responses)", i, len(runs[0]), len(runs[1]))
		}
	}
}
