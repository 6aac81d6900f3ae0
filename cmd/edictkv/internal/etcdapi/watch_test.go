package etcdapi

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/edictlog/edictlog/cmd/edictkv/internal/kvservice"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/mvcc"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/mvcc/backend"
	"github.com/edictlog/edictlog/edict"
)

// watchClient is one gRPC watch stream of a test, with its responses read
// by a goroutine of its own.
type watchClient struct {
	t    *testing.T
	s    pb.Watch_WatchClient
	resp chan *pb.WatchResponse
	err  chan error
}

func openWatch(t *testing.T, p *process, ctx context.Context) *watchClient {
	t.Helper()
	s, err := pb.NewWatchClient(p.conn).Watch(ctx)
	require.NoError(t, err)
	w := &watchClient{t: t, s: s, resp: make(chan *pb.WatchResponse, 1024), err: make(chan error, 1)}
	go func() {
		for {
			r, err := s.Recv()
			if err != nil {
				w.err <- err
				return
			}
			w.resp <- r
		}
	}()
	return w
}

func (w *watchClient) send(r *pb.WatchRequest) {
	w.t.Helper()
	require.NoError(w.t, w.s.Send(r))
}

func (w *watchClient) create(c *pb.WatchCreateRequest) {
	w.t.Helper()
	w.send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: c}})
}

func (w *watchClient) cancel(id int64) {
	w.t.Helper()
	w.send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CancelRequest{CancelRequest: &pb.WatchCancelRequest{WatchId: id}}})
}

func (w *watchClient) requestProgress() {
	w.t.Helper()
	w.send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_ProgressRequest{ProgressRequest: &pb.WatchProgressRequest{}}})
}

// next is the stream's next response; the test fails if the stream ends
// or none comes within 10 s.
func (w *watchClient) next() *pb.WatchResponse {
	w.t.Helper()
	select {
	case r := <-w.resp:
		return r
	case err := <-w.err:
		w.t.Fatalf("the watch stream ended: %v", err)
	case <-time.After(10 * time.Second):
		w.t.Fatal("no watch response within 10s")
	}
	return nil
}

// ended is the error the stream ended with.
func (w *watchClient) ended() error {
	w.t.Helper()
	for {
		select {
		case r := <-w.resp:
			w.t.Logf("response before the end: %v", r)
		case err := <-w.err:
			return err
		case <-time.After(20 * time.Second):
			w.t.Fatal("the watch stream did not end within 20s")
		}
	}
}

// created reads the created response of a watcher and returns its ID.
func (w *watchClient) created() int64 {
	w.t.Helper()
	r := w.next()
	require.True(w.t, r.Created, "a created response: %v", r)
	require.False(w.t, r.Canceled, "%v", r)
	return r.WatchId
}

// untilProgress asks for progress until a notification for the whole
// stream comes (the store sends one only once every watcher is synced),
// and returns the responses before it, and it.
func (w *watchClient) untilProgress() ([]*pb.WatchResponse, *pb.WatchResponse) {
	w.t.Helper()
	var got []*pb.WatchResponse
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		w.requestProgress()
		wait := time.After(100 * time.Millisecond)
	read:
		for {
			select {
			case r := <-w.resp:
				if r.WatchId == invalidWatchID && len(r.Events) == 0 && !r.Created && !r.Canceled {
					return got, r
				}
				got = append(got, r)
			case err := <-w.err:
				w.t.Fatalf("the watch stream ended: %v", err)
			case <-wait:
				break read
			}
		}
	}
	w.t.Fatal("no progress notification within 10s")
	return nil, nil
}

// ev is an event as the tests write it: type, key, value (empty for a
// delete), mod revision, and the previous value ("-" for none).
type ev struct {
	typ        mvccpb.Event_EventType
	key, value string
	mod        int64
	prev       string
}

