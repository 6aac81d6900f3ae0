package simstate

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/edictlog/edictlog/cmd/edictkv/internal/kvstate"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/mvcc"
	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/internal/sim"
)

// The watch clients of a run. A client watches a key, a prefix, a range
// or every key from a revision in the past (below the compaction now and
// then), the current one or the future, with prev_kv and the NOPUT and
// NODELETE filters now and then, on a watch stream of one process; it
// keeps, across reconnects, the next revision it is to be sent, and
// every response it reads is checked against the Model there and then.
//
// Everything is driven from the Checker's hooks, with the run's seed: the
// clients' clock is the number of hooks seen, and a process's streams are
// read, and its watches opened, only at that process's own hooks (its
// applies, its start, a snapshot installed), as a server's connection is
// served by the server. Streams are read promptly or slowly (every n-th
// hook of their process, a few responses at a time, some not at all for
// a while), so that channels fill, responses park and watchers fall back
// to catching up from history. The store's background work, catch-up
// steps and parked responses offered again, is the one WatchStep after
// each apply (Machine.Apply).
//
// A watch ends when its client cancels it or a compaction does; its
// client moves it, as a real one reconnects: when the process starts a
// new life (its streams died with the old one), when the client closes
// the stream, and when the process has not been heard from for
// idleHooks hooks (a client's keepalive giving up on a partitioned or
// dead member). The watch then resumes from its next revision on the
// same process or another, and its check goes on there.
type watchers struct {
	rng   *rand.Rand
	clock int
	procs map[edict.ProcessID]*wproc
	all   []*cwatch
	// orphans are the watches waiting to resume, in the order they lost
	// their stream.
	orphans []*cwatch
	streams int
	stats   watchStats
}

// The clients' limits: live watches at once, and how long a silent
// process keeps its clients.
const (
	maxLiveWatches = 10
	idleHooks      = 400
)

// watchStats counts what a run's watch clients did and were sent.
type watchStats struct {
	Watches   int // watches opened
	Resumes   int // resumed on a stream after losing one
	Crashes   int // streams lost with their process's life
	Moves     int // streams a client closed to go elsewhere
	Idle      int // streams a client gave up on a silent process
	Responses int
	Events    int
	Progress  int // progress responses checked
	Compacted int // watches cancelled by compaction
	Cancels   int // watches their client cancelled
	Restores  int // watches alive across a snapshot installed on their process
	MaxParked int // the most responses parked on one store at once
}

func (s *watchStats) add(o watchStats) {
	s.Watches += o.Watches
	s.Resumes += o.Resumes
	s.Crashes += o.Crashes
	s.Moves += o.Moves
	s.Idle += o.Idle
	s.Responses += o.Responses
	s.Events += o.Events
	s.Progress += o.Progress
	s.Compacted += o.Compacted
	s.Cancels += o.Cancels
	s.Restores += o.Restores
	s.MaxParked = max(s.MaxParked, o.MaxParked)
}

func (s watchStats) String() string {
	return fmt.Sprintf("%d watches (%d resumed: %d streams lost in crashes, %d moved, %d given up idle; %d across snapshot installs) sent %d events in %d responses, %d progress notifications, %d cancelled by compaction, %d by their client, up to %d responses parked",
		s.Watches, s.Resumes, s.Crashes, s.Moves, s.Idle, s.Restores, s.Events, s.Responses, s.Progress, s.Compacted, s.Cancels, s.MaxParked)
}

// wproc is a process as the clients know it: the state of its life and
// the streams open on it.
type wproc struct {
	id      edict.ProcessID
	st      *kvstate.State
	streams []*wstream
	heard   int // the clock at its last hook
	hooks   int // its hooks in this life
}

// wstream is a watch stream a client holds on a process.
type wstream struct {
	n  int
	p  *wproc
	ws *mvcc.WatchStream
	// It is read at every every-th hook of its process, from the clock
	// stuck on.
	every, stuck int
	read         int // responses read
	byID         map[mvcc.WatchID]*attach
	nextID       mvcc.WatchID // the IDs the client chooses itself
	// progress are the progress requests the process took, in order.
	progress []progressReq
}

