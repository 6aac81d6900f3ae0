package workload

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/edictlog/edictlog/cmd/edictkv/kvjson"
	"github.com/edictlog/edictlog/jepsen/history"
)

// WatchPrefix holds the watch workload's keys: WatchPrefix + "0", "1", ...
const WatchPrefix = "w/"

// The watchers' APIs (history.WatchInfo.API).
const (
	WatchGRPC = "grpc" // etcd's Watch through clientv3, one endpoint a client
	WatchHTTP = "http" // GET /v1/watch/<key>, newline-delimited JSON
)

// Watch is the watch workload. Writers (Clients of them, each bound to one
// member as in the other workloads) put unique values to Keys keys under
// WatchPrefix and sometimes delete one; every acknowledged write is
// recorded with the revision its answer names. Watchers, two on every
// member at the start (one through etcd's gRPC Watch, one through the HTTP
// watch stream; most of the prefix, some of one key), record every event
// their streams deliver, from revision 1 on. When a stream breaks (its
// member killed, cut off from the leader, paused, shutting down, or silent
// for IdleTimeout) the watcher records why and watches again, through the
// next member or the same, from the revision after the last it was told
// of: the resumption every etcd client makes, and the one edictkv promises
// misses and repeats nothing.
//
// Final, after the last fault is healed, reads every key (a linearizable
// range), replays the whole history through every member (a watch from
// revision 1 up to that read's revision: the committed history the
// checker judges the watchers by), then lets every watcher catch up with
// it and stops them.
type Watch struct {
	Config
	// Keys is how many keys the writers change (default 8).
	Keys int
	// Pause is how long a writer waits between its operations, at random
	// up to twice it (default 40ms): every watcher of the prefix records
	// every change, and the final replays every change again per member,
	// so the writes' rate sets the history's size (10 writers: about 200
	// writes a second).
	Pause time.Duration
	// GRPCTargets are the members' etcd API addresses.
	GRPCTargets func() []GRPCTarget
	// IdleTimeout: a stream that delivers nothing for this long (no event,
	// no progress notification) is given up (default 4s). A gRPC watcher
	// asks for a progress notification every ProgressEvery (default 1s),
	// so a live stream is never that silent; an HTTP stream gets a
	// progress line only after 10 s without events, so one on a member
	// that applies nothing moves on.
	IdleTimeout   time.Duration
	ProgressEvery time.Duration
	// DrainTimeout bounds how long Final waits for the watchers to catch
	// up with the replayed history (default 30s).
	DrainTimeout time.Duration
	// SkipOnReconnect is the checker's negative control: each watcher
	// leaves out of its record the first event delivered after its first
	// reconnect, as a client that resumed one revision late would miss
	// it. A run with it must be found invalid.
	SkipOnReconnect bool

	http     *http.Client
	stop     context.CancelFunc
	wg       sync.WaitGroup
	watchers []*watcher
	skipped  atomic.Int64
	started  bool
}

// watcher is one watcher's state.
type watcher struct {
	id     int
	api    string
	key    string
	prefix bool
	home   int // the index of the member it starts on
	// next is the revision after the last it was told of (an event or a
	// progress notification): where it resumes.
	next atomic.Int64
	// done: a compaction ended it (it watches no more).
	done       atomic.Bool
	sessions   int
	reconnects atomic.Int64
	skipped    bool
}

func (w *Watch) watchDefaults() {
	w.defaults()
	if w.Keys <= 0 {
		w.Keys = 8
	}
	if w.Pause <= 0 {
		w.Pause = 40 * time.Millisecond
	}
	if w.IdleTimeout <= 0 {
		w.IdleTimeout = 4 * time.Second
	}
	if w.ProgressEvery <= 0 {
		w.ProgressEvery = time.Second
	}
	if w.DrainTimeout <= 0 {
		w.DrainTimeout = 30 * time.Second
	}
	if w.http == nil {
		// No overall timeout: a stream lasts as long as its context.
		w.http = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8, DisableCompression: true,
			ResponseHeaderTimeout: 5 * time.Second}}
	}
}