func evsOf(rs []*pb.WatchResponse, prevKV bool) []ev {
	var out []ev
	for _, r := range rs {
		for _, e := range r.Events {
			x := ev{typ: e.Type, key: string(e.Kv.Key), value: string(e.Kv.Value), mod: e.Kv.ModRevision}
			if prevKV {
				x.prev = "-"
				if e.PrevKv != nil {
					x.prev = string(e.PrevKv.Value)
				}
			}
			out = append(out, x)
		}
	}
	return out
}

func put(k, v string, mod int64) ev { return ev{typ: mvccpb.PUT, key: k, value: v, mod: mod} }
func del(k string, mod int64) ev    { return ev{typ: mvccpb.DELETE, key: k, mod: mod} }
func (e ev) was(v string) ev        { e.prev = v; return e }

// watchHistory writes, through p's KV service, revisions 2 to 7:
// a=1, b=1, a=2, delete a, c/x=1, and c/y=1 with c/z=1 in one txn.
func watchHistory(t *testing.T, p *process, ctx context.Context) {
	t.Helper()
	kv := pb.NewKVClient(p.conn)
	putKV := func(k, v string) *pb.RequestOp {
		return &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte(k), Value: []byte(v)}}}
	}
	for _, op := range []*pb.RequestOp{putKV("a", "1"), putKV("b", "1"), putKV("a", "2"),
		{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: &pb.DeleteRangeRequest{Key: []byte("a")}}}, putKV("c/x", "1")} {
		_, err := kv.Txn(ctx, &pb.TxnRequest{Success: []*pb.RequestOp{op}})
		require.NoError(t, err)
	}
	r, err := kv.Txn(ctx, &pb.TxnRequest{Success: []*pb.RequestOp{putKV("c/y", "1"), putKV("c/z", "1")}})
	require.NoError(t, err)
	require.Equal(t, int64(7), r.Header.Revision)
}

