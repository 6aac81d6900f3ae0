package mvcc

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/google/btree"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// Defaults of the watch Options.
const (
	// DefaultWatchBuffer is etcd's chanBufLen.
	DefaultWatchBuffer = 128
	// DefaultWatchBatchLimit bounds a catch-up step as etcd bounds a
	// response (watchBatchMaxRevs), in key-bucket entries rather than
	// revisions, so that memory is bounded whatever the transactions.
	DefaultWatchBatchLimit = 1000
)

const (
	// watchersPerStep is how many unsynced watchers one catch-up step
	// serves (etcd's maxWatchersPerSync).
	watchersPerStep = 512
	// watchRetryInterval is how often the background loop offers parked
	// responses again (etcd's victim loop period).
	watchRetryInterval = 10 * time.Millisecond
)

type watcherState uint8

const (
	stateSynced   watcherState = iota + 1 // in synced: notified by End
	stateUnsynced                         // in unsynced: caught up from history
	stateVictim                           // its response is parked on its stream
	stateDone                             // cancelled, compacted or closed
)

// watcher is one watch of a stream.
type watcher struct {
	ws  *WatchStream
	id  WatchID
	seq uint64 // the order watchers joined the store: deterministic ties
	// key and end are the index's convention: end nil watches key alone,
	// end empty every key from key on.
	key, end []byte
	opts     WatchOption
	startRev int64

	// Under watchHub.mu.
	state watcherState
	// minRev is the next revision the watcher may be sent: it has been
	// sent (or has parked) every event below it. A synced watcher that
	// no event has matched for a while keeps an older minRev; its next
	// revision is then the hub's revision + 1.
	minRev int64
	// batch collects the watcher's events in one notify.
	batch []mvccpb.Event
}

func (w *watcher) accepts(tomb bool) bool {
	if tomb {
		return w.opts&WatchNoDelete == 0
	}
	return w.opts&WatchNoPut == 0
}

// parkedResponse is a response its stream's channel had no room for.
type parkedResponse struct {
	w    *watcher
	resp WatchResponse
}

func unsyncedLess(a, b *watcher) bool {
	if a.minRev != b.minRev {
		return a.minRev < b.minRev
	}
	return a.seq < b.seq
}

// watchHub is the store's watch state: etcd's watchableStore groups.
// Every send on a stream's channel happens under mu and never blocks; a
// response that finds the channel full is parked on its stream.
type watchHub struct {
	mu sync.Mutex
	// rev is the revision up to which every write transaction has
	// notified the synced watchers: the store's revision, except while
	// End is between making its revision visible and notifying.
	rev int64
	// epoch counts Restores: a catch-up step that read history from
	// before one throws away what it read.
	epoch  uint64
	seq    uint64
	closed bool

	synced   watcherGroup
	unsynced *btree.BTreeG[*watcher] // by minRev, then seq
	// congested are the streams with parked responses, in the order they
	// got their first.
	congested       []*WatchStream
	parkedEvents    int
	parkedResponses int
	streams         map[*WatchStream]struct{}
	watchers        int
	// eventsSent and compacted count, for the metrics, the events put on
	// streams' channels and the watchers cancelled by compaction.
	eventsSent, compacted uint64

	// stepErr is the last background WatchStep's error, nil once one
	// succeeds.
	stepErr error

	// kick wakes the background loop when work appears.
	kick chan struct{}
	// stepMu makes WatchSteps run one at a time.
	stepMu sync.Mutex

	// Scratch of notify, under mu.
	items   []layerItem
	changes []change
	matches []*watcher
	touched []*watcher
}

func (h *watchHub) init(rev int64) {
	h.rev = rev
	h.unsynced = btree.NewG(32, unsyncedLess)
	h.streams = make(map[*WatchStream]struct{})
	h.kick = make(chan struct{}, 1)
}

func (h *watchHub) kickLocked() {
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

func (h *watchHub) addStream(ws *WatchStream) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		ws.chClosed = true
		close(ws.ch)
		return
	}
	h.streams[ws] = struct{}{}
}

func (h *watchHub) revision() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.rev
}

// gone reports whether w left the store (cancelled by compaction).
func (h *watchHub) gone(w *watcher) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return w.state == stateDone
}