func (w *Watch) keyName(k int) string { return WatchPrefix + strconv.Itoa(k) }

// Run starts the watchers, then runs the writers until ctx ends. The
// watchers go on after Run returns, until Final or Stop.
func (w *Watch) Run(ctx context.Context, rec *history.Recorder) {
	w.watchDefaults()
	w.startWatchers(ctx, rec)
	a := newAPI(w.Timeout)
	var next atomic.Int64 // unique values
	var wg sync.WaitGroup
	for c := range w.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(w.Seed, uint64(c)))
			process := c
			for ctx.Err() == nil {
				t, ok := bound(c, w.Targets())
				if !ok {
					sleep(ctx, 50*time.Millisecond)
					continue
				}
				key := w.keyName(rng.IntN(w.Keys))
				op := history.Op{Process: process, Type: history.Invoke, Key: key, Node: t.ID}
				var out outcome
				var rev int64
				if rng.Float64() < 0.8 {
					op.F, op.Value = history.FWrite, history.Int(next.Add(1))
					rec.Add(op)
					out, rev = a.change(context.WithoutCancel(ctx), http.MethodPut, t.Addr, key, strconv.FormatInt(*op.Value, 10))
				} else {
					op.F = history.FDelete
					rec.Add(op)
					out, rev = a.change(context.WithoutCancel(ctx), http.MethodDelete, t.Addr, key, "")
				}
				op.Type, op.Error = out.typ, out.err
				if out.typ == history.OK {
					op.Revision = rev
				}
				rec.Add(op)
				if out.typ == history.Info {
					process += w.Clients // the unknown operation may still be in flight
				}
				if out.unreachable {
					sleep(ctx, unreachablePause)
				}
				sleep(ctx, time.Duration(rng.Int64N(int64(2*w.Pause)+1)))
			}
		}()
	}
	wg.Wait()
}

// change puts body at key or deletes it, and returns the outcome and, when
// OK, the revision the answer names (the put's mod_revision, the
// deletion's revision).
func (a *api) change(ctx context.Context, method, addr, key, body string) (outcome, int64) {
	code, b, err := a.do(ctx, method, addr, kvPath(key), nil, body)
	out := writeOutcome(code, b, err)
	if out.typ != history.OK {
		return out, 0
	}
	var wr kvjson.WriteResponse
	if err := json.Unmarshal(b, &wr); err != nil || wr.Index == 0 {
		// Applied, by the status; the revision is what is unknown.
		out.err = fmt.Sprintf("answer without a revision %q: %v", b, err)
		return out, 0
	}
	return out, int64(wr.Index)
}

// startWatchers starts two watchers on every member: watcher i (from 0)
// on member i mod n, through gRPC for the first n and HTTP for the
// others; every third watches one key, the others the whole prefix.
func (w *Watch) startWatchers(ctx context.Context, rec *history.Recorder) {
	if w.started {
		return
	}
	w.started = true
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w.stop = cancel
	n := len(w.GRPCTargets())
	for i := range 2 * n {
		wt := &watcher{id: i + 1, api: WatchGRPC, key: WatchPrefix, prefix: true, home: i % n}
		if i >= n {
			wt.api = WatchHTTP
		}
		if i%3 == 2 {
			wt.key, wt.prefix = w.keyName(i%w.Keys), false
		}
		wt.next.Store(1)
		w.watchers = append(w.watchers, wt)
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			w.watchLoop(wctx, rec, wt)
		}()
	}
}