// A watcher gets exactly etcd's events from its start revision on: by
// key, range, prefix and from-key, with prev_kv and the filters, one
// response per revision's changes or more, headers naming this process
// at its revision; the created response carries the stream's revision.
func TestWatchCreate(t *testing.T) {
	p := startProcess(t, 1, 1, nil)
	ctx := ctxT(t)
	watchHistory(t, p, ctx)
	all := []ev{put("a", "1", 2), put("b", "1", 3), put("a", "2", 4), del("a", 5), put("c/x", "1", 6), put("c/y", "1", 7), put("c/z", "1", 7)}
	for _, c := range []struct {
		name string
		req  *pb.WatchCreateRequest
		want []ev
	}{
		{"a key from revision 2", &pb.WatchCreateRequest{Key: []byte("a"), StartRevision: 2},
			[]ev{put("a", "1", 2), put("a", "2", 4), del("a", 5)}},
		{"a key from revision 4", &pb.WatchCreateRequest{Key: []byte("a"), StartRevision: 4},
			[]ev{put("a", "2", 4), del("a", 5)}},
		{"prev_kv", &pb.WatchCreateRequest{Key: []byte("a"), StartRevision: 2, PrevKv: true},
			[]ev{put("a", "1", 2).was("-"), put("a", "2", 4).was("1"), del("a", 5).was("2")}},
		{"NOPUT", &pb.WatchCreateRequest{Key: []byte("a"), StartRevision: 2, Filters: []pb.WatchCreateRequest_FilterType{pb.WatchCreateRequest_NOPUT}},
			[]ev{del("a", 5)}},
		{"NODELETE", &pb.WatchCreateRequest{Key: []byte("a"), StartRevision: 2, Filters: []pb.WatchCreateRequest_FilterType{pb.WatchCreateRequest_NODELETE}},
			[]ev{put("a", "1", 2), put("a", "2", 4)}},
		{"both filters", &pb.WatchCreateRequest{Key: []byte("a"), StartRevision: 2,
			Filters: []pb.WatchCreateRequest_FilterType{pb.WatchCreateRequest_NOPUT, pb.WatchCreateRequest_NODELETE}}, nil},
		{"a range", &pb.WatchCreateRequest{Key: []byte("a"), RangeEnd: []byte("c"), StartRevision: 3},
			[]ev{put("b", "1", 3), put("a", "2", 4), del("a", 5)}},
		{"a prefix", &pb.WatchCreateRequest{Key: []byte("c/"), RangeEnd: []byte("c0"), StartRevision: 1},
			[]ev{put("c/x", "1", 6), put("c/y", "1", 7), put("c/z", "1", 7)}},
		{"from a key", &pb.WatchCreateRequest{Key: []byte("b"), RangeEnd: []byte{0}, StartRevision: 2},
			[]ev{put("b", "1", 3), put("c/x", "1", 6), put("c/y", "1", 7), put("c/z", "1", 7)}},
		{"every key", &pb.WatchCreateRequest{Key: []byte{0}, RangeEnd: []byte{0}, StartRevision: 2}, all},
		{"an empty key is every key from \\x00", &pb.WatchCreateRequest{RangeEnd: []byte{0}, StartRevision: 2}, all},
		{"from now", &pb.WatchCreateRequest{Key: []byte("a")}, nil},
		{"from the next revision", &pb.WatchCreateRequest{Key: []byte{0}, RangeEnd: []byte{0}, StartRevision: 8}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := openWatch(t, p, ctx)
			w.create(c.req)
			cr := w.next()
			require.True(t, cr.Created)
			require.False(t, cr.Canceled)
			assert.Equal(t, int64(0), cr.WatchId, "the stream's first ID")
			assert.Equal(t, int64(7), cr.Header.Revision, "the stream's revision")
			assert.Equal(t, uint64(1), cr.Header.MemberId)
			assert.Equal(t, uint64(17), cr.Header.RaftTerm)
			assert.Equal(t, p.api.clusterID, cr.Header.ClusterId)
			var got []*pb.WatchResponse
			if c.req.StartRevision == 8 {
				// A watcher from a future revision is not synced: no
				// progress notification; its events come once written.
				_, err := pb.NewKVClient(p.conn).Put(ctx, &pb.PutRequest{Key: []byte("d"), Value: []byte("1")})
				require.NoError(t, err)
				got = append(got, w.next())
				assert.Equal(t, []ev{put("d", "1", 8)}, evsOf(got, false))
				return
			}
			got, prog := w.untilProgress()
			assert.Equal(t, int64(7), prog.Header.Revision, "progress at the process's revision")
			assert.Equal(t, c.want, evsOf(got, c.req.PrevKv))
			for _, r := range got {
				assert.Equal(t, int64(0), r.WatchId)
				assert.False(t, r.Created || r.Canceled || r.Fragment)
				require.NotEmpty(t, r.Events, "a response of the watcher carries events")
				assert.GreaterOrEqual(t, r.Header.Revision, r.Events[len(r.Events)-1].Kv.ModRevision)
				assert.LessOrEqual(t, r.Header.Revision, int64(7))
				assert.Equal(t, uint64(1), r.Header.MemberId)
			}
		})
	}
}

