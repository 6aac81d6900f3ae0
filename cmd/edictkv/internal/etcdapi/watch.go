package etcdapi

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/edictlog/edictlog/cmd/edictkv/internal/kvservice"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/mvcc"
	"github.com/edictlog/edictlog/edict"
)

// Watchable is what the Watch service needs of the state's store
// (*mvcc.Store): a stream of watchers for each gRPC watch stream. The
// store sends each watcher its events in revision order, each once, and
// attaches prev_kv; the stream's Rev is the revision its synced watchers
// have been sent everything up to, which created and cancelled responses
// report, as etcd's do.
type Watchable interface {
	NewWatchStream() *mvcc.WatchStream
}

const (
	// DefaultWatchProgressInterval is etcd's default period of progress
	// notifications (--watch-progress-notify-interval).
	DefaultWatchProgressInterval = 10 * time.Minute
	// minWatchProgressInterval is etcd's floor for it.
	minWatchProgressInterval = 100 * time.Millisecond
	// watchRequestBuffer is how many requests a stream's reader hands on
	// before it waits for the stream's sender (etcd's ctrlStreamBufLen).
	watchRequestBuffer = 16
	// A stream whose client requires a leader (clientv3.WithRequireLeader)
	// ends with "no leader" once this process has known none at
	// leaderLostChecks checks leaderCheckInterval apart, as etcd's end
	// after 3 election timeouts.
	leaderCheckInterval = time.Second
	leaderLostChecks    = 3
	// invalidWatchID is clientv3.InvalidWatchID: the watch_id of a refused
	// create and of a progress notification for every watcher.
	invalidWatchID = int64(mvcc.AllWatchers)
)

// errWatchDraining ends the watch streams of a process that is shutting
// down: Unavailable, so that clientv3 resumes them through another
// member from the revision it reached.
var errWatchDraining = status.Error(codes.Unavailable, "edictkv: this member is shutting down; watch through another")

// watchServer is etcd's Watch service over the state's store. Every
// member serves watches from its own applied state, nothing is forwarded
// to the leader: a header's revision is this member's, and a progress
// notification promises only what this member applied.
type watchServer struct {
	pb.UnimplementedWatchServer
	s *Server
}

// watchStreams are the open watch streams of a Server, ended by Drain.
type watchStreams struct {
	mu       sync.Mutex
	draining bool
	open     map[*watchConn]context.CancelCauseFunc
}

func (w *watchStreams) add(c *watchConn, cancel context.CancelCauseFunc) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.draining {
		return false
	}
	if w.open == nil {
		w.open = make(map[*watchConn]context.CancelCauseFunc)
	}
	w.open[c] = cancel
	return true
}

func (w *watchStreams) remove(c *watchConn) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.open, c)
}

// drain ends every open stream and refuses new ones.
func (w *watchStreams) drain() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.draining = true
	for _, cancel := range w.open {
		cancel(errWatchDraining)
	}
	clear(w.open)
}

// watcherState is what a stream keeps of a watcher it created, from its
// create until the client cancels it (etcd's per-ID maps): a watcher that
// compaction cancelled stays until then, so that its ID is not reused and
// the client's cancel is answered, as etcd's are.
type watcherState struct {
	progressNotify bool // progress_notify
	fragment       bool
	// quiet: no event was sent since the last progress tick, so the next
	// one sends a progress notification (etcd's progress[id]).
	quiet bool
}