// attach is a watch on a stream: one mvcc watcher.
type attach struct {
	cw       *cwatch
	s        *wstream
	id       mvcc.WatchID
	startRev int64
	// cancelled by the client, when the stream had read cutoff
	// responses and held the rest of those it may have for it;
	// compacted: its compaction response was read.
	cancelled, compacted bool
	cutoff               int
}

func (a *attach) live() bool { return !a.cancelled && !a.compacted && a.cw.at == a }

// progressReq is a progress request a stream's process said it sent: for
// one watcher, or for all (id AllWatchers) those in all, at rev.
type progressReq struct {
	id  mvcc.WatchID
	rev int64
	all []*attach
}

// cwatch is one watch as its client holds it, across reconnects.
type cwatch struct {
	n        int
	key, end []byte
	opts     mvcc.WatchOption
	// from is the first revision it is to be sent (its start revision,
	// or the one after the process's when it started at 0); next the one
	// after the last it has been sent: it has been sent every event of its
	// keys in [from, next), and nothing else.
	from, next int64
	at         *attach // nil while it has no stream
	done       bool    // cancelled by its client or by compaction
	// While it has no stream: the process it resumes on (0: any) and the
	// clock before which it does not.
	target  edict.ProcessID
	after   int
	resumes int
}

func (cw *cwatch) String() string {
	var span string
	switch {
	case len(cw.end) == 0:
		span = fmt.Sprintf("%q", cw.key)
	case len(cw.end) == 1 && cw.end[0] == 0:
		span = fmt.Sprintf("[%q, ∞)", cw.key)
	default:
		span = fmt.Sprintf("[%q, %q)", cw.key, cw.end)
	}
	var o []string
	for _, x := range []struct {
		o mvcc.WatchOption
		s string
	}{{mvcc.WatchPrevKV, "prev_kv"}, {mvcc.WatchNoPut, "noput"}, {mvcc.WatchNoDelete, "nodelete"}} {
		if cw.opts&x.o != 0 {
			o = append(o, x.s)
		}
	}
	if len(o) > 0 {
		span += " " + strings.Join(o, ",")
	}
	return fmt.Sprintf("watch #%d of %s from %d (next %d, resumed %d times)", cw.n, span, cw.from, cw.next, cw.resumes)
}

func newWatchers(seed uint64) *watchers {
	return &watchers{rng: rand.New(rand.NewPCG(seed, 0x7761746368)), procs: map[edict.ProcessID]*wproc{}} // "watch"
}

// life returns the process p as the clients know it, st the state of its
// life: a new life ends the streams of the one before, as a crash breaks
// its connections, and their watches are to resume.
func (w *watchers) life(p edict.ProcessID, st *kvstate.State) *wproc {
	pr := w.procs[p]
	if pr == nil {
		pr = &wproc{id: p}
		w.procs[p] = pr
	}
	if pr.st != st {
		for _, s := range pr.streams {
			w.stats.Crashes++
			w.lose(s, func() edict.ProcessID {
				if w.rng.IntN(2) == 0 {
					return p
				}
				return 0
			})
		}
		pr.st, pr.streams, pr.hooks = st, nil, 0
	}
	return pr
}

// lose orphans the live watches of s, which the client no longer reads,
// each to resume on target().
func (w *watchers) lose(s *wstream, target func() edict.ProcessID) {
	for _, id := range slices.Sorted(maps.Keys(s.byID)) {
		a := s.byID[id]
		if !a.live() || a.cw.done {
			continue
		}
		cw := a.cw
		cw.at, cw.target, cw.after = nil, target(), w.clock+w.rng.IntN(40)
		w.orphans = append(w.orphans, cw)
	}
}