// Refused creates are answered as etcd's: created and cancelled, watch_id
// -1, the reason in cancel_reason; the stream goes on. watch_id 0 picks
// the stream's next free ID, past those a client chose.
func TestWatchRefusedAndIDs(t *testing.T) {
	p := startProcess(t, 1, 1, nil)
	ctx := ctxT(t)
	w := openWatch(t, p, ctx)
	w.create(&pb.WatchCreateRequest{Key: []byte("a"), WatchId: 1})
	assert.Equal(t, int64(1), w.created())
	for _, c := range []struct {
		name   string
		req    *pb.WatchCreateRequest
		reason string
	}{
		{"duplicate watch_id", &pb.WatchCreateRequest{Key: []byte("b"), WatchId: 1}, "mvcc: duplicate watch ID provided on the WatchStream"},
		{"negative start_revision", &pb.WatchCreateRequest{Key: []byte("b"), StartRevision: -1}, rpctypes.ErrCompacted.Error()},
		{"empty range", &pb.WatchCreateRequest{Key: []byte("b"), RangeEnd: []byte("a")}, "mvcc: watcher range is empty"},
		{"negative watch_id", &pb.WatchCreateRequest{Key: []byte("b"), WatchId: -5}, mvcc.ErrWatchID.Error()},
	} {
		t.Run(c.name, func(t *testing.T) {
			w.create(c.req)
			r := w.next()
			assert.True(t, r.Created)
			assert.True(t, r.Canceled)
			assert.Equal(t, invalidWatchID, r.WatchId)
			assert.Equal(t, c.reason, r.CancelReason)
			assert.Equal(t, int64(1), r.Header.Revision)
		})
	}
	var ids []int64
	for range 3 {
		w.create(&pb.WatchCreateRequest{Key: []byte("a")})
		ids = append(ids, w.created())
	}
	assert.Equal(t, []int64{0, 2, 3}, ids, "etcd's automatic IDs skip the ones in use")
	w.create(&pb.WatchCreateRequest{Key: []byte("a"), WatchId: 7})
	assert.Equal(t, int64(7), w.created())
	_, err := pb.NewKVClient(p.conn).Put(ctx, &pb.PutRequest{Key: []byte("a"), Value: []byte("x")})
	require.NoError(t, err)
	var got []int64
	for range 5 {
		r := w.next()
		assert.Equal(t, []ev{put("a", "x", 2)}, evsOf([]*pb.WatchResponse{r}, false))
		got = append(got, r.WatchId)
	}
	slices.Sort(got)
	assert.Equal(t, []int64{0, 1, 2, 3, 7}, got, "each watcher gets the event once")
}

// Cancel is answered with a cancelled response and ends the watcher's
// events; a cancel of an ID the stream does not know is not answered, as
// in etcd; the ID may then be used again.
func TestWatchCancel(t *testing.T) {
	p := startProcess(t, 1, 1, nil)
	ctx := ctxT(t)
	kv := pb.NewKVClient(p.conn)
	w := openWatch(t, p, ctx)
	w.create(&pb.WatchCreateRequest{Key: []byte("a"), WatchId: 3})
	require.Equal(t, int64(3), w.created())
	w.create(&pb.WatchCreateRequest{Key: []byte("a"), WatchId: 4})
	require.Equal(t, int64(4), w.created())
	w.cancel(3)
	r := w.next()
	assert.True(t, r.Canceled)
	assert.False(t, r.Created)
	assert.Equal(t, int64(3), r.WatchId)
	assert.Empty(t, r.CancelReason)
	assert.Equal(t, int64(1), r.Header.Revision)
	w.cancel(3)
	w.cancel(99)
	_, err := kv.Put(ctx, &pb.PutRequest{Key: []byte("a"), Value: []byte("1")})
	require.NoError(t, err)
	r = w.next()
	assert.Equal(t, int64(4), r.WatchId, "no answer to the unknown cancels, no event for the cancelled watcher: %v", r)
	assert.Equal(t, []ev{put("a", "1", 2)}, evsOf([]*pb.WatchResponse{r}, false))

	w.create(&pb.WatchCreateRequest{Key: []byte("a"), WatchId: 3, StartRevision: 2})
	require.Equal(t, int64(3), w.created())
	r = w.next()
	assert.Equal(t, int64(3), r.WatchId)
	assert.Equal(t, []ev{put("a", "1", 2)}, evsOf([]*pb.WatchResponse{r}, false))
}