// watchConn is one gRPC watch stream: a single goroutine (serve) handles
// its requests and sends every response, so that a created response goes
// out before any event of its watcher and a cancelled one after the last.
//
// The gRPC sends themselves happen on a goroutine of their own (sender),
// one at a time and in order: a client that stops reading blocks gRPC's
// Send once its flow-control window is full, and the stream must still end
// when the process drains or the client requires a leader that is gone;
// gRPC unblocks the Send once the handler returns.
type watchConn struct {
	s   *Server
	gs  pb.Watch_WatchServer
	ws  *mvcc.WatchStream
	ctx context.Context // the stream's life: ended by the handler's return or Drain

	sendq chan *pb.WatchResponse // to the sender, one at a time
	sent  chan error             // the sender's result of each

	watchers map[int64]*watcherState
	nextID   int64 // the next ID to try for watch_id 0 (etcd's AutoWatchID)
	// reads counts the responses taken off ws's channel; dropThrough[id]
	// is the last of them that may still be a response of a watcher id
	// the client cancelled, which must not reach a new watcher of that ID.
	reads       uint64
	dropThrough map[mvcc.WatchID]uint64
}

// Watch serves one stream of watch requests until the client ends it, the
// process drains, the state closes, or (with clientv3.WithRequireLeader)
// this process knows no leader for leaderLostChecks checks.
func (w *watchServer) Watch(gs pb.Watch_WatchServer) error {
	s := w.s
	requireLeader := requiresLeader(gs.Context())
	if requireLeader && s.cfg.Node.Status().Leader == edict.None {
		return rpctypes.ErrGRPCNoLeader
	}
	ctx, cancel := context.WithCancelCause(gs.Context())
	defer cancel(nil)
	c := newWatchConn(ctx, s, gs, nil)
	if !s.watches.add(c, cancel) {
		return errWatchDraining
	}
	defer s.watches.remove(c)
	c.ws = s.cfg.Watchable.NewWatchStream()
	defer c.ws.Close()

	// The reader hands requests on; it stops at the stream's end, which
	// gRPC brings about once Watch returns.
	reqs := make(chan *pb.WatchRequest, watchRequestBuffer)
	recvErr := make(chan error, 1)
	go func() {
		for {
			r, err := gs.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			select {
			case reqs <- r:
			case <-ctx.Done():
				return
			}
		}
	}()

	progress := time.NewTicker(s.watchProgressInterval())
	defer progress.Stop()
	var leaderTick <-chan time.Time
	if requireLeader {
		t := time.NewTicker(leaderCheckInterval)
		defer t.Stop()
		leaderTick = t.C
	}
	leaderless := 0
	for {
		select {
		case r := <-reqs:
			if err := c.handle(r); err != nil {
				return err
			}
		case err := <-recvErr:
			switch {
			case errors.Is(err, io.EOF):
				// The client closed its side: it is still sent what its
				// watchers get, as etcd's are.
				recvErr = nil
			case errors.Is(err, context.Canceled), status.Code(err) == codes.Canceled:
				return rpctypes.ErrGRPCWatchCanceled
			default:
				s.log.Debug("watch stream receive failed", "err", err)
				return err
			}
		case r, ok := <-c.ws.Chan():
			if !ok {
				return status.Error(codes.Unavailable, "edictkv: the state is closing")
			}
			if err := c.forward(r); err != nil {
				s.log.Debug("watch stream send failed", "err", err)
				return err
			}
		case <-progress.C:
			c.progressTick()
		case <-leaderTick:
			if s.cfg.Node.Status().Leader != edict.None {
				leaderless = 0
				continue
			}
			if leaderless++; leaderless >= leaderLostChecks {
				return rpctypes.ErrGRPCNoLeader
			}
		case <-ctx.Done():
			return c.ended()
		}
	}
}

// newWatchConn starts the sender of a stream that lives until ctx ends.
func newWatchConn(ctx context.Context, s *Server, gs pb.Watch_WatchServer, ws *mvcc.WatchStream) *watchConn {
	c := &watchConn{s: s, gs: gs, ws: ws, ctx: ctx,
		watchers: make(map[int64]*watcherState), dropThrough: make(map[mvcc.WatchID]uint64),
		sendq: make(chan *pb.WatchResponse), sent: make(chan error, 1)}
	go func() {
		for {
			select {
			case r := <-c.sendq:
				c.sent <- gs.Send(r)
			case <-ctx.Done():
				return
			}
		}
	}()
	return c
}

