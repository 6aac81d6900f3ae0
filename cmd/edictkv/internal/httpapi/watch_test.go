package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/edictlog/edictlog/cmd/edictkv/internal/mvcc"
	"github.com/edictlog/edictlog/cmd/edictkv/kvjson"
	"github.com/edictlog/edictlog/edict"
)

// watchFixture is a Server with watches over the fakelog's state, served
// on a real listener so that streams stream.
type watchFixture struct {
	*fixture
	url string
}

func newWatchFixture(t testing.TB, progress time.Duration) *watchFixture {
	f := newFixture(t, func(c *Config) { c.WatchProgress = progress })
	// The fixture makes its log's state with its Server: a second Server
	// of the same config watches that state.
	cfg := f.srv.cfg
	cfg.Watch = f.log.State
	srv, err := New(cfg)
	require.NoError(t, err)
	f.srv = srv
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return &watchFixture{fixture: f, url: hs.URL}
}

// stream is one open watch: its lines as they come, checked by
// kvjson.WatchDecoder, and how it ended.
type stream struct {
	t     *testing.T
	resp  *http.Response
	lines chan kvjson.WatchLine
	end   chan error
}

func (f *watchFixture) watch(t *testing.T, target string) *stream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.url+target, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	s := &stream{t: t, resp: resp, lines: make(chan kvjson.WatchLine, 1000), end: make(chan error, 1)}
	if resp.StatusCode != http.StatusOK {
		return s
	}
	require.Equal(t, "application/x-ndjson", resp.Header.Get("Content-Type"))
	go func() {
		d := kvjson.NewWatchDecoder(resp.Body, 0)
		for {
			l, err := d.Next()
			if err != nil {
				s.end <- err
				return
			}
			s.lines <- l
		}
	}()
	return s
}

// next is the stream's next line.
func (s *stream) next() kvjson.WatchLine {
	s.t.Helper()
	select {
	case l := <-s.lines:
		return l
	case err := <-s.end:
		s.t.Fatalf("the stream ended: %v", err)
	case <-time.After(30 * time.Second):
		s.t.Fatal("no line in 30 s")
	}
	return kvjson.WatchLine{}
}

// events is the stream's next line, which must hold events.
func (s *stream) events() kvjson.WatchLine {
	s.t.Helper()
	for {
		l := s.next()
		if !l.Progress {
			require.NotEmpty(s.t, l.Events, "%+v", l)
			return l
		}
	}
}

// brief renders a line's events as "put a=1" and "delete b".
func brief(l kvjson.WatchLine) []string {
	var out []string
	for _, e := range l.Events {
		s := e.Type + " " + e.KV.Key
		if e.KV.Value != nil {
			s += "=" + *e.KV.Value
		}
		if e.Prev != nil && e.Prev.Value != nil {
			s += " (was " + *e.Prev.Value + ")"
		}
		out = append(out, s)
	}
	return out
}

func (f *watchFixture) put(t testing.TB, k, v string) uint64 {
	t.Helper()
	a := f.do(t, "PUT", "/v1/kv/"+k, v)
	require.Equal(t, 200, a.code, "%s", a.body)
	var w kvjson.WriteResponse
	require.NoError(t, json.Unmarshal(a.body, &w))
	return w.Index
}

