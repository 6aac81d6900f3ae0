package mvcc

import (
	"bytes"
	"errors"
	"fmt"
	"sync"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// WatchID names a watcher within its stream, as etcd's watch_id.
type WatchID int64

const (
	// AutoWatchID asks Watch to choose the watcher's ID (clientv3's
	// AutoWatchID): the stream's next unused one, from 0 on.
	AutoWatchID WatchID = 0
	// AllWatchers is the WatchID of a progress response for every watcher
	// of a stream (clientv3's InvalidWatchID, -1).
	AllWatchers WatchID = -1
)

var (
	// ErrWatcherNotExist is etcd's: no watcher of the stream has the ID.
	ErrWatcherNotExist = errors.New("mvcc: watcher does not exist")
	// ErrEmptyWatcherRange is etcd's: the range ends at or before its key.
	ErrEmptyWatcherRange = errors.New("mvcc: watcher range is empty")
	// ErrWatcherDuplicateID is etcd's: the stream has a watcher with the
	// ID asked for.
	ErrWatcherDuplicateID = errors.New("mvcc: duplicate watch ID provided on the WatchStream")
	// ErrWatchStreamClosed refuses a watch on a closed stream.
	ErrWatchStreamClosed = errors.New("mvcc: watch stream closed")
	// ErrWatchID refuses a negative watch ID: -1 names every watcher of a
	// stream in progress responses.
	ErrWatchID = errors.New("mvcc: negative watch ID")
	// ErrWatchStartRev refuses a negative start revision.
	ErrWatchStartRev = errors.New("mvcc: negative watch start revision")
)

// WatchOption is a set of a watcher's etcd options.
type WatchOption uint8

const (
	// WatchPrevKV attaches to each event the key as the change found it
	// (etcd's prev_kv): nil for a key that did not exist then.
	WatchPrevKV WatchOption = 1 << iota
	// WatchNoPut leaves PUT events out (etcd's NOPUT filter).
	WatchNoPut
	// WatchNoDelete leaves DELETE events out (etcd's NODELETE filter).
	WatchNoDelete
)

// WatchResponse is what a stream's channel carries: events of one watcher,
// a progress notification, or the cancellation of a watcher by compaction.
type WatchResponse struct {
	// WatchID is the watcher's ID; AllWatchers in a progress response
	// for every watcher of the stream (RequestProgressAll).
	WatchID WatchID
	// Events are changes to the watcher's keys in revision order, whole
	// revisions only: the events of one revision are never split between
	// responses. Their KeyValues are shared with other watchers and must
	// not be modified. A PUT carries the key as the change left it; a
	// DELETE the key and, as its mod_revision, the revision of the
	// deletion (etcd's tombstone events).
	Events []mvccpb.Event
	// Revision is the revision up to which the watcher has been sent every
	// event, this response's included: that of its last event or later.
	// In a progress response it is the revision the progress is for.
	Revision int64
	// CompactRevision, when not 0, cancels the watcher: the revision it was
	// to be sent next is compacted away (etcd's ErrCompacted). Watching
	// again from CompactRevision on is possible. The watcher is gone: its
	// ID may be used again.
	CompactRevision int64
}

// WatchStream is a set of watchers sharing one channel, as a gRPC watch
// stream shares them (etcd's mvcc.WatchStream). Its methods are safe for
// concurrent use. See the package documentation, "Watches", for what
// watchers are sent and when.
type WatchStream struct {
	s  *Store
	ch chan WatchResponse

	// mu guards the fields below it; it is taken before the store's
	// watch lock.
	mu       sync.Mutex
	nextID   WatchID
	closed   bool
	watchers map[WatchID]*watcher

	// Guarded by the store's watch lock (watchHub.mu).
	//
	// chClosed: ch is closed (by Close or the store's Close); nothing
	// more is sent.
	chClosed bool
	// parked holds, first in first out, the responses of the stream's
	// watchers that found ch full (etcd's victims), at most one per
	// watcher; nothing else is sent on ch while it holds any.
	parked []parkedResponse
	// congested: the stream is in the hub's list of streams with parked
	// responses (it may have none left, after a Cancel).
	congested bool
}

// NewWatchStream opens a stream with a channel of Options.WatchBuffer
// responses.
func (s *Store) NewWatchStream() *WatchStream {
	ws := &WatchStream{
		s:        s,
		ch:       make(chan WatchResponse, s.opts.WatchBuffer),
		watchers: make(map[WatchID]*watcher),
	}
	s.watch.addStream(ws)
	return ws
}

// Watch adds a watcher of the keys in [key, end) from revision startRev
// on, and returns its ID: id, or with AutoWatchID the stream's next unused
// one. key and end follow Store.Range, and so a WatchCreateRequest's key
// and range_end as they come: end nil (or empty) watches key alone, "\x00"
// every key from key on; an empty key is "\x00", as etcd's server makes
// it. startRev 0 watches from the next revision; a start
// revision at or below the current one replays history from it (the
// watcher catches up in the background, see WatchStep); one above waits
// for it. A start revision below the compaction revision is accepted, and
// the watcher is then cancelled with a CompactRevision response, as etcd's.
// The key and end are copied.
func (ws *WatchStream) Watch(id WatchID, key, end []byte, startRev int64, opts ...WatchOption) (WatchID, error) {
	if id < 0 {
		return AllWatchers, fmt.Errorf("%w: %d", ErrWatchID, id)
	}
	if startRev < 0 {
		return AllWatchers, fmt.Errorf("%w: %d", ErrWatchStartRev, startRev)
	}
	if len(key) == 0 {
		key = []byte{0}
	}
	k, e := normalizeRange(key, end)
	if len(e) > 0 && bytes.Compare(k, e) >= 0 {
		return AllWatchers, ErrEmptyWatcherRange
	}
	var o WatchOption
	for _, x := range opts {
		o |= x
	}
	w := &watcher{ws: ws, key: bytes.Clone(k), opts: o, startRev: startRev}
	if e != nil {
		w.end = append([]byte{}, e...)
	}

	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.closed {
		return AllWatchers, ErrWatchStreamClosed
	}
	if id == AutoWatchID {
		for ws.watchers[ws.nextID] != nil && !ws.s.watch.gone(ws.watchers[ws.nextID]) {
			ws.nextID++
		}
		id = ws.nextID
		ws.nextID++
	} else if old := ws.watchers[id]; old != nil && !ws.s.watch.gone(old) {
		return AllWatchers, fmt.Errorf("%w: %d", ErrWatcherDuplicateID, id)
	}
	w.id = id
	if err := ws.s.watch.add(ws.s, w); err != nil {
		return AllWatchers, err
	}
	ws.watchers[id] = w
	return id, nil
}

// Cancel removes the watcher id. Once it returns nothing more is sent for
// it; what its channel holds already stays there. A watcher cancelled by
// compaction is gone already: Cancel forgets its ID and returns
// ErrWatcherNotExist.
func (ws *WatchStream) Cancel(id WatchID) error {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	w := ws.watchers[id]
	if w == nil || ws.closed {
		return fmt.Errorf("%w: %d", ErrWatcherNotExist, id)
	}
	delete(ws.watchers, id)
	if !ws.s.watch.remove(w) {
		return fmt.Errorf("%w: %d", ErrWatcherNotExist, id)
	}
	return nil
}

// RequestProgress sends, if the watcher id is synced (it has been sent
// every event up to the store's revision) and started at or below that
// revision, a response with no events and that revision, as etcd's does.
// It reports whether it sent one: not for a watcher that is catching up,
// waits for a future start revision, or whose channel is full.
func (ws *WatchStream) RequestProgress(id WatchID) bool {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	w := ws.watchers[id]
	if w == nil || ws.closed {
		return false
	}
	return ws.s.watch.progress(ws, []*watcher{w}, id)
}

// RequestProgressAll sends a progress response for every watcher of the
// stream, WatchID AllWatchers, if each of them would get one from
// RequestProgress; then, or if the stream has no watcher (nothing is
// sent, as etcd's), it reports true.
func (ws *WatchStream) RequestProgressAll() bool {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.closed {
		return false
	}
	ids := make([]*watcher, 0, len(ws.watchers))
	for _, w := range ws.watchers {
		ids = append(ids, w)
	}
	return ws.s.watch.progress(ws, ids, AllWatchers)
}

// Chan is the stream's channel. It is closed by Close, and by the store's
// Close.
func (ws *WatchStream) Chan() <-chan WatchResponse { return ws.ch }

// Rev is the revision every synced watcher has been sent every event up
// to: the store's revision once the write transaction in progress, if
// any, has notified its watchers. A watcher created with start revision 0
// now starts after it.
func (ws *WatchStream) Rev() int64 { return ws.s.watch.revision() }

// Close cancels every watcher of the stream and closes its channel. It is
// safe to call more than once.
func (ws *WatchStream) Close() {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.closed {
		return
	}
	ws.closed = true
	ws.s.watch.closeStream(ws)
	ws.watchers = nil
}