// ended is the status a stream ends with once its context is done: the
// cause Drain or a lost leader gave, or the client's cancellation.
func (c *watchConn) ended() error {
	err := context.Cause(c.ctx)
	if _, ok := status.FromError(err); ok {
		return err
	}
	if errors.Is(err, context.Canceled) {
		return rpctypes.ErrGRPCWatchCanceled
	}
	return status.FromContextError(err).Err()
}

// requiresLeader reports whether the client asked for a stream that ends
// when no leader is known (clientv3.WithRequireLeader's metadata).
func requiresLeader(ctx context.Context) bool {
	// One key's values, not a copy of the call's whole metadata
	// (metadata.FromIncomingContext), on every call.
	v := metadata.ValueFromIncomingContext(ctx, rpctypes.MetadataRequireLeaderKey)
	return len(v) > 0 && v[0] == rpctypes.MetadataHasLeader
}

// watchProgressInterval is a new stream's period of progress
// notifications: the configured one (etcd's floor and default) plus up to
// a tenth of it at random, as etcd's, so that streams opened together do
// not tick together.
func (s *Server) watchProgressInterval() time.Duration {
	d := s.cfg.WatchProgressInterval
	switch {
	case d == 0:
		d = DefaultWatchProgressInterval
	case d < minWatchProgressInterval:
		d = minWatchProgressInterval
	}
	return d + rand.N(d/10+1)
}

func (c *watchConn) handle(r *pb.WatchRequest) error {
	switch u := r.RequestUnion.(type) {
	case *pb.WatchRequest_CreateRequest:
		if u.CreateRequest != nil {
			return c.create(u.CreateRequest)
		}
	case *pb.WatchRequest_CancelRequest:
		if u.CancelRequest != nil {
			return c.cancel(u.CancelRequest.WatchId)
		}
	case *pb.WatchRequest_ProgressRequest:
		// A progress notification for every watcher of the stream, only
		// if each is synced: sent by the store in order with the events.
		if u.ProgressRequest != nil {
			c.ws.RequestProgressAll()
		}
	default:
		// An unknown request leaves the stream open, as etcd's.
		c.s.log.Debug("ignoring an unknown watch request", "type", r.RequestUnion)
	}
	return nil
}

// create adds a watcher and answers with etcd's created response, or
// with a created and cancelled one (watch_id -1) naming the reason, as
// etcd's: a negative start revision (compacted), a watch_id in use on the
// stream (duplicate), an empty range. watch_id 0 picks the stream's next
// ID not in use, as etcd's; a negative one is refused (etcd would accept
// it, and -1 would then be confused with a progress notification).
func (c *watchConn) create(r *pb.WatchCreateRequest) error {
	refuse := func(reason string) error {
		return c.send(&pb.WatchResponse{Header: c.header(c.ws.Rev()), WatchId: invalidWatchID,
			Created: true, Canceled: true, CancelReason: reason})
	}
	if r.StartRevision < 0 {
		return refuse(rpctypes.ErrCompacted.Error())
	}
	id := r.WatchId
	switch {
	case id < 0:
		return refuse(mvcc.ErrWatchID.Error())
	case id == 0:
		for c.watchers[c.nextID] != nil {
			c.nextID++
		}
		id = c.nextID
	case c.watchers[id] != nil:
		return refuse(mvcc.ErrWatcherDuplicateID.Error())
	}
	var opts []mvcc.WatchOption
	if r.PrevKv {
		opts = append(opts, mvcc.WatchPrevKV)
	}
	for _, f := range r.Filters {
		switch f {
		case pb.WatchCreateRequest_NOPUT:
			opts = append(opts, mvcc.WatchNoPut)
		case pb.WatchCreateRequest_NODELETE:
			opts = append(opts, mvcc.WatchNoDelete)
		}
	}
	// ID 0 is the store's AutoWatchID: the stream asks for it once (the
	// IDs it picks only grow), when the store's first pick is 0 too.
	got, err := c.ws.Watch(mvcc.WatchID(id), r.Key, r.RangeEnd, r.StartRevision, opts...)
	switch {
	case errors.Is(err, mvcc.ErrEmptyWatcherRange):
		return refuse(mvcc.ErrEmptyWatcherRange.Error())
	case errors.Is(err, mvcc.ErrWatcherDuplicateID):
		return refuse(mvcc.ErrWatcherDuplicateID.Error())
	case errors.Is(err, mvcc.ErrClosed), errors.Is(err, mvcc.ErrWatchStreamClosed):
		return status.Error(codes.Unavailable, "edictkv: the state is closing")
	case err != nil:
		c.s.log.Error("watch failed", "key", r.Key, "range_end", r.RangeEnd, "start_revision", r.StartRevision, "err", err)
		return status.Errorf(codes.Internal, "edictkv: watch: %v", err)
	case int64(got) != id:
		_ = c.ws.Cancel(got)
		return status.Errorf(codes.Internal, "edictkv: watch: the store chose ID %d for watch_id %d", got, id)
	}
	if r.WatchId == 0 {
		c.nextID++
	}
	c.watchers[id] = &watcherState{progressNotify: r.ProgressNotify, fragment: r.Fragment, quiet: true}
	return c.send(&pb.WatchResponse{Header: c.header(c.ws.Rev()), WatchId: id, Created: true})
}