// hook is one moment of process p, which has the state st: its due
// streams are read and checked, and its clients act.
func (w *watchers) hook(c *Checker, p edict.ProcessID, st *kvstate.State) error {
	pr := w.life(p, st)
	w.clock++
	pr.heard = w.clock
	pr.hooks++
	w.stats.MaxParked = max(w.stats.MaxParked, st.Store().WatchStats().Parked)
	for _, s := range pr.streams {
		if w.clock < s.stuck || pr.hooks%s.every != 0 {
			continue
		}
		if err := w.read(c, s, s.every == 1); err != nil {
			return err
		}
	}
	// A stream left with no watch and nothing to read is closed.
	pr.streams = slices.DeleteFunc(pr.streams, func(s *wstream) bool {
		if len(s.ws.Chan()) > 0 || len(s.progress) > 0 || slices.ContainsFunc(slices.Collect(maps.Values(s.byID)), (*attach).live) {
			return false
		}
		s.ws.Close()
		return true
	})
	switch x := w.rng.IntN(200); {
	case x < 8:
		if w.live() < maxLiveWatches {
			if err := w.open(pr); err != nil {
				return err
			}
		}
	case x < 12:
		if err := w.requestProgress(pr); err != nil {
			return err
		}
	case x < 14:
		if err := w.cancel(pr); err != nil {
			return err
		}
	case x < 15:
		if len(pr.streams) > 0 {
			i := w.rng.IntN(len(pr.streams))
			s := pr.streams[i]
			s.ws.Close()
			pr.streams = slices.Delete(pr.streams, i, i+1)
			w.stats.Moves++
			w.lose(s, func() edict.ProcessID { return 0 })
		}
	}
	if err := w.resume(pr); err != nil {
		return err
	}
	for _, id := range slices.Sorted(maps.Keys(w.procs)) {
		q := w.procs[id]
		if q == pr || len(q.streams) == 0 || w.clock-q.heard <= idleHooks {
			continue
		}
		for _, s := range q.streams {
			s.ws.Close()
			w.stats.Idle++
			w.lose(s, func() edict.ProcessID { return 0 })
		}
		q.streams = nil
	}
	return nil
}

// restored counts the watches a snapshot install on p spans, then is p's
// hook.
func (w *watchers) restored(c *Checker, p edict.ProcessID, st *kvstate.State) error {
	if pr := w.procs[p]; pr != nil && pr.st == st {
		for _, s := range pr.streams {
			for _, a := range s.byID {
				if a.live() {
					w.stats.Restores++
				}
			}
		}
	}
	return w.hook(c, p, st)
}

func (w *watchers) live() int {
	n := len(w.orphans)
	for _, pr := range w.procs {
		for _, s := range pr.streams {
			for _, a := range s.byID {
				if a.live() && !a.cw.done {
					n++
				}
			}
		}
	}
	return n
}

// stream returns a stream of pr to watch on: one it has, or a new one.
func (w *watchers) stream(pr *wproc) *wstream {
	if len(pr.streams) > 0 && w.rng.IntN(2) == 0 {
		return pr.streams[w.rng.IntN(len(pr.streams))]
	}
	w.streams++
	s := &wstream{n: w.streams, p: pr, ws: pr.st.Store().NewWatchStream(), every: 1, byID: map[mvcc.WatchID]*attach{}, nextID: 1000}
	switch w.rng.IntN(6) {
	case 0:
		s.every = 4
	case 1:
		s.every = 16
	case 2:
		s.every = 64
	case 3:
		s.stuck = w.clock + 100 + w.rng.IntN(300)
	}
	pr.streams = append(pr.streams, s)
	return s
}

// watch adds cw on s from start.
func (w *watchers) watch(s *wstream, cw *cwatch, start int64) error {
	id := mvcc.AutoWatchID
	if w.rng.IntN(3) == 0 {
		id = s.nextID
		s.nextID++
	}
	var opts []mvcc.WatchOption
	if cw.opts != 0 {
		opts = append(opts, cw.opts)
	}
	got, err := s.ws.Watch(id, cw.key, cw.end, start, opts...)
	if err != nil {
		return fmt.Errorf("p%d stream %d: %v from %d: %w", s.p.id, s.n, cw, start, err)
	}
	if id != mvcc.AutoWatchID && got != id {
		return fmt.Errorf("p%d stream %d: %v asked for ID %d and got %d", s.p.id, s.n, cw, id, got)
	}
	if s.byID[got] != nil {
		return fmt.Errorf("p%d stream %d: %v got ID %d, which the stream gave before", s.p.id, s.n, cw, got)
	}
	a := &attach{cw: cw, s: s, id: got, startRev: start}
	s.byID[got] = a
	cw.at = a
	return nil
}