// A watcher from a compacted revision is cancelled as etcd's: a response
// with compact_revision and canceled, header revision 0. It stays known to
// the stream until the client cancels it (its ID is in use, the cancel is
// answered); watching again from the compaction revision gets its events.
func TestWatchCompacted(t *testing.T) {
	p := startProcess(t, 1, 1, nil)
	ctx := ctxT(t)
	watchHistory(t, p, ctx)
	_, err := pb.NewKVClient(p.conn).Compact(ctx, &pb.CompactionRequest{Revision: 5, Physical: true})
	require.NoError(t, err)
	w := openWatch(t, p, ctx)
	w.create(&pb.WatchCreateRequest{Key: []byte("a"), StartRevision: 3, WatchId: 4})
	id := w.created()
	r := w.next()
	assert.Equal(t, id, r.WatchId)
	assert.True(t, r.Canceled)
	assert.Equal(t, int64(5), r.CompactRevision)
	assert.Empty(t, r.Events)
	assert.Equal(t, int64(0), r.Header.Revision, "etcd's compaction cancel has no revision")
	assert.Empty(t, r.CancelReason)

	w.create(&pb.WatchCreateRequest{Key: []byte("a"), WatchId: id})
	r = w.next()
	assert.True(t, r.Created && r.Canceled, "the ID is in use until the client cancels it: %v", r)
	w.cancel(id)
	r = w.next()
	assert.True(t, r.Canceled)
	assert.Equal(t, id, r.WatchId)
	assert.Zero(t, r.CompactRevision)

	w.create(&pb.WatchCreateRequest{Key: []byte("a"), StartRevision: 5, PrevKv: true})
	w.created()
	got, _ := w.untilProgress()
	assert.Equal(t, []ev{del("a", 5).was("-")}, evsOf(got, true),
		"the compaction revision's change, with no prev_kv: the key before it is compacted away")
}

// A progress request is answered with one notification for the whole
// stream (watch_id -1, this process's revision) only when every watcher
// is synced: not while one waits for a future revision.
func TestWatchProgressRequest(t *testing.T) {
	p := startProcess(t, 1, 1, nil)
	ctx := ctxT(t)
	kv := pb.NewKVClient(p.conn)
	w := openWatch(t, p, ctx)
	w.requestProgress() // no watcher: nothing, as etcd
	w.create(&pb.WatchCreateRequest{Key: []byte("a")})
	a := w.created()
	w.create(&pb.WatchCreateRequest{Key: []byte("b"), StartRevision: 10})
	b := w.created()
	w.requestProgress()
	_, err := kv.Put(ctx, &pb.PutRequest{Key: []byte("a"), Value: []byte("1")})
	require.NoError(t, err)
	w.cancel(b)
	w.requestProgress()
	var fromStore []*pb.WatchResponse
	for len(fromStore) < 2 {
		r := w.next()
		if r.Canceled {
			assert.Equal(t, b, r.WatchId)
			continue
		}
		fromStore = append(fromStore, r)
	}
	assert.Equal(t, a, fromStore[0].WatchId, "no progress while b waits for revision 10: %v", fromStore[0])
	assert.Equal(t, []ev{put("a", "1", 2)}, evsOf(fromStore[:1], false))
	prog := fromStore[1]
	assert.Equal(t, invalidWatchID, prog.WatchId)
	assert.Empty(t, prog.Events)
	assert.Equal(t, int64(2), prog.Header.Revision)
	assert.False(t, prog.Created || prog.Canceled)
}

// A watcher with progress_notify that gets no event is sent, every
// interval, a notification with its own watch_id at the process's
// revision; one without it gets none.
func TestWatchProgressNotify(t *testing.T) {
	p := startProcessWith(t, 1, 1, nil, func(_ *kvservice.Config, c *Config) { c.WatchProgressInterval = time.Nanosecond })
	ctx := ctxT(t)
	_, err := pb.NewKVClient(p.conn).Put(ctx, &pb.PutRequest{Key: []byte("x"), Value: []byte("1")})
	require.NoError(t, err)
	w := openWatch(t, p, ctx)
	w.create(&pb.WatchCreateRequest{Key: []byte("a"), WatchId: 1})
	w.created()
	w.create(&pb.WatchCreateRequest{Key: []byte("b"), WatchId: 2, ProgressNotify: true})
	w.created()
	for range 3 {
		r := w.next()
		assert.Equal(t, int64(2), r.WatchId, "%v", r)
		assert.Empty(t, r.Events)
		assert.Equal(t, int64(2), r.Header.Revision)
	}
}