// add places a new watcher: synced if it starts after the hub's revision
// (it is then notified from its start revision on), unsynced otherwise.
func (h *watchHub) add(s *Store, w *watcher) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed || w.ws.chClosed {
		return ErrClosed
	}
	h.seq++
	w.seq = h.seq
	h.watchers++
	if w.startRev == 0 || w.startRev > h.rev {
		w.minRev = max(h.rev+1, w.startRev)
		w.state = stateSynced
		h.synced.add(w)
		return nil
	}
	w.minRev = w.startRev
	w.state = stateUnsynced
	h.unsynced.ReplaceOrInsert(w)
	h.kickLocked()
	return nil
}

// remove takes w out of the store, wherever it is. It reports false if it
// was gone already.
func (h *watchHub) remove(w *watcher) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return false
	}
	return h.removeLocked(w)
}

func (h *watchHub) removeLocked(w *watcher) bool {
	switch w.state {
	case stateSynced:
		h.synced.remove(w)
	case stateUnsynced:
		h.unsynced.Delete(w)
	case stateVictim:
		ws := w.ws
		i := slices.IndexFunc(ws.parked, func(p parkedResponse) bool { return p.w == w })
		if i >= 0 {
			h.parkedEvents -= len(ws.parked[i].resp.Events)
			h.parkedResponses--
			ws.parked = slices.Delete(ws.parked, i, i+1)
		}
	default:
		return false
	}
	w.state = stateDone
	w.batch = nil
	h.watchers--
	return true
}

func (h *watchHub) closeStream(ws *WatchStream) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.closed {
		for _, w := range ws.watchers {
			h.removeLocked(w)
		}
	}
	delete(h.streams, ws)
	if !ws.chClosed {
		ws.chClosed = true
		close(ws.ch)
	}
}

// close closes every stream's channel: the store is closing.
func (h *watchHub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for ws := range h.streams {
		if !ws.chClosed {
			ws.chClosed = true
			close(ws.ch)
		}
		ws.parked = nil
	}
	clear(h.streams)
	h.watchers = 0
	h.synced = watcherGroup{}
	h.unsynced.Clear(false)
	h.congested = nil
	h.parkedEvents, h.parkedResponses = 0, 0
}

// send offers r on ws's channel, unless responses are parked there
// already (they go first).
func (h *watchHub) send(ws *WatchStream, r WatchResponse) bool {
	if len(ws.parked) > 0 || ws.chClosed {
		return false
	}
	select {
	case ws.ch <- r:
		h.eventsSent += uint64(len(r.Events))
		return true
	default:
		return false
	}
}

// park keeps r, which w's stream had no room for, until the stream has:
// w, in no group, waits for it (etcd's victims).
func (h *watchHub) park(w *watcher, r WatchResponse) {
	ws := w.ws
	if !ws.congested {
		ws.congested = true
		h.congested = append(h.congested, ws)
	}
	ws.parked = append(ws.parked, parkedResponse{w: w, resp: r})
	w.state = stateVictim
	h.parkedEvents += len(r.Events)
	h.parkedResponses++
	h.kickLocked()
}

// deliver sends r to w, which is in no group, or parks it; a watcher
// whose response is sent goes where its minRev puts it, or leaves the
// store if the response cancelled it.
func (h *watchHub) deliver(w *watcher, r WatchResponse) {
	if !h.send(w.ws, r) {
		h.park(w, r)
		return
	}
	h.placeSent(w, r)
}

func (h *watchHub) placeSent(w *watcher, r WatchResponse) {
	switch {
	case r.CompactRevision != 0:
		w.state = stateDone
		h.watchers--
		h.compacted++
	case w.minRev > h.rev:
		w.state = stateSynced
		h.synced.add(w)
	default:
		w.state = stateUnsynced
		h.unsynced.ReplaceOrInsert(w)
		h.kickLocked()
	}
}

// retryParked offers the parked responses again, each stream's in order.
// It reports how many it sent and how many stay parked.
func (h *watchHub) retryParked() (sent, left int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	keep := h.congested[:0]
	for _, ws := range h.congested {
	stream:
		for len(ws.parked) > 0 && !ws.chClosed {
			p := ws.parked[0]
			select {
			case ws.ch <- p.resp:
			default:
				break stream
			}
			ws.parked[0] = parkedResponse{}
			ws.parked = ws.parked[1:]
			h.parkedEvents -= len(p.resp.Events)
			h.parkedResponses--
			h.eventsSent += uint64(len(p.resp.Events))
			sent++
			h.placeSent(p.w, p.resp)
		}
		if len(ws.parked) == 0 {
			ws.parked, ws.congested = nil, false
			continue
		}
		keep = append(keep, ws)
	}
	clear(h.congested[len(keep):])
	h.congested = keep
	return sent, h.parkedResponses
}