// open opens a new watch on pr.
func (w *watchers) open(pr *wproc) error {
	rng := w.rng
	cw := &cwatch{n: len(w.all) + 1}
	cw.key, cw.end = watchSpan(rng)
	cur, compact := pr.st.Rev(), pr.st.CompactRev()
	var start int64
	switch x := rng.IntN(10); {
	case x < 2:
		start = 0
	case x < 3:
		start = cur
	case x < 4:
		start = cur + 1 + rng.Int64N(3)
	case x < 5:
		start = max(compact, 1)
	case x < 6:
		start = max(compact-1, 1)
	default:
		start = 1 + rng.Int64N(cur)
	}
	if rng.IntN(3) == 0 {
		cw.opts |= mvcc.WatchPrevKV
	}
	if rng.IntN(8) == 0 {
		cw.opts |= mvcc.WatchNoPut
	} else if rng.IntN(8) == 0 {
		cw.opts |= mvcc.WatchNoDelete
	}
	s := w.stream(pr)
	cw.from = start
	if start == 0 {
		cw.from = s.ws.Rev() + 1
	}
	cw.next = cw.from
	w.all = append(w.all, cw)
	w.stats.Watches++
	return w.watch(s, cw, start)
}

// watchSpan is what a watch watches: a workload key, a register, the
// workload's prefix, the registers', a range of workload keys, every key
// from one on, or every key.
func watchSpan(rng *rand.Rand) ([]byte, []byte) {
	i := rng.IntN(len(workKeys))
	switch rng.IntN(8) {
	case 0, 1:
		return workKeys[i], nil
	case 2:
		return []byte("k0"), nil
	case 3:
		return []byte("w/"), workEnd
	case 4:
		return []byte("k"), []byte("l")
	case 5:
		j := i + 1 + rng.IntN(len(workKeys)-i)
		if j == len(workKeys) {
			return workKeys[i], workEnd
		}
		return workKeys[i], workKeys[j]
	case 6:
		return workKeys[i], []byte{0}
	}
	return everything, everything
}

// requestProgress asks a stream of pr for a progress notification, of
// one watch or of all.
func (w *watchers) requestProgress(pr *wproc) error {
	if len(pr.streams) == 0 {
		return nil
	}
	s := pr.streams[w.rng.IntN(len(pr.streams))]
	var live []*attach
	for _, id := range slices.Sorted(maps.Keys(s.byID)) {
		if a := s.byID[id]; a.live() {
			live = append(live, a)
		}
	}
	rev := s.ws.Rev()
	if w.rng.IntN(2) == 0 {
		if len(live) == 0 {
			return nil
		}
		a := live[w.rng.IntN(len(live))]
		if s.ws.RequestProgress(a.id) {
			s.progress = append(s.progress, progressReq{id: a.id, rev: rev})
		}
		return nil
	}
	// RequestProgressAll says true also when it had none to send (every
	// watcher gone): what it sent is what the channel gained.
	n := len(s.ws.Chan())
	s.ws.RequestProgressAll()
	if len(s.ws.Chan()) > n {
		s.progress = append(s.progress, progressReq{id: mvcc.AllWatchers, rev: rev, all: live})
	}
	return nil
}

// cancel has the client of a watch of pr cancel it.
func (w *watchers) cancel(pr *wproc) error {
	var live []*attach
	for _, s := range pr.streams {
		for _, id := range slices.Sorted(maps.Keys(s.byID)) {
			if a := s.byID[id]; a.live() {
				live = append(live, a)
			}
		}
	}
	if len(live) == 0 {
		return nil
	}
	a := live[w.rng.IntN(len(live))]
	s := a.s
	cutoff := s.read + len(s.ws.Chan())
	// A watcher a compaction cancelled, its response not read yet, is
	// gone already: Cancel says it does not exist.
	if err := s.ws.Cancel(a.id); err != nil && !errors.Is(err, mvcc.ErrWatcherNotExist) {
		return fmt.Errorf("p%d stream %d: cancel %v (ID %d): %w", s.p.id, s.n, a.cw, a.id, err)
	}
	a.cancelled, a.cutoff = true, cutoff
	a.cw.done = true
	w.stats.Cancels++
	return nil
}

// resume gives the orphans due on pr a stream there.
func (w *watchers) resume(pr *wproc) error {
	keep := w.orphans[:0]
	var due []*cwatch
	for _, cw := range w.orphans {
		if w.clock >= cw.after && (cw.target == 0 || cw.target == pr.id || w.clock > cw.after+idleHooks) {
			due = append(due, cw)
		} else {
			keep = append(keep, cw)
		}
	}
	clear(w.orphans[len(keep):])
	w.orphans = keep
	for _, cw := range due {
		if err := w.reattach(pr, cw); err != nil {
			return err
		}
	}
	return nil
}