// A response of a watcher that asked for fragment, over the request size
// limit, comes in parts marked fragment but the last, which join into
// the whole; without fragment it comes whole.
func TestWatchFragment(t *testing.T) {
	const value = 100 << 10
	p := startProcessWith(t, 1, 1, nil, func(kc *kvservice.Config, _ *Config) {
		kc.Limits = kvservice.Limits{MaxValueBytes: value, MaxRequestBytes: value + 1<<10}
	})
	ctx := ctxT(t)
	kv := pb.NewKVClient(p.conn)
	var want []ev
	for i := range 8 {
		v := bytes.Repeat([]byte{byte('a' + i)}, value)
		r, err := kv.Put(ctx, &pb.PutRequest{Key: fmt.Appendf(nil, "f/%d", i), Value: v})
		require.NoError(t, err)
		want = append(want, put(fmt.Sprintf("f/%d", i), string(v), r.Header.Revision))
	}
	limit := p.api.cfg.KV.Limits().MaxRequestBytes + grpcOverhead
	require.Greater(t, len(want)*value, limit, "the history is over the limit")
	for _, fragment := range []bool{true, false} {
		t.Run(fmt.Sprint("fragment=", fragment), func(t *testing.T) {
			w := openWatch(t, p, ctx)
			w.create(&pb.WatchCreateRequest{Key: []byte("f/"), RangeEnd: []byte("f0"), StartRevision: 2, Fragment: fragment})
			w.created()
			var parts []*pb.WatchResponse
			for n := 0; n < len(want); {
				r := w.next()
				parts = append(parts, r)
				n += len(r.Events)
				if fragment {
					assert.Less(t, r.Size(), limit+value, "a part is under the limit, but for its last event")
				}
			}
			assert.Equal(t, want, evsOf(parts, false))
			if fragment {
				require.Greater(t, len(parts), 1)
				for i, r := range parts {
					assert.Equal(t, i < len(parts)-1, r.Fragment, "part %d of %d", i, len(parts))
				}
			} else {
				for _, r := range parts {
					assert.False(t, r.Fragment)
				}
			}
		})
	}
}

// With clientv3.WithRequireLeader a stream is refused while no leader is
// known, and ends with "no leader" once none has been known for a while.
func TestWatchRequireLeader(t *testing.T) {
	p := startProcess(t, 1, 1, nil)
	ctx := metadata.AppendToOutgoingContext(ctxT(t), rpctypes.MetadataRequireLeaderKey, rpctypes.MetadataHasLeader)
	w := openWatch(t, p, ctx)
	w.create(&pb.WatchCreateRequest{Key: []byte("a")})
	w.created()
	p.node.mu.Lock()
	p.node.st.Leader = edict.None
	p.node.mu.Unlock()
	err := w.ended()
	assert.Equal(t, rpctypes.ErrGRPCNoLeader.Error(), status.Convert(err).Err().Error(), "%v", err)

	w = openWatch(t, p, ctx)
	assert.Equal(t, codes.Unavailable, status.Code(w.ended()))
	// Without the metadata a stream is served whatever the leader.
	w = openWatch(t, p, ctxT(t))
	w.create(&pb.WatchCreateRequest{Key: []byte("a")})
	w.created()
}

// Drain ends the open streams with Unavailable (clientv3 resumes them
// elsewhere) and refuses new ones.
func TestWatchDrain(t *testing.T) {
	p := startProcess(t, 1, 1, nil)
	ctx := ctxT(t)
	w := openWatch(t, p, ctx)
	w.create(&pb.WatchCreateRequest{Key: []byte("a")})
	w.created()
	p.api.Drain()
	assert.Equal(t, codes.Unavailable, status.Code(w.ended()))
	w = openWatch(t, p, ctx)
	assert.Equal(t, codes.Unavailable, status.Code(w.ended()))
}