// A watch sends every change of the watched keys, a revision a line,
// from the revision asked on, history then live; with the stamp a read
// gives; with prev_kv the key as each change found it; deletes as etcd's
// tombstones.
func TestWatchStream(t *testing.T) {
	f := newWatchFixture(t, time.Hour)
	ctx := context.Background()
	r2 := f.put(t, "a", "1")
	require.Equal(t, uint64(2), r2, "a fresh state's first write")
	f.put(t, "b", "1")  // 3
	f.put(t, "a", "2")  // 4
	f.put(t, "p/1", "") // 5

	// From now: the first line says where it starts.
	now := f.watch(t, "/v1/watch/a?prev_kv")
	first := now.next()
	assert.Equal(t, kvjson.WatchLine{Revision: 5, Progress: true}, first)
	assert.Equal(t, "5", now.resp.Header.Get(kvjson.HeaderIndex))
	assert.Equal(t, "1", now.resp.Header.Get(kvjson.HeaderServedBy))

	// From the past: history, then live.
	past := f.watch(t, "/v1/watch/a?from=2&prev_kv=true")
	l := past.events()
	assert.Equal(t, uint64(2), l.Revision)
	assert.Equal(t, []string{"put a=1"}, brief(l))
	assert.Nil(t, l.Events[0].Prev, "a did not exist before")
	l = past.events()
	assert.Equal(t, uint64(4), l.Revision)
	assert.Equal(t, []string{"put a=2 (was 1)"}, brief(l))
	get := f.do(t, "GET", "/v1/kv/a", "")
	require.Equal(t, 200, get.code)
	assert.Equal(t, get.header.Get(kvjson.HeaderStamp), l.Events[0].KV.Stamp.Token, "the stamp a read gives")
	assert.Equal(t, kvjson.KVJSON{Key: "a", Value: strp("2"), CreateIndex: 2, ModIndex: 4, Version: 2, Stamp: l.Events[0].KV.Stamp}, l.Events[0].KV)
	assert.NotEmpty(t, l.Events[0].Prev.Stamp.Token)

	// A transaction's changes come in one line; a delete is a tombstone.
	_, _, err := f.srv.cfg.KV.Txn(ctx, &pb.TxnRequest{Success: []*pb.RequestOp{
		{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("a"), Value: []byte("3")}}},
		{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("b"), Value: []byte("2")}}},
	}}) // 6
	require.NoError(t, err)
	_, _, err = f.srv.cfg.KV.DeleteRange(ctx, &pb.DeleteRangeRequest{Key: []byte("a"), RangeEnd: []byte("c")}) // 7
	require.NoError(t, err)
	for _, s := range []*stream{now, past} {
		l := s.events()
		assert.Equal(t, uint64(6), l.Revision)
		assert.Equal(t, []string{"put a=3 (was 2)"}, brief(l))
		l = s.events()
		assert.Equal(t, uint64(7), l.Revision)
		assert.Equal(t, []string{"delete a (was 3)"}, brief(l))
		assert.Equal(t, kvjson.KVJSON{Key: "a", ModIndex: 7, Stamp: l.Events[0].KV.Stamp}, l.Events[0].KV, "a tombstone")
		assert.NotEmpty(t, l.Events[0].KV.Stamp.Token, "the deletion's stamp")
	}

	// Prefixes and every key; a range's transaction in one line.
	all := f.watch(t, "/v1/watch/?prefix&from=5")
	pre := f.watch(t, "/v1/watch/p%2F?prefix=1&from=2")
	l = pre.events()
	assert.Equal(t, []string{"put p/1="}, brief(l))
	assert.Equal(t, uint64(5), l.Revision)
	f.put(t, "p/2", "x") // 8
	f.put(t, "q", "x")   // 9
	assert.Equal(t, []string{"put p/2=x"}, brief(pre.events()))
	for _, want := range []struct {
		rev    uint64
		events []string
	}{{5, []string{"put p/1="}}, {6, []string{"put a=3", "put b=2"}}, {7, []string{"delete a", "delete b"}}, {8, []string{"put p/2=x"}}, {9, []string{"put q=x"}}} {
		l := all.events()
		assert.Equal(t, want.rev, l.Revision)
		assert.Equal(t, want.events, brief(l))
	}

	// HEAD: the answer's headers, no stream.
	req, _ := http.NewRequest(http.MethodHead, f.url+"/v1/watch/a", nil)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode)
	assert.Equal(t, "9", resp.Header.Get(kvjson.HeaderIndex))
}

func strp(s string) *string { return &s }