// progress sends a progress response with id on ws if every watcher of
// ws in watchers is synced and started at or below the hub's revision.
func (h *watchHub) progress(ws *WatchStream, watchers []*watcher, id WatchID) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, w := range watchers {
		if w.state == stateDone && id == AllWatchers {
			continue // cancelled by compaction: the stream's no more
		}
		if w.state != stateSynced || w.startRev > h.rev {
			return false
		}
		n++
	}
	if n == 0 {
		return true
	}
	return h.send(ws, WatchResponse{WatchID: id, Revision: h.rev})
}

// restored moves the watchers onto the history a Restore or InstallStaged
// installed, at revision rev: each continues from its next revision, from
// history if the new state holds it (or a compaction cancels it), else
// waiting for it. Parked responses stay: they hold events the watchers
// were sent.
func (h *watchHub) restored(rev int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	old := h.rev
	h.rev = rev
	h.epoch++
	all := h.synced.appendAll(nil)
	slices.SortFunc(all, func(a, b *watcher) int { return cmp.Compare(a.seq, b.seq) })
	h.synced = watcherGroup{}
	for _, w := range all {
		w.minRev = max(w.minRev, old+1)
		if w.minRev > rev || mutated(RuleWatchRestoreUnsynced) {
			h.synced.add(w)
			continue
		}
		w.state = stateUnsynced
		h.unsynced.ReplaceOrInsert(w)
	}
	// An unsynced watcher past the new revision (a state behind the old
	// one) waits for it as a synced one does.
	var ahead []*watcher
	h.unsynced.DescendGreaterThan(&watcher{minRev: rev, seq: math.MaxUint64}, func(w *watcher) bool {
		ahead = append(ahead, w)
		return true
	})
	slices.Reverse(ahead)
	for _, w := range ahead {
		h.unsynced.Delete(w)
		w.state = stateSynced
		h.synced.add(w)
	}
	if h.unsynced.Len() > 0 {
		h.kickLocked()
	}
}

// change is one entry of the key bucket being turned into an event.
type change struct {
	rev  Revision
	tomb bool
	data []byte // the stored KeyValue
	key  []byte // the changed key, in data
	kv   *mvccpb.KeyValue
}

// storedKey returns the key of a stored KeyValue without decoding the
// rest: its first field, as the KeyValue's Marshal writes it.
func storedKey(data []byte) ([]byte, bool) {
	if len(data) < 2 || data[0] != 0x0a {
		return nil, false
	}
	n, w := binary.Uvarint(data[1:])
	if w <= 0 || n > uint64(len(data)-1-w) {
		return nil, false
	}
	return data[1+w : 1+w+int(n)], true
}

func newChange(k, data []byte) (change, error) {
	rev, tomb, err := decodeRevKey(k)
	if err != nil {
		return change{}, fmt.Errorf("%w: watch: key bucket: %v", ErrCorrupt, err)
	}
	c := change{rev: rev, tomb: tomb, data: data}
	if key, ok := storedKey(data); ok {
		c.key = key
		return c, nil
	}
	kv, err := c.decode()
	if err != nil {
		return change{}, err
	}
	c.key = kv.Key
	return c, nil
}

// decode returns the change's KeyValue as an event carries it: a
// tombstone's with the deletion's revision as mod_revision.
func (c *change) decode() (*mvccpb.KeyValue, error) {
	if c.kv == nil {
		kv, err := decodeValue(c.rev, c.tomb, c.data)
		if err != nil {
			return nil, fmt.Errorf("%w: watch: %v", ErrCorrupt, err)
		}
		if c.tomb {
			kv.ModRevision = c.rev.Main
		}
		c.kv = kv
	}
	return c.kv, nil
}

func (c *change) event() (mvccpb.Event, error) {
	kv, err := c.decode()
	if err != nil {
		return mvccpb.Event{}, err
	}
	if c.tomb {
		return mvccpb.Event{Type: mvccpb.DELETE, Kv: kv}, nil
	}
	return mvccpb.Event{Type: mvccpb.PUT, Kv: kv}, nil
}