// reattach watches cw again on pr, from its next revision.
func (w *watchers) reattach(pr *wproc, cw *cwatch) error {
	cw.resumes++
	w.stats.Resumes++
	return w.watch(w.stream(pr), cw, cw.next)
}

// read reads s's responses and checks each: all it holds, or (a slow
// client) until it stops now and then.
func (w *watchers) read(c *Checker, s *wstream, all bool) error {
	for {
		select {
		case resp, ok := <-s.ws.Chan():
			if !ok {
				return fmt.Errorf("p%d stream %d: the process closed the stream", s.p.id, s.n)
			}
			s.read++
			w.stats.Responses++
			if err := w.check(c, s, resp); err != nil {
				return fmt.Errorf("p%d (revision %d, compacted at %d) stream %d: %w", s.p.id, s.p.st.Rev(), s.p.st.CompactRev(), s.n, err)
			}
			if !all && w.rng.IntN(4) == 0 {
				return nil
			}
		default:
			return nil
		}
	}
}

// check checks a response read from s against the model.
func (w *watchers) check(c *Checker, s *wstream, resp mvcc.WatchResponse) error {
	st := s.p.st
	if resp.Revision > st.Rev() {
		return fmt.Errorf("a response for ID %d at revision %d, which the process has not made", resp.WatchID, resp.Revision)
	}
	if resp.WatchID == mvcc.AllWatchers {
		return w.checkProgress(c, s, resp)
	}
	a := s.byID[resp.WatchID]
	switch {
	case a == nil:
		return fmt.Errorf("a response for ID %d, which the stream never gave", resp.WatchID)
	case a.compacted:
		return fmt.Errorf("%v (ID %d): a response at revision %d after its cancellation by compaction", a.cw, a.id, resp.Revision)
	case a.cancelled && s.read > a.cutoff:
		return fmt.Errorf("%v (ID %d): a response at revision %d sent after its client cancelled it", a.cw, a.id, resp.Revision)
	}
	cw := a.cw
	if resp.CompactRevision != 0 {
		switch {
		case len(resp.Events) != 0:
			return fmt.Errorf("%v: cancelled by compaction at %d with %d events", cw, resp.CompactRevision, len(resp.Events))
		case resp.CompactRevision <= cw.next:
			return fmt.Errorf("%v: cancelled by compaction at %d, which does not pass its next revision %d", cw, resp.CompactRevision, cw.next)
		case resp.CompactRevision > st.CompactRev():
			return fmt.Errorf("%v: cancelled by compaction at %d, past the process's", cw, resp.CompactRevision)
		}
		a.compacted = true
		w.stats.Compacted++
		if cw.at == a && !cw.done {
			cw.done = true
			// Its client watches again from the compaction revision, as
			// etcd's clients can.
			if w.rng.IntN(2) == 0 && !a.cancelled {
				n := &cwatch{n: len(w.all) + 1, key: cw.key, end: cw.end, opts: cw.opts, from: resp.CompactRevision, next: resp.CompactRevision}
				w.all = append(w.all, n)
				w.stats.Watches++
				return w.watch(s, n, n.from)
			}
		}
		return nil
	}
	if len(resp.Events) == 0 {
		return w.checkProgress(c, s, resp)
	}
	if resp.Revision < cw.next {
		return fmt.Errorf("%v: %d events in a response at revision %d, before its next", cw, len(resp.Events), resp.Revision)
	}
	want := c.m.watchEvents(cw.key, cw.end, cw.opts, cw.next, resp.Revision)
	if err := checkEvents(resp.Events, want, cw.opts, st.CompactRev()); err != nil {
		return fmt.Errorf("%v: the response of revisions [%d, %d] (%d events; the model's %d): %w", cw, cw.next, resp.Revision, len(resp.Events), len(want), err)
	}
	cw.next = resp.Revision + 1
	w.stats.Events += len(resp.Events)
	return nil
}