// cancel removes a watcher the stream created and answers with etcd's
// cancelled response, also for one that compaction cancelled already; an
// ID the stream does not know gets no answer, as in etcd.
func (c *watchConn) cancel(id int64) error {
	if c.watchers[id] == nil {
		return nil
	}
	if err := c.ws.Cancel(mvcc.WatchID(id)); err != nil && !errors.Is(err, mvcc.ErrWatcherNotExist) {
		return status.Errorf(codes.Internal, "edictkv: cancel watch %d: %v", id, err)
	}
	delete(c.watchers, id)
	// Nothing more is sent for the watcher, but the channel may hold
	// responses of it: at most as many as it holds now.
	for old, last := range c.dropThrough {
		if last <= c.reads {
			delete(c.dropThrough, old)
		}
	}
	if n := len(c.ws.Chan()); n > 0 {
		c.dropThrough[mvcc.WatchID(id)] = c.reads + uint64(n)
	}
	return c.send(&pb.WatchResponse{Header: c.header(c.ws.Rev()), WatchId: id, Canceled: true})
}

// progressTick sends, as etcd's ticker does, a progress notification to
// each watcher with progress_notify that was sent no event since the last
// tick and is synced (the store sends none otherwise).
func (c *watchConn) progressTick() {
	for id, w := range c.watchers {
		if !w.progressNotify {
			continue
		}
		if w.quiet {
			c.ws.RequestProgress(mvcc.WatchID(id))
		}
		w.quiet = true
	}
}

// forward sends a response of the store: events, a progress notification
// (watch_id -1 for the whole stream), or a cancellation by compaction,
// whose header revision is 0 as etcd's is.
func (c *watchConn) forward(r mvcc.WatchResponse) error {
	c.reads++
	var w *watcherState
	if r.WatchID != mvcc.AllWatchers {
		if last, ok := c.dropThrough[r.WatchID]; ok {
			if c.reads <= last {
				return nil
			}
			delete(c.dropThrough, r.WatchID)
		}
		if w = c.watchers[int64(r.WatchID)]; w == nil {
			return nil
		}
	}
	events := make([]*mvccpb.Event, len(r.Events))
	for i := range r.Events {
		events[i] = &r.Events[i]
	}
	rev := r.Revision
	if r.CompactRevision != 0 {
		rev = 0
	}
	resp := &pb.WatchResponse{Header: c.header(rev), WatchId: int64(r.WatchID), Events: events,
		CompactRevision: r.CompactRevision, Canceled: r.CompactRevision != 0}
	var err error
	if w != nil && w.fragment {
		err = sendFragments(resp, c.s.cfg.KV.Limits().MaxRequestBytes+grpcOverhead, c.send)
	} else {
		err = sendByRevision(resp, kvservice.MaxResponseBytes, c.send)
	}
	if err == nil && w != nil && len(events) > 0 {
		w.quiet = false
	}
	return err
}