// revChanges are the changes of one revision, for finding what each
// change found.
type revChanges struct {
	s  *Store
	cs []change
	// byKey indexes a large revision's changes by key, built on the first
	// need.
	byKey map[string][]int
	// v reads the key bucket; opened on the first need when nil.
	v      *view
	opened bool
}

// prev returns the key of cs[i] as its change found it: the revision's
// earlier change of the key, or the key at the revision before, nil if it
// did not exist then, or if that revision is below compactRev (compacted
// away; etcd's server gives no prev_kv then either).
func (rc *revChanges) prev(i int, compactRev int64) (*mvccpb.KeyValue, error) {
	c := &rc.cs[i]
	j := rc.earlier(i)
	if j >= 0 {
		e := &rc.cs[j]
		if e.tomb {
			return nil, nil
		}
		return e.decode()
	}
	kv, err := c.decode()
	if err != nil {
		return nil, err
	}
	if !c.tomb && kv.CreateRevision == c.rev.Main {
		return nil, nil
	}
	at := c.rev.Main - 1
	if at < compactRev {
		return nil, nil
	}
	mod, _, _, err := rc.s.ix.get(c.key, at)
	if err != nil {
		return nil, nil
	}
	if rc.v == nil {
		v, err := rc.s.newView()
		if err != nil {
			return nil, fmt.Errorf("mvcc: watch: %w", err)
		}
		rc.v, rc.opened = v, true
	}
	return rc.s.readKV(rc.v, c.key, mod)
}

// earlier returns the index of the last change of cs[i]'s key before it
// in the revision, or -1.
func (rc *revChanges) earlier(i int) int {
	const scan = 16
	key := rc.cs[i].key
	if len(rc.cs) <= scan {
		for j := i - 1; j >= 0; j-- {
			if string(rc.cs[j].key) == string(key) {
				return j
			}
		}
		return -1
	}
	if rc.byKey == nil {
		rc.byKey = make(map[string][]int)
		for j := range rc.cs {
			k := string(rc.cs[j].key)
			rc.byKey[k] = append(rc.byKey[k], j)
		}
	}
	js := rc.byKey[string(key)]
	n, _ := slices.BinarySearch(js, i)
	if n == 0 {
		return -1
	}
	return js[n-1]
}

func (rc *revChanges) release() {
	if rc.opened {
		rc.v.release()
	}
}

// notify offers the changes of revision rev, which End has just made
// visible, to the synced watchers. The caller holds wmu: the open layer
// holds the revision's changes, and nothing else writes.
func (s *Store) notify(rev int64) error {
	h := &s.watch
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rev = rev
	if h.synced.size == 0 {
		return nil
	}
	var lo, hi [revKeyLen]byte
	items := s.open.buckets[bucketKey].appendRange(h.items[:0],
		appendRevKey(lo[:0], Revision{Main: rev}, false), appendRevKey(hi[:0], Revision{Main: rev + 1}, false))
	cs := h.changes[:0]
	defer func() {
		clear(items)
		h.items = items[:0]
		clear(cs)
		h.changes = cs[:0]
		clear(h.matches)
		h.matches = h.matches[:0]
		for _, w := range h.touched {
			w.batch = nil // sent, or left by an error
		}
		clear(h.touched)
		h.touched = h.touched[:0]
	}()
	for _, it := range items {
		if it.deleted {
			continue
		}
		c, err := newChange(it.key, it.value)
		if err != nil {
			return err
		}
		cs = append(cs, c)
	}
	rc := revChanges{s: s, cs: cs}
	defer rc.release()
	for i := range cs {
		c := &cs[i]
		h.matches = h.synced.appendMatches(h.matches[:0], c.key)
		var ev mvccpb.Event
		var prev *mvccpb.KeyValue
		decoded, prevDone := false, false
		for _, w := range h.matches {
			if w.minRev > rev || !w.accepts(c.tomb) {
				continue
			}
			if !decoded {
				var err error
				if ev, err = c.event(); err != nil {
					return err
				}
				decoded = true
			}
			e := ev
			if w.opts&WatchPrevKV != 0 {
				if !prevDone {
					var err error
					if prev, err = rc.prev(i, -1); err != nil {
						return err
					}
					prevDone = true
				}
				e.PrevKv = prev
			}
			if len(w.batch) == 0 {
				h.touched = append(h.touched, w)
			}
			w.batch = append(w.batch, e)
		}
	}
	for _, w := range h.touched {
		r := WatchResponse{WatchID: w.id, Events: w.batch, Revision: rev}
		w.batch = nil
		w.minRev = rev + 1
		if !h.send(w.ws, r) {
			h.synced.remove(w)
			h.park(w, r)
		}
	}
	return nil
}