// checkEvents compares the events of a response with the model's, the
// key before each change (prev_kv) missing only where the serving
// process's compaction, at compact, took it (an event at the compaction
// revision, sent from history).
func checkEvents(got []mvccpb.Event, want []event, opts mvcc.WatchOption, compact int64) error {
	for i, e := range got {
		if i == len(want) {
			return fmt.Errorf("event %d (%v) is not the model's: the model has none after %d", i, e, i)
		}
		x := want[i]
		if e.Kv == nil {
			return fmt.Errorf("event %d has no key", i)
		}
		if !sameEvent(e, x) {
			if j := slices.IndexFunc(want[i:], func(x event) bool { return sameEvent(e, x) }); j > 0 {
				more := ""
				if j > 1 {
					more = fmt.Sprintf(", and %d more after it", j-1)
				}
				return fmt.Errorf("the %s of %q at %d is missing before event %d (the %v of %q at %d)%s",
					eventType(x), x.kv.Key, x.kv.ModRevision, i, e.Type, e.Kv.Key, e.Kv.ModRevision, more)
			}
			return fmt.Errorf("event %d is a %v of %q %s; the model's a %s of %q %s", i, e.Type, e.Kv.Key, kvString(e.Kv), eventType(x), x.kv.Key, kvString(x.kv))
		}
		switch {
		case opts&mvcc.WatchPrevKV == 0:
			if e.PrevKv != nil {
				return fmt.Errorf("event %d (%q at %d) has a prev_kv not asked for: %s", i, e.Kv.Key, e.Kv.ModRevision, kvString(e.PrevKv))
			}
		case x.prev == nil:
			if e.PrevKv != nil {
				return fmt.Errorf("event %d (%q at %d) has prev_kv %s; the key did not exist before", i, e.Kv.Key, e.Kv.ModRevision, kvString(e.PrevKv))
			}
		case e.PrevKv == nil:
			if x.kv.ModRevision > compact {
				return fmt.Errorf("event %d (%q at %d, above the compaction) has no prev_kv; the model's %s", i, e.Kv.Key, e.Kv.ModRevision, kvString(x.prev))
			}
		case !sameKV(e.PrevKv, x.prev):
			return fmt.Errorf("event %d (%q at %d) has prev_kv %s; the model's %s", i, e.Kv.Key, e.Kv.ModRevision, kvString(e.PrevKv), kvString(x.prev))
		}
	}
	if len(got) < len(want) {
		x := want[len(got)]
		return fmt.Errorf("the %s of %q at %d is missing", eventType(x), x.kv.Key, x.kv.ModRevision)
	}
	return nil
}

func sameEvent(e mvccpb.Event, x event) bool {
	return e.Kv != nil && (e.Type == mvccpb.DELETE) == x.del && sameKV(e.Kv, x.kv)
}

func eventType(e event) mvccpb.Event_EventType {
	if e.del {
		return mvccpb.DELETE
	}
	return mvccpb.PUT
}

// checkProgress checks a progress notification: the stream asked for it,
// it is at the revision the process had then, and every watch it is for
// has been sent every event of its keys up to it.
func (w *watchers) checkProgress(c *Checker, s *wstream, resp mvcc.WatchResponse) error {
	if len(s.progress) == 0 || s.progress[0].id != resp.WatchID {
		if a := s.byID[resp.WatchID]; a != nil {
			return fmt.Errorf("%v: a response at revision %d with no event nor compaction, where the stream asked for no progress notification of it next", a.cw, resp.Revision)
		}
		return fmt.Errorf("a response for ID %d at revision %d with no event nor compaction, where the stream asked for no progress notification of it next", resp.WatchID, resp.Revision)
	}
	req := s.progress[0]
	s.progress = s.progress[1:]
	if resp.Revision != req.rev {
		return fmt.Errorf("a progress notification for ID %d at revision %d, asked when the process was at %d", resp.WatchID, resp.Revision, req.rev)
	}
	for _, a := range req.all {
		if err := w.progressOf(c, a, resp.Revision); err != nil {
			return err
		}
	}
	if req.id != mvcc.AllWatchers {
		if err := w.progressOf(c, s.byID[req.id], resp.Revision); err != nil {
			return err
		}
	}
	w.stats.Progress++
	return nil
}