// watchLoop keeps wt watching until ctx ends or a compaction ends it.
func (w *Watch) watchLoop(ctx context.Context, rec *history.Recorder, wt *watcher) {
	rng := rand.New(rand.NewPCG(w.Seed, uint64(1000+wt.id)))
	member, why := wt.home, "start"
	for ctx.Err() == nil && !wt.done.Load() {
		var id int
		var ended string
		var compacted int64
		if wt.api == WatchGRPC {
			ts := w.GRPCTargets()
			if len(ts) == 0 {
				sleep(ctx, 50*time.Millisecond)
				continue
			}
			t := ts[member%len(ts)]
			id = t.ID
			w.open(rec, wt, id, why)
			ended, compacted = w.grpcSession(ctx, rec, wt, t)
		} else {
			ts := w.Targets()
			if len(ts) == 0 {
				sleep(ctx, 50*time.Millisecond)
				continue
			}
			t := ts[member%len(ts)]
			id = t.ID
			w.open(rec, wt, id, why)
			ended, compacted = w.httpSession(ctx, rec, wt, t)
		}
		end := history.Op{Process: history.WatchProcess, Type: history.Info, F: history.FWatchEnd, Node: id,
			Revision: wt.next.Load() - 1, Error: ended, Watch: wt.info()}
		if ctx.Err() != nil {
			end.Error = "stopped: the test is over"
		}
		if compacted != 0 {
			end.Watch.CompactRevision = compacted
			wt.done.Store(true)
		}
		rec.Add(end)
		why = ended
		// Usually to the next member; now and then the same again.
		if rng.IntN(4) != 0 {
			member++
		}
		sleep(ctx, reconnectPause)
	}
}

func (wt *watcher) info() *history.WatchInfo {
	return &history.WatchInfo{Watcher: wt.id, API: wt.api, Key: wt.key, Prefix: wt.prefix}
}

// open records that wt (re)connects to member id from wt.next.
func (w *Watch) open(rec *history.Recorder, wt *watcher, id int, why string) {
	wt.sessions++
	if wt.sessions > 1 {
		wt.reconnects.Add(1)
	}
	rec.Add(history.Op{Process: history.WatchProcess, Type: history.Info, F: history.FWatchOpen, Node: id,
		Revision: wt.next.Load(), Detail: why, Watch: wt.info()})
}

// event records one delivered event (unless the negative control drops
// it) and moves wt.next past it.
func (w *Watch) event(rec *history.Recorder, wt *watcher, member int, key string, rev int64, put bool, value []byte, create, version int64) {
	wt.next.Store(max(wt.next.Load(), rev+1))
	if w.SkipOnReconnect && wt.sessions > 1 && !wt.skipped {
		wt.skipped = true
		w.skipped.Add(1)
		return
	}
	rec.Add(eventOp(wt.info(), member, key, rev, put, value, create, version))
}

func eventOp(info *history.WatchInfo, member int, key string, rev int64, put bool, value []byte, create, version int64) history.Op {
	op := history.Op{Process: history.WatchProcess, Type: history.Info, F: history.FWatchEvent, Node: member,
		Key: key, Revision: rev, Watch: info}
	op.Watch.Event, op.Watch.CreateRevision, op.Watch.Version = kvjson.EventDelete, create, version
	if put {
		op.Watch.Event = kvjson.EventPut
		if v, err := strconv.ParseInt(string(value), 10, 64); err == nil {
			op.Value = &v
		} else {
			op.Detail = fmt.Sprintf("value %q", value)
		}
	}
	return op
}

// progress records that member said every change up to rev was sent, if
// that says more than wt knew.
func (w *Watch) progress(rec *history.Recorder, wt *watcher, member int, rev int64) {
	if rev < wt.next.Load() {
		return
	}
	wt.next.Store(rev + 1)
	rec.Add(history.Op{Process: history.WatchProcess, Type: history.Info, F: history.FWatchProgress, Node: member,
		Revision: rev, Watch: wt.info()})
}