// WatchStep performs one step of the watchers' background work: it
// offers the parked responses again, then catches up to 512 unsynced
// watchers from history (those furthest behind first), reading the key
// bucket from the lowest revision they need through a consistent view,
// at most Options.WatchBatchLimit entries rounded up to a whole revision.
// It reports whether work remains. With Options.Background a goroutine
// calls it; the simulator and tests call it themselves. Nothing in it
// waits for a watcher.
func (s *Store) WatchStep() (pending bool, err error) {
	st, err := s.watchStep()
	return st.pending(), err
}

type stepResult struct {
	sent, parked, unsynced int
	advanced               bool
}

func (r stepResult) pending() bool { return r.parked > 0 || r.unsynced > 0 }

func (s *Store) watchStep() (stepResult, error) {
	h := &s.watch
	h.stepMu.Lock()
	defer h.stepMu.Unlock()
	var r stepResult
	r.sent, r.parked = h.retryParked()
	adv, err := s.syncWatchers()
	r.advanced = adv || r.sent > 0
	h.mu.Lock()
	r.parked, r.unsynced = h.parkedResponses, h.unsynced.Len()
	h.mu.Unlock()
	return r, err
}

// chosen is an unsynced watcher served by a catch-up step.
type chosen struct {
	w      *watcher
	minRev int64
	evs    []mvccpb.Event
	skip   bool
}

// syncWatchers is one catch-up step (see WatchStep). It reports whether
// a watcher advanced.
func (s *Store) syncWatchers() (bool, error) {
	h := &s.watch
	// Choose, under the lock; cancel those a compaction passed.
	h.mu.Lock()
	if h.closed || h.unsynced.Len() == 0 {
		h.mu.Unlock()
		return false, nil
	}
	compactRev := s.CompactRev()
	epoch, to := h.epoch, h.rev
	var picked []*watcher
	h.unsynced.Ascend(func(w *watcher) bool {
		picked = append(picked, w)
		return len(picked) < watchersPerStep
	})
	advanced := false
	var cs []*chosen
	for _, w := range picked {
		if w.minRev < compactRev {
			h.unsynced.Delete(w)
			h.deliver(w, WatchResponse{WatchID: w.id, Revision: h.rev, CompactRevision: compactRev})
			advanced = true
			continue
		}
		cs = append(cs, &chosen{w: w, minRev: w.minRev})
	}
	h.mu.Unlock()
	if len(cs) == 0 {
		return advanced, nil
	}

	// Read history, without the lock: writes and notifications go on.
	endRev, err := s.readHistory(cs, to)
	if err != nil {
		return advanced, err
	}

	// Deliver, under the lock, unless a Restore replaced the history read.
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.epoch != epoch || endRev < 0 {
		return advanced, nil
	}
	for _, c := range cs {
		w := c.w
		if c.skip || w.state != stateUnsynced {
			continue
		}
		if w.minRev > endRev {
			if w.minRev > h.rev {
				h.unsynced.Delete(w)
				h.placeSent(w, WatchResponse{})
				advanced = true
			}
			continue
		}
		h.unsynced.Delete(w)
		w.minRev = endRev + 1
		advanced = true
		if len(c.evs) == 0 {
			h.placeSent(w, WatchResponse{})
			continue
		}
		if mutated(RuleWatchCatchUpWhole) {
			c.evs = c.evs[:len(c.evs)-1]
		}
		h.deliver(w, WatchResponse{WatchID: w.id, Events: c.evs, Revision: endRev})
	}
	return advanced, nil
}