// A stream whose client stopped reading, its sends blocked by gRPC's flow
// control, still ends when the process drains: a graceful stop does not
// wait on it, and its watchers leave the store.
func TestWatchDrainStuckStream(t *testing.T) {
	p := startProcessWith(t, 1, 1, nil, func(kc *kvservice.Config, _ *Config) { kc.Limits.MaxValueBytes = 4096 })
	ctx := ctxT(t)
	// A fixed 64 KiB window (no BDP growth), never read: the server's
	// sends block once it is full.
	conn, err := grpc.NewClient(p.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	require.NoError(t, err)
	defer conn.Close()
	// Its own context outlives the check below: the client never ends it.
	stuckCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stuck, err := pb.NewWatchClient(conn).Watch(stuckCtx)
	require.NoError(t, err)
	require.NoError(t, stuck.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{
		CreateRequest: &pb.WatchCreateRequest{Key: []byte("k"), RangeEnd: []byte("l")}}}))
	store := p.log.State.Store()
	require.Eventually(t, func() bool { return store.WatchStats().Watchers == 1 }, 10*time.Second, time.Millisecond)

	kv, value := pb.NewKVClient(p.conn), bytes.Repeat([]byte("v"), 4096)
	for i := 0; store.WatchStats().Parked == 0; i++ {
		// The stream's channel is full and a response parked: its loop
		// is blocked in a send.
		require.Less(t, i, 5000, "the stuck stream never filled its channel")
		_, err := kv.Put(ctx, &pb.PutRequest{Key: fmt.Appendf(nil, "k%d", i), Value: value})
		require.NoError(t, err)
	}
	p.api.Drain()
	require.Eventually(t, func() bool { return store.WatchStats().Streams == 0 }, 10*time.Second, time.Millisecond,
		"the stuck stream outlived the drain")
}

// sentStream records what a watchConn sends.
type sentStream struct {
	grpc.ServerStream
	sent []*pb.WatchResponse
}

func (s *sentStream) Send(r *pb.WatchResponse) error  { s.sent = append(s.sent, r); return nil }
func (s *sentStream) Recv() (*pb.WatchRequest, error) { return nil, io.EOF }