// grpcSession watches through clientv3 with t as its one endpoint until
// the stream breaks, and says why; compacted is the compaction revision
// if a compaction cancelled it.
func (w *Watch) grpcSession(ctx context.Context, rec *history.Recorder, wt *watcher, t GRPCTarget) (why string, compacted int64) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{t.Addr}, DialTimeout: 2 * time.Second,
		DialKeepAliveTime: 2 * time.Second, DialKeepAliveTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return fmt.Sprintf("connect: %v", err), 0
	}
	defer cli.Close()
	// A member that knows no leader ends the stream, so that a watcher on
	// a member cut off from the others moves on (as Kubernetes' watches).
	wctx := clientv3.WithRequireLeader(sctx)
	opts := []clientv3.OpOption{clientv3.WithRev(wt.next.Load())}
	if wt.prefix {
		opts = append(opts, clientv3.WithPrefix())
	}
	wch := cli.Watch(wctx, wt.key, opts...)
	go func() {
		tick := time.NewTicker(w.ProgressEvery)
		defer tick.Stop()
		for {
			select {
			case <-sctx.Done():
				return
			case <-tick.C:
				rctx, rcancel := context.WithTimeout(wctx, w.ProgressEvery)
				_ = cli.RequestProgress(rctx) // unanswered: the idle timeout notices
				rcancel()
			}
		}
	}()
	idle := time.NewTimer(w.IdleTimeout)
	defer idle.Stop()
	for {
		select {
		case <-ctx.Done():
			return "stopped", 0
		case <-idle.C:
			return fmt.Sprintf("nothing for %v", w.IdleTimeout), 0
		case wr, ok := <-wch:
			if !ok {
				return "the watch channel closed", 0
			}
			idle.Reset(w.IdleTimeout)
			if wr.CompactRevision != 0 {
				return fmt.Sprintf("compacted: %v", wr.Err()), wr.CompactRevision
			}
			if err := wr.Err(); err != nil {
				return err.Error(), 0
			}
			if wr.IsProgressNotify() {
				w.progress(rec, wt, t.ID, wr.Header.Revision)
				continue
			}
			for _, e := range wr.Events {
				w.event(rec, wt, t.ID, string(e.Kv.Key), e.Kv.ModRevision, e.Type == clientv3.EventTypePut,
					e.Kv.Value, e.Kv.CreateRevision, e.Kv.Version)
			}
		}
	}
}

// httpSession watches through t's GET /v1/watch until the stream breaks.
func (w *Watch) httpSession(ctx context.Context, rec *history.Recorder, wt *watcher, t Target) (why string, compacted int64) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	q := url.Values{"from": {strconv.FormatInt(wt.next.Load(), 10)}}
	if wt.prefix {
		q.Set("prefix", "true")
	}
	u := "http://" + t.Addr + "/v1/watch/" + url.PathEscape(wt.key) + "?" + q.Encode()
	req, err := http.NewRequestWithContext(sctx, http.MethodGet, u, nil)
	if err != nil {
		return err.Error(), 0
	}
	resp, err := w.http.Do(req)
	if err != nil {
		return fmt.Sprintf("connect: %v", err), 0
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		var e kvjson.ErrorJSON
		if json.Unmarshal(b, &e) == nil && e.Code == kvjson.CodeCompacted {
			return errorText(resp.StatusCode, b), int64(e.CompactRevision)
		}
		return errorText(resp.StatusCode, b), 0
	}
	type result struct {
		line kvjson.WatchLine
		err  error
	}
	lines := make(chan result)
	go func() {
		// Each line is decoded alone, not through WatchDecoder, whose
		// order checks would hide a repeated or reordered revision from
		// the record: judging the order is the checker's work.
		br := bufio.NewReaderSize(resp.Body, 64<<10)
		for {
			b, err := readLine(br, kvjson.MaxWatchLineBytes)
			var r result
			if err == nil {
				r.line, r.err = kvjson.DecodeWatchLine(b)
				if r.err != nil {
					r.err = fmt.Errorf("%w: %w", errMalformedLine, r.err)
				}
			} else {
				r.err = err
			}
			select {
			case lines <- r:
			case <-sctx.Done():
				return
			}
			if r.err != nil {
				return
			}
		}
	}()
	idle := time.NewTimer(w.IdleTimeout)
	defer idle.Stop()
	for {
		select {
		case <-ctx.Done():
			return "stopped", 0
		case <-idle.C:
			return fmt.Sprintf("nothing for %v", w.IdleTimeout), 0
		case r := <-lines:
			switch {
			case errors.Is(r.err, io.EOF):
				return "the stream ended", 0
			case r.err != nil:
				return r.err.Error(), 0
			}
			idle.Reset(w.IdleTimeout)
			l := r.line
			switch {
			case l.Error != nil && l.Error.Code == kvjson.CodeCompacted:
				return fmt.Sprintf("compacted: %s", l.Error.Error), int64(l.Error.CompactRevision)
			case l.Error != nil:
				return fmt.Sprintf("%s: %s", l.Error.Code, l.Error.Error), 0
			case l.Progress:
				w.progress(rec, wt, t.ID, int64(l.Revision))
			default:
				for _, e := range l.Events {
					value := []byte(nil)
					if e.KV.Value != nil {
						value = []byte(*e.KV.Value)
					} else if e.KV.ValueBase64 != "" {
						value = []byte(e.KV.ValueBase64)
					}
					w.event(rec, wt, t.ID, e.KV.Key, int64(e.KV.ModIndex), e.Type == kvjson.EventPut, value,
						int64(e.KV.CreateIndex), int64(e.KV.Version))
				}
			}
		}
	}
}