// A client that resumes from the last revision it saw + 1 gets every
// change once: none missed, none repeated, however the stream broke.
func TestWatchResume(t *testing.T) {
	f := newWatchFixture(t, time.Hour)
	var want []string
	for i := range 40 {
		k := fmt.Sprintf("k/%d", i%7)
		rev := f.put(t, k, fmt.Sprint(i))
		want = append(want, fmt.Sprintf("%d put %s=%d", rev, k, i))
	}
	var got []string
	from := uint64(1)
	for n := 1; len(got) < len(want); n++ {
		// Read n lines, then break the connection.
		s := f.watch(t, fmt.Sprintf("/v1/watch/k%%2F?prefix&from=%d", from))
		for range n {
			if len(got) == len(want) {
				break
			}
			l := s.events()
			for _, e := range brief(l) {
				got = append(got, fmt.Sprintf("%d %s", l.Revision, e))
			}
			from = l.Revision + 1
		}
		s.resp.Body.Close()
	}
	assert.Equal(t, want, got)
}

// A watch from a compacted revision is refused with the compaction
// revision; from the compaction revision on it is served. A future
// revision waits for it.
func TestWatchCompactedAndFuture(t *testing.T) {
	f := newWatchFixture(t, time.Hour)
	for _, v := range []string{"1", "2", "3"} {
		f.put(t, "a", v) // 2 to 4
	}
	_, err := f.srv.cfg.KV.Compact(context.Background(), &pb.CompactionRequest{Revision: 3, Physical: true})
	require.NoError(t, err)
	s := f.watch(t, "/v1/watch/a?from=2")
	require.Equal(t, http.StatusGone, s.resp.StatusCode)
	var e kvjson.ErrorJSON
	body, _ := io.ReadAll(s.resp.Body)
	require.NoError(t, json.Unmarshal(body, &e), "%s", body)
	assert.Equal(t, kvjson.CodeCompacted, e.Code)
	assert.Equal(t, uint64(3), e.CompactRevision)
	assert.Equal(t, uint64(4), e.Index)
	assert.Contains(t, e.Error, "oldest revision kept is 3")

	l := f.watch(t, "/v1/watch/a?from=3").events()
	assert.Equal(t, uint64(3), l.Revision, "the compaction revision's changes are kept")

	future := f.watch(t, "/v1/watch/a?from=6")
	f.put(t, "a", "4") // 5
	f.put(t, "a", "5") // 6
	l = future.events()
	assert.Equal(t, uint64(6), l.Revision)
	assert.Equal(t, []string{"put a=5"}, brief(l))
}

// An idle stream gets progress lines at the state's revision.
func TestWatchProgress(t *testing.T) {
	f := newWatchFixture(t, 5*time.Millisecond)
	f.put(t, "a", "1") // 2
	s := f.watch(t, "/v1/watch/b?from=2")
	f.put(t, "c", "1") // 3
	for {
		l := s.next()
		require.True(t, l.Progress, "%+v", l)
		if l.Revision == 3 {
			break
		}
	}
}

// Drain ends every stream with a line that says where to resume, and
// refuses new ones.
func TestWatchDrain(t *testing.T) {
	f := newWatchFixture(t, time.Hour)
	f.put(t, "a", "1") // 2
	s := f.watch(t, "/v1/watch/a?from=2")
	assert.Equal(t, uint64(2), s.events().Revision)
	f.srv.Drain()
	l := s.next()
	require.NotNil(t, l.Error)
	assert.Equal(t, kvjson.CodeShuttingDown, l.Error.Code)
	assert.Equal(t, uint64(2), l.Revision)
	assert.Contains(t, l.Error.Error, "from revision 3")
	require.ErrorIs(t, <-s.end, kvjson.ErrWatchEnded)
	again := f.watch(t, "/v1/watch/a")
	assert.Equal(t, http.StatusServiceUnavailable, again.resp.StatusCode)
}