func (w *watchers) progressOf(c *Checker, a *attach, rev int64) error {
	if a.compacted {
		return nil
	}
	cw := a.cw
	if a.startRev > rev {
		return fmt.Errorf("%v: a progress notification at %d, below the start revision %d it asked of the process", cw, rev, a.startRev)
	}
	if missed := c.m.watchEvents(cw.key, cw.end, cw.opts, cw.next, rev); len(missed) > 0 {
		x := missed[0]
		return fmt.Errorf("%v: a progress notification at %d before the %s of %q at %d (%d events not sent)", cw, rev, eventType(x), x.kv.Key, x.kv.ModRevision, len(missed))
	}
	if cw.at == a {
		cw.next = max(cw.next, rev+1)
	}
	return nil
}

// end settles the watches of the running processes: the orphans resume
// on them, each store's catch-up runs to its end and every stream is
// read; then every watch there has been sent every event of its keys up
// to its process's revision, and says so in a progress notification.
func (w *watchers) end(c *Checker, up map[edict.ProcessID]sim.ModelState) error {
	ids := slices.Sorted(maps.Keys(up))
	if len(ids) == 0 {
		return nil
	}
	prs := make([]*wproc, len(ids))
	for i, id := range ids {
		mc, err := machineOf(up[id].State)
		if err != nil {
			return err
		}
		prs[i] = w.life(id, mc.State)
	}
	// The clients of the processes down lose their streams too.
	for _, id := range slices.Sorted(maps.Keys(w.procs)) {
		if q := w.procs[id]; !slices.Contains(prs, q) {
			for _, s := range q.streams {
				w.stats.Crashes++
				w.lose(s, func() edict.ProcessID { return 0 })
			}
			q.streams = nil
		}
	}
	for _, cw := range w.orphans {
		pr := prs[cw.n%len(prs)]
		if i := slices.Index(ids, cw.target); i >= 0 {
			pr = prs[i]
		}
		if err := w.reattach(pr, cw); err != nil {
			return err
		}
	}
	w.orphans = nil
	for _, pr := range prs {
		if err := w.settle(c, pr); err != nil {
			return err
		}
		rev := pr.st.Rev()
		for _, s := range pr.streams {
			for _, id := range slices.Sorted(maps.Keys(s.byID)) {
				a := s.byID[id]
				if !a.live() || a.cw.done {
					continue
				}
				if a.startRev <= rev {
					if !s.ws.RequestProgress(id) {
						return fmt.Errorf("p%d stream %d: %v: no progress notification once caught up (ID %d from %d, the process at %d, %d of %d responses in the channel; %+v)",
							pr.id, s.n, a.cw, id, a.startRev, s.ws.Rev(), len(s.ws.Chan()), cap(s.ws.Chan()), pr.st.Store().WatchStats())
					}
					s.progress = append(s.progress, progressReq{id: id, rev: s.ws.Rev()})
					if err := w.read(c, s, true); err != nil {
						return err
					}
				}
				if missed := c.m.watchEvents(a.cw.key, a.cw.end, a.cw.opts, a.cw.next, rev); len(missed) > 0 {
					x := missed[0]
					return fmt.Errorf("p%d (revision %d) stream %d: %v never sent the %s of %q at %d (%d events)", pr.id, rev, s.n, a.cw, eventType(x), x.kv.Key, x.kv.ModRevision, len(missed))
				}
			}
		}
	}
	return nil
}

// settle runs pr's watch work to its end, reading every stream between
// steps (a watch cancelled by compaction may be watched again from the
// compaction revision, which is more work).
func (w *watchers) settle(c *Checker, pr *wproc) error {
	for i := 0; ; i++ {
		more, err := pr.st.Store().WatchStep()
		if err != nil {
			return fmt.Errorf("p%d: a watch step: %w", pr.id, err)
		}
		n := w.stats.Responses
		for _, s := range pr.streams {
			if err := w.read(c, s, true); err != nil {
				return err
			}
		}
		if !more && n == w.stats.Responses {
			break
		}
		if i > 1_000_000 {
			return fmt.Errorf("p%d: the watchers never caught up: %+v", pr.id, pr.st.Store().WatchStats())
		}
	}
	if ws := pr.st.Store().WatchStats(); ws.Unsynced != 0 || ws.Parked != 0 {
		return fmt.Errorf("p%d: watchers left behind once caught up: %+v", pr.id, ws)
	}
	return nil
}