// errMalformedLine marks a line that is not one of the three kinds
// kvjson describes.
var errMalformedLine = errors.New(history.WatchMalformed)

// readLine reads one line of at most max bytes; io.ErrUnexpectedEOF for a
// last line cut short.
func readLine(br *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(line)+len(chunk) > max {
			return nil, fmt.Errorf("a watch line over %d bytes", max)
		}
		line = append(line, chunk...)
		switch {
		case err == nil:
			return line, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(line) > 0:
			return nil, io.ErrUnexpectedEOF
		}
		return nil, err
	}
}

// WatchStats is what the watchers did, for the run's summary.
type WatchStats struct {
	Watchers   int
	Reconnects int64
	// Skipped counts the events the negative control left out.
	Skipped int64
}

// Stats says what the watchers did so far.
func (w *Watch) Stats() WatchStats {
	s := WatchStats{Watchers: len(w.watchers), Skipped: w.skipped.Load()}
	for _, wt := range w.watchers {
		s.Reconnects += wt.reconnects.Load()
	}
	return s
}

// Stop stops the watchers and waits for them (Final does; Stop is for a
// test that ends otherwise).
func (w *Watch) Stop() {
	if w.stop != nil {
		w.stop()
	}
	w.wg.Wait()
}

// Final reads every key through a member's etcd API (a linearizable
// range, recorded as a final read of each key by process), replays the
// history up to that read's revision through every member (recorded as
// replay watchers' events), waits up to DrainTimeout for every watcher to
// have been told of every change of its keys up to there, and stops them.
func (w *Watch) Final(ctx context.Context, rec *history.Recorder, process int) error {
	w.watchDefaults()
	defer w.Stop()
	header, err := w.finalRead(ctx, rec, process)
	if err != nil {
		return err
	}
	last := map[string]int64{} // key → its last change, from the replays
	for _, t := range w.GRPCTargets() {
		for k, rev := range w.replay(ctx, rec, t, header) {
			last[k] = max(last[k], rev)
		}
	}
	deadline := time.Now().Add(w.DrainTimeout)
	for _, wt := range w.watchers {
		var target int64
		for k, rev := range last {
			if WatchedBy(wt.key, wt.prefix, k) {
				target = max(target, rev)
			}
		}
		for wt.next.Load() <= target && !wt.done.Load() && time.Now().Before(deadline) && ctx.Err() == nil {
			sleep(ctx, 50*time.Millisecond)
		}
	}
	return nil
}