// send hands r to the sender and waits for gRPC to take it, or for the
// stream's end: a Send blocked by a client that does not read does not
// keep the stream open.
func (c *watchConn) send(r *pb.WatchResponse) error {
	select {
	case c.sendq <- r:
	case <-c.ctx.Done():
		return c.ended()
	}
	select {
	case err := <-c.sent:
		return err
	case <-c.ctx.Done():
		return c.ended()
	}
}

func (c *watchConn) header(rev int64) *pb.ResponseHeader {
	h := &pb.ResponseHeader{Revision: rev}
	c.s.fill(h, false)
	return h
}

// sendFragments is etcd's: a response of a watcher that asked for
// fragment, if its encoding is maxBytes or more and it has two events or
// more, goes out in parts of as many events as stay under maxBytes (at
// least one), each but the last marked fragment, for the client to join.
func sendFragments(wr *pb.WatchResponse, maxBytes int, send func(*pb.WatchResponse) error) error {
	if wr.Size() < maxBytes || len(wr.Events) < 2 {
		return send(wr)
	}
	ow := *wr
	ow.Events = make([]*mvccpb.Event, 0)
	ow.Fragment = true
	var idx int
	for {
		cur := ow
		for _, ev := range wr.Events[idx:] {
			cur.Events = append(cur.Events, ev)
			if len(cur.Events) > 1 && cur.Size() >= maxBytes {
				cur.Events = cur.Events[:len(cur.Events)-1]
				break
			}
			idx++
		}
		if idx == len(wr.Events) {
			cur.Fragment = false
		}
		if err := send(&cur); err != nil {
			return err
		}
		if !cur.Fragment {
			return nil
		}
	}
}

// sendByRevision sends a response of a watcher that did not ask for
// fragment whole, unless its encoding is over maxBytes, gRPC's limit
// here (etcd's is 2 GiB): then in parts of whole revisions, each as many
// as fit (at least one), every part but the last with the revision of its
// last event in its header: each is a complete response, as if the store
// had sent them apart. One revision over the limit cannot be sent
// without fragment; its send fails and ends the stream.
func sendByRevision(wr *pb.WatchResponse, maxBytes int, send func(*pb.WatchResponse) error) error {
	if len(wr.Events) < 2 || wr.Size() <= maxBytes {
		return send(wr)
	}
	base := *wr
	base.Events = nil
	overhead := base.Size() + 64 // a header revision longer by a few bytes
	for start := 0; start < len(wr.Events); {
		end, size := start, overhead
		for end < len(wr.Events) {
			next := end
			add := 0
			for rev := wr.Events[end].Kv.ModRevision; next < len(wr.Events) && wr.Events[next].Kv.ModRevision == rev; next++ {
				add += eventSize(wr.Events[next])
			}
			if end > start && size+add > maxBytes {
				break
			}
			end, size = next, size+add
		}
		part := base
		part.Events = wr.Events[start:end]
		if end < len(wr.Events) {
			h := *wr.Header
			h.Revision = wr.Events[end-1].Kv.ModRevision
			part.Header = &h
		}
		if err := send(&part); err != nil {
			return err
		}
		start = end
	}
	return nil
}

// eventSize is what an event adds to a response's encoding: its tag, its
// length and itself.
func eventSize(ev *mvccpb.Event) int {
	n := ev.Size()
	l := 1
	for v := uint64(n); v >= 0x80; v >>= 7 {
		l++
	}
	return 1 + l + n
}