// Bad requests are refused before anything is watched.
func TestWatchBadRequests(t *testing.T) {
	f := newWatchFixture(t, time.Hour)
	for _, c := range []struct {
		method, target string
		code           int
		errCode        string
	}{
		{"GET", "/v1/watch/a?form=2", 400, kvjson.CodeUnknownParameter},
		{"GET", "/v1/watch/a?from=0", 400, kvjson.CodeBadParameter},
		{"GET", "/v1/watch/a?from=x", 400, kvjson.CodeBadParameter},
		{"GET", "/v1/watch/a?from=-3", 400, kvjson.CodeBadParameter},
		{"GET", "/v1/watch/a?from=2&from=3", 400, kvjson.CodeBadParameter},
		{"GET", "/v1/watch/a?prefix=maybe", 400, kvjson.CodeBadParameter},
		{"GET", "/v1/watch/a?prev_kv=2", 400, kvjson.CodeBadParameter},
		{"GET", "/v1/watch/", 400, kvjson.CodeInvalidKey},
		{"GET", "/v1/watch", 400, kvjson.CodeInvalidKey},
		{"GET", "/v1/watch/a%01", 400, kvjson.CodeInvalidKey},
		{"GET", "/v1/watch/0123456789abcdefX", 414, kvjson.CodeKeyTooLarge},
		{"POST", "/v1/watch/a", 405, kvjson.CodeMethod},
	} {
		a := f.do(t, c.method, c.target, "")
		assert.Equal(t, c.code, a.code, "%s %s: %s", c.method, c.target, a.body)
		assert.Equal(t, c.errCode, a.errorBody(t).Code, "%s %s", c.method, c.target)
	}
	// Without a Watchable there is no watch endpoint.
	plain := newFixture(t)
	assert.Equal(t, 404, plain.do(t, "GET", "/v1/watch/a", "").code)
}

// The writer's lines for each kind of response of the store's watcher,
// a compaction's cancel and a failed stamp lookup included.
func TestWatchWriter(t *testing.T) {
	rec := httptest.NewRecorder()
	stamp := edict.Stamp{Epoch: 1, Counter: 4, QT: edict.QT{{Process: 1, T: edict.Time{Incarnation: 1, Nanos: 9}}}}
	var asked []int64
	sw := &watchWriter{w: rec, rc: http.NewResponseController(rec), sent: 4, stamps: func(revs []int64) (map[int64]edict.Stamp, error) {
		asked = append(asked, revs...)
		return map[int64]edict.Stamp{6: stamp}, nil
	}}
	kv := func(k string, create, mod, ver int64) *mvccpb.KeyValue {
		return &mvccpb.KeyValue{Key: []byte(k), Value: []byte("v"), CreateRevision: create, ModRevision: mod, Version: ver}
	}
	require.NoError(t, sw.response(mvcc.WatchResponse{Revision: 7, Events: []mvccpb.Event{
		{Type: mvccpb.PUT, Kv: kv("a", 5, 5, 1)},
		{Type: mvccpb.PUT, Kv: kv("b", 6, 6, 1)},
		{Type: mvccpb.DELETE, Kv: &mvccpb.KeyValue{Key: []byte("a"), ModRevision: 6}, PrevKv: kv("a", 5, 5, 1)},
	}}))
	assert.Equal(t, []int64{5, 6, 6, 5}, asked)
	require.NoError(t, sw.response(mvcc.WatchResponse{Revision: 9}))
	require.NoError(t, sw.response(mvcc.WatchResponse{Revision: 8})) // behind what was said: nothing
	require.NoError(t, sw.response(mvcc.WatchResponse{CompactRevision: 12}))
	d := kvjson.NewWatchDecoder(rec.Body, 0)
	var lines []kvjson.WatchLine
	for {
		l, err := d.Next()
		if err != nil {
			require.ErrorIs(t, err, kvjson.ErrWatchEnded, "the compaction's line is the last")
			break
		}
		lines = append(lines, l)
	}
	require.Len(t, lines, 4)
	assert.Equal(t, []string{"put a=v"}, brief(lines[0]))
	assert.Equal(t, uint64(5), lines[0].Revision)
	assert.Equal(t, []string{"put b=v", "delete a (was v)"}, brief(lines[1]))
	assert.Equal(t, stampToken(stamp), lines[1].Events[0].KV.Stamp.Token)
	assert.Equal(t, kvjson.WatchLine{Revision: 9, Progress: true}, lines[2])
	require.NotNil(t, lines[3].Error)
	assert.Equal(t, uint64(9), lines[3].Revision)
	assert.Equal(t, kvjson.CodeCompacted, lines[3].Error.Code)
	assert.Equal(t, uint64(12), lines[3].Error.CompactRevision)
	assert.Contains(t, lines[3].Error.Error, "revision 10")

	failing := &watchWriter{w: rec, rc: http.NewResponseController(rec), stamps: func([]int64) (map[int64]edict.Stamp, error) {
		return nil, errors.New("corrupt")
	}}
	assert.ErrorContains(t, failing.response(mvcc.WatchResponse{Revision: 3, Events: []mvccpb.Event{{Type: mvccpb.PUT, Kv: kv("a", 3, 3, 1)}}}), "corrupt")
}