// readHistory reads the events of the chosen watchers from the lowest
// revision they need up to to, at most WatchBatchLimit key-bucket
// entries rounded up to a whole revision, through a read view (which holds
// off index compaction and Restore's swap), and returns the last revision
// read: each chosen watcher then has its events up to it. A watcher that
// a compaction passed since it was chosen is skipped. It returns -1 if a
// Restore intervened.
func (s *Store) readHistory(cs []*chosen, to int64) (int64, error) {
	tr, err := s.Read()
	if err != nil {
		return -1, err
	}
	defer tr.End()
	if tr.Rev() < to {
		return -1, nil
	}
	var g watcherGroup
	byW := make(map[*watcher]*chosen, len(cs))
	from := int64(-1)
	for _, c := range cs {
		if c.minRev < tr.FirstRev() {
			c.skip = true
			continue
		}
		g.add(c.w)
		byW[c.w] = c
		if from < 0 || c.minRev < from {
			from = c.minRev
		}
	}
	if from < 0 {
		return -1, nil
	}
	limit := s.opts.WatchBatchLimit
	endRev := to
	rc := revChanges{s: s, v: tr.v}
	var matches []*watcher
	n := 0
	var scanErr error
	tr.v.ascend(bucketKey, revKey(Revision{Main: from}, false), revKey(Revision{Main: to + 1}, false), func(k, v []byte) bool {
		c, err := newChange(k, v)
		if err != nil {
			scanErr = err
			return false
		}
		if len(rc.cs) == 0 || rc.cs[0].rev.Main != c.rev.Main {
			if n >= limit {
				endRev = rc.cs[0].rev.Main
				return false
			}
			clear(rc.cs)
			rc.cs, rc.byKey = rc.cs[:0], nil
		}
		n++
		rc.cs = append(rc.cs, c)
		i := len(rc.cs) - 1
		matches = g.appendMatches(matches[:0], c.key)
		var ev mvccpb.Event
		var prev *mvccpb.KeyValue
		decoded, prevDone := false, false
		for _, w := range matches {
			ch := byW[w]
			if ch.minRev > c.rev.Main || !w.accepts(c.tomb) {
				continue
			}
			if !decoded {
				if ev, err = rc.cs[i].event(); err != nil {
					scanErr = err
					return false
				}
				decoded = true
			}
			e := ev
			if w.opts&WatchPrevKV != 0 {
				if !prevDone {
					if prev, err = rc.prev(i, tr.FirstRev()); err != nil {
						scanErr = err
						return false
					}
					prevDone = true
				}
				e.PrevKv = prev
			}
			ch.evs = append(ch.evs, e)
		}
		return true
	})
	if scanErr != nil {
		return -1, scanErr
	}
	return endRev, nil
}

// WatchStats counts what the store's watchers hold.
type WatchStats struct {
	// Streams and Watchers open.
	Streams, Watchers int
	// Synced watchers are notified as writes happen; Unsynced ones catch
	// up from history; Parked ones wait for room in their stream's
	// channel (etcd's victims), with ParkedEvents events in all.
	Synced, Unsynced, Parked int
	ParkedEvents             int
	// EventsSent counts the events put on streams' channels, Compacted
	// the watchers cancelled because compaction passed their next
	// revision, since the store opened.
	EventsSent, Compacted uint64
	// Err is the background catch-up's last error (Options.Background),
	// nil once a step succeeds: unsynced watchers wait while it fails (a
	// corrupt key bucket, a backend that cannot be read).
	Err error
}

// WatchStats returns the counts of the store's watchers now.
func (s *Store) WatchStats() WatchStats {
	h := &s.watch
	h.mu.Lock()
	defer h.mu.Unlock()
	return WatchStats{
		Streams:      len(h.streams),
		Watchers:     h.watchers,
		Synced:       h.synced.size,
		Unsynced:     h.unsynced.Len(),
		Parked:       h.parkedResponses,
		ParkedEvents: h.parkedEvents,
		EventsSent:   h.eventsSent,
		Compacted:    h.compacted,
		Err:          h.stepErr,
	}
}

// runWatchers is the background loop of Options.Background: catch-up
// steps back to back while they advance, parked responses offered again
// every 10 ms while any are parked, and nothing while there is no work.
func (s *Store) runWatchers() {
	defer s.wg.Done()
	for {
		r, err := s.watchStep()
		s.watch.mu.Lock()
		s.watch.stepErr = err
		s.watch.mu.Unlock()
		if err == nil && r.advanced && r.unsynced > 0 {
			select {
			case <-s.stop:
				return
			default:
			}
			continue
		}
		var retry <-chan time.Time
		if r.pending() || err != nil {
			retry = time.After(watchRetryInterval)
		}
		select {
		case <-s.stop:
			return
		case <-s.watch.kick:
		case <-retry:
		}
	}
}