// finalRead reads every key with a linearizable range through the first
// member that answers, records each key's value and mod_revision, and
// returns the range's revision.
func (w *Watch) finalRead(ctx context.Context, rec *history.Recorder, process int) (int64, error) {
	var errs []error
	for ctx.Err() == nil {
		for _, t := range w.GRPCTargets() {
			resp, err := getPrefix(ctx, t.Addr)
			if err != nil {
				errs = append(errs, fmt.Errorf("member %d: %w", t.ID, err))
				continue
			}
			held := map[string]int{}
			for i, kv := range resp.Kvs {
				held[string(kv.Key)] = i
			}
			for k := range w.Keys {
				key := w.keyName(k)
				op := history.Op{Process: process, Type: history.Invoke, F: history.FFinalRead, Key: key, Node: t.ID, Level: "linearizable"}
				rec.Add(op)
				op.Type, op.Watch = history.OK, &history.WatchInfo{Header: resp.Header.Revision}
				if i, ok := held[key]; ok {
					kv := resp.Kvs[i]
					op.Revision = kv.ModRevision
					op.Watch.CreateRevision, op.Watch.Version = kv.CreateRevision, kv.Version
					if v, err := strconv.ParseInt(string(kv.Value), 10, 64); err == nil {
						op.Value = &v
					} else {
						op.Detail = fmt.Sprintf("value %q", kv.Value)
					}
				}
				rec.Add(op)
			}
			return resp.Header.Revision, nil
		}
		sleep(ctx, 500*time.Millisecond)
	}
	return 0, fmt.Errorf("workload: watch: no member answered the final read: %w", errors.Join(errs...))
}

func getPrefix(ctx context.Context, addr string) (*clientv3.GetResponse, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return cli.Get(rctx, WatchPrefix, clientv3.WithPrefix())
}

// replayTimeout bounds one member's replay of the whole history.
const replayTimeout = 60 * time.Second

// replay watches the prefix through t from revision 1 until t says it has
// sent every change up to upTo, recording each event as replay watcher
// t.ID's, and returns each key's last change.
func (w *Watch) replay(ctx context.Context, rec *history.Recorder, t GRPCTarget, upTo int64) map[string]int64 {
	info := func() *history.WatchInfo {
		return &history.WatchInfo{Watcher: t.ID, Replay: true, API: WatchGRPC, Key: WatchPrefix, Prefix: true}
	}
	rec.Add(history.Op{Process: history.WatchProcess, Type: history.Info, F: history.FWatchOpen, Node: t.ID,
		Revision: 1, Detail: fmt.Sprintf("replay up to revision %d", upTo), Watch: info()})
	last := map[string]int64{}
	var covered int64
	why, compacted := func() (string, int64) {
		rctx, cancel := context.WithTimeout(ctx, replayTimeout)
		defer cancel()
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{t.Addr}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			return fmt.Sprintf("connect: %v", err), 0
		}
		defer cli.Close()
		wch := cli.Watch(rctx, WatchPrefix, clientv3.WithPrefix(), clientv3.WithRev(1))
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for covered < upTo {
			select {
			case <-rctx.Done():
				return fmt.Sprintf("replayed up to revision %d of %d within %v", covered, upTo, replayTimeout), 0
			case <-tick.C:
				_ = cli.RequestProgress(rctx)
			case wr, ok := <-wch:
				switch {
				case !ok:
					return "the watch channel closed", 0
				case wr.CompactRevision != 0:
					return fmt.Sprintf("compacted: %v", wr.Err()), wr.CompactRevision
				case wr.Err() != nil:
					return wr.Err().Error(), 0
				case wr.IsProgressNotify():
					covered = max(covered, wr.Header.Revision)
				}
				for _, e := range wr.Events {
					key := string(e.Kv.Key)
					rec.Add(eventOp(info(), t.ID, key, e.Kv.ModRevision, e.Type == clientv3.EventTypePut,
						e.Kv.Value, e.Kv.CreateRevision, e.Kv.Version))
					last[key] = max(last[key], e.Kv.ModRevision)
					covered = max(covered, e.Kv.ModRevision)
				}
			}
		}
		return "", 0
	}()
	end := history.Op{Process: history.WatchProcess, Type: history.Info, F: history.FWatchEnd, Node: t.ID,
		Revision: covered, Error: why, Watch: info()}
	end.Watch.CompactRevision = compacted
	rec.Add(end)
	return last
}

// WatchedBy reports whether a watcher of key (every key that starts with
// it, if prefix) is sent the changes of k.
func WatchedBy(key string, prefix bool, k string) bool {
	if prefix {
		return len(k) >= len(key) && k[:len(key)] == key
	}
	return k == key
}

// reconnectPause is how long a watcher waits before it watches again, so
// that watchers whose members are all down do not spin.
const reconnectPause = 100 * time.Millisecond