// prefixEnd is etcd's GetPrefixRangeEnd.
func TestPrefixEnd(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"a", "b"}, {"a/", "a0"}, {"a\xff", "b"}, {"a\xff\xff", "b"}, {"\xff", "\x00"}, {"\xff\xff", "\x00"},
	} {
		assert.Equal(t, []byte(c.want), prefixEnd([]byte(c.in)), "%q", c.in)
	}
}

// FuzzWatch drives GET /v1/watch/<key> with any key and query: a 4xx is
// a kvjson.ErrorJSON with a code, a 200 a stream whose every line passes
// kvjson.WatchDecoder, and no answer changes the state.
func FuzzWatch(f *testing.F) {
	for _, s := range []struct{ key, query string }{
		{"a", ""}, {"a", "from=2&prev_kv"}, {"", "prefix"}, {"p%2F", "prefix=1&from=3"}, {"a", "from=99"},
		{"a", "form=2"}, {"a", "from=0"}, {"a", "from=-3"}, {"a", "from=2&from=3"}, {"a", "prefix=maybe"},
		{"", ""}, {"a%01", ""}, {"%zz", ""}, {"0123456789abcdefX", ""}, {"a", "%zz"},
	} {
		f.Add(s.key, s.query)
	}
	fx := newWatchFixture(f, time.Millisecond)
	for i, k := range []string{"a", "p/1", "a", "b"} {
		fx.put(f, k, fmt.Sprint(i)) // revisions 2 to 5
	}
	_, err := fx.srv.cfg.KV.Compact(context.Background(), &pb.CompactionRequest{Revision: 3})
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, key, query string) {
		target := "/v1/watch/" + key
		if query != "" {
			target += "?" + query
		}
		req, err := http.NewRequest(http.MethodGet, "http://fuzz"+target, nil)
		if err != nil {
			return // not a request net/http would serve
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		rec := httptest.NewRecorder()
		fx.srv.ServeHTTP(rec, req.WithContext(ctx))
		switch {
		case rec.Code == http.StatusOK:
			require.Equal(t, "application/x-ndjson", rec.Header().Get("Content-Type"), "%s", target)
			d := kvjson.NewWatchDecoder(rec.Body, 0)
			for {
				if _, err := d.Next(); err != nil {
					require.ErrorIs(t, err, io.EOF, "%s: %s", target, rec.Body.Bytes())
					break
				}
			}
		case rec.Code == http.StatusTemporaryRedirect || rec.Code == http.StatusMovedPermanently:
			// ServeMux's redirect of an unclean path (/v1/watch/./a).
		case rec.Code >= 400 && rec.Code < 500:
			var e kvjson.ErrorJSON
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &e), "%s", target)
			require.NotEmpty(t, e.Code, "%s", target)
			require.NotEmpty(t, e.Error, "%s", target)
		default:
			t.Fatalf("%s: status %d: %s", target, rec.Code, rec.Body.Bytes())
		}
		require.Equal(t, int64(5), fx.log.State.Rev(), "a watch writes nothing")
	})
}