// Responses of a cancelled watcher still in the stream's channel reach
// neither the client nor a new watcher of the same ID, whatever the order
// the stream reads its channel and its requests in.
func TestWatchCancelledResponsesDropped(t *testing.T) {
	st, err := mvcc.Open(backend.NewMemory(), mvcc.Options{})
	require.NoError(t, err)
	defer st.Close()
	write := func(index uint64, k, v string) {
		tw, err := st.Write(index)
		require.NoError(t, err)
		tw.Put([]byte(k), []byte(v), 0, mvcc.PutOptions{})
		tw.End()
	}
	write(1, "a", "1") // revision 2
	write(2, "a", "2") // 3

	gs := &sentStream{}
	s := &Server{cfg: Config{ID: 1, Node: &fakeNode{}}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	c := newWatchConn(ctxT(t), s, gs, st.NewWatchStream())
	defer c.ws.Close()
	require.NoError(t, c.create(&pb.WatchCreateRequest{Key: []byte("a"), WatchId: 5, StartRevision: 2}))
	require.NoError(t, c.create(&pb.WatchCreateRequest{Key: []byte("a"), WatchId: 6, StartRevision: 2}))
	_, err = st.WatchStep() // history of 5 and 6 into the channel
	require.NoError(t, err)
	require.NoError(t, c.cancel(5))
	require.NoError(t, c.create(&pb.WatchCreateRequest{Key: []byte("a"), WatchId: 5, StartRevision: 3}))
	_, err = st.WatchStep()
	require.NoError(t, err)
	write(3, "a", "3") // 4
	for len(c.ws.Chan()) > 0 {
		require.NoError(t, c.forward(<-c.ws.Chan()))
	}
	var got []string
	for _, r := range gs.sent {
		switch {
		case r.Created:
			got = append(got, fmt.Sprintf("created %d", r.WatchId))
		case r.Canceled:
			got = append(got, fmt.Sprintf("cancelled %d", r.WatchId))
		default:
			var vs []string
			for _, e := range r.Events {
				vs = append(vs, string(e.Kv.Value))
			}
			got = append(got, fmt.Sprintf("%d: %v", r.WatchId, vs))
		}
	}
	require.Len(t, got, 8)
	slices.Sort(got[6:])
	assert.Equal(t, []string{"created 5", "created 6", "cancelled 5", "created 5",
		"6: [1 2]", "5: [2]", "5: [3]", "6: [3]"}, got)
}

// sendFragments and sendByRevision split as they say; joined, the parts
// are the response.
func TestWatchSplits(t *testing.T) {
	mk := func(revs ...int64) *pb.WatchResponse {
		r := &pb.WatchResponse{Header: &pb.ResponseHeader{Revision: 99, MemberId: 1}, WatchId: 3}
		for i, rev := range revs {
			r.Events = append(r.Events, &mvccpb.Event{Kv: &mvccpb.KeyValue{Key: fmt.Appendf(nil, "k%d", i), ModRevision: rev, Value: make([]byte, 100)}})
		}
		return r
	}
	evSize := eventSize(mk(1).Events[0])
	for _, c := range []struct {
		name     string
		resp     *pb.WatchResponse
		byRev    bool
		max      int
		sizes    []int   // events per part
		revs     []int64 // each part's header revision
		fragment []bool
	}{
		{"fragments: under the limit", mk(1, 2, 3), false, 10 << 10, []int{3}, []int64{99}, []bool{false}},
		{"fragments: one event", mk(1), false, 10, []int{1}, []int64{99}, []bool{false}},
		{"fragments: two events a part", mk(1, 1, 1, 1, 1), false, mk().Size() + 2*evSize + 3, []int{2, 2, 1}, []int64{99, 99, 99}, []bool{true, true, false}},
		{"fragments: one event a part at least", mk(1, 2, 3), false, 10, []int{1, 1, 1}, []int64{99, 99, 99}, []bool{true, true, false}},
		{"by revision: under the limit", mk(1, 2, 3), true, 10 << 10, []int{3}, []int64{99}, []bool{false}},
		{"by revision: whole revisions", mk(1, 1, 2, 2, 2, 3), true, mk().Size() + 64 + 3*evSize, []int{2, 3, 1}, []int64{1, 2, 99}, []bool{false, false, false}},
		{"by revision: a revision over the limit alone", mk(1, 2, 2, 2, 3), true, mk().Size() + 64 + 2*evSize, []int{1, 3, 1}, []int64{1, 2, 99}, []bool{false, false, false}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var parts []*pb.WatchResponse
			send := func(r *pb.WatchResponse) error { parts = append(parts, r); return nil }
			if c.byRev {
				require.NoError(t, sendByRevision(c.resp, c.max, send))
			} else {
				require.NoError(t, sendFragments(c.resp, c.max, send))
			}
			var sizes []int
			var revs []int64
			var frag []bool
			var joined []*mvccpb.Event
			for _, p := range parts {
				sizes, revs, frag = append(sizes, len(p.Events)), append(revs, p.Header.Revision), append(frag, p.Fragment)
				joined = append(joined, p.Events...)
				assert.Equal(t, int64(3), p.WatchId)
				assert.Equal(t, uint64(1), p.Header.MemberId)
			}
			assert.Equal(t, c.sizes, sizes)
			assert.Equal(t, c.revs, revs)
			assert.Equal(t, c.fragment, frag)
			assert.Equal(t, c.resp.Events, joined)
			assert.Equal(t, int64(99), c.resp.Header.Revision, "the response is left as it was")
		})
	}
}
