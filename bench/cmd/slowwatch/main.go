// Command slowwatch measures what one watcher that never reads costs a
// member of a cluster that speaks etcd's v3 API (etcd or edictkv), with
// the same client for both.
//
// It opens watchers-1 reading watchers on the member at --endpoint (in
// --streams gRPC watch streams over --conns connections), all watching
// the prefix every put of the load writes, so each put is an event for
// each of them. It then runs phases of an open-loop put load (--rate puts
// per second for --phase, from --clients workers over their own
// connections), alternating:
//
//   - base: the readers alone;
//   - stuck: the readers and one more watcher of the same prefix on a
//     stream of its own, on a connection of its own with gRPC's fixed
//     64 KiB windows (no BDP growth), whose client never reads after the
//     created response. Its flow-control window fills after 64 KiB, the
//     member's gRPC send for it blocks, and everything the member buffers
//     for it beyond that is the member's own.
//
// A warm-up load (--warmup) comes first, not measured. Every put is timed
// from the moment it was due (the load is open loop, so a stall of the
// member counts for every put it delays, not only for those in flight),
// and its value carries that moment: readers time each event from it.
// Before each phase the history is compacted to the current revision, so
// that every phase starts with the same index. After each phase's load,
// the readers must have received every put of the phase, in revision
// order, none missing, none repeated. A second later the member's live
// heap is read after two forced GCs (--pprof-url: Go's
// /debug/pprof/heap?debug=1&gc=1, which etcd serves with --enable-pprof
// and edictkv with --pprof; --profile-dir keeps the heap profiles), the
// stuck watcher still unread; the stuck watcher is then closed, and a
// second later the live heap is read again. The difference of the two
// readings is what the stuck watcher held; in a base phase, where nothing
// changes between them, it is the reading's own noise. (Comparing a stuck
// phase with a base phase instead would count the log entries and history
// the members keep between their snapshots and compactions, which differ
// from phase to phase.) The member's resident memory (--pid,
// /proc/PID/status) is sampled every 100 ms during each phase's load, and
// its own watch gauges (--metrics-url) are shown while the watcher is
// stuck.
//
// After the phases, a last check (--catchup): one more watcher stops
// reading through a few seconds of the load, then reads again and must
// receive every event of them, in order (the member catches it up from
// its history).
//
// The last line of output is machine-readable:
//
//	SLOWWATCH key=value ...
//
// with the pooled figures of each kind of phase, their ratios, the
// stated memory bound and whether both conditions hold: put p99 with the
// stuck watcher at most --max-p99-ratio times that without, and the live
// heap the stuck watcher held at most --mem-bound.
package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

type config struct {
	endpoint     string
	putEndpoints []string
	watchers     int
	streams      int
	conns        int
	clients      int
	putConns     int
	rate         float64
	phase        time.Duration
	warmup       time.Duration
	catchup      time.Duration
	pairs        int
	keys         int
	valSize      int
	prefix       string
	pid          int
	pprofURL     string
	metricsURL   string
	profileDir   string
	compact      bool
	settle       time.Duration
	drainTimeout time.Duration
	watchBuffer  int
	memBound     int64
	maxP99Ratio  float64
}

func main() {
	var c config
	var putEPs string
	flag.StringVar(&c.endpoint, "endpoint", "", "gRPC address (host:port) of the member that serves every watcher (required)")
	flag.StringVar(&putEPs, "put-endpoints", "", "gRPC addresses the puts go to, comma-separated (default: --endpoint)")
	flag.IntVar(&c.watchers, "watchers", 1000, "watchers in a stuck phase: the stuck one and watchers-1 readers")
	flag.IntVar(&c.streams, "streams", 10, "gRPC watch streams the readers share")
	flag.IntVar(&c.conns, "conns", 4, "gRPC connections the readers' streams share")
	flag.IntVar(&c.clients, "clients", 32, "put workers (enough that the offered rate never waits for one)")
	flag.IntVar(&c.putConns, "put-conns", 2, "gRPC connections the put workers share")
	flag.Float64Var(&c.rate, "rate", 200, "puts per second offered in each phase")
	flag.DurationVar(&c.phase, "phase", 20*time.Second, "how long each phase's put load runs")
	flag.DurationVar(&c.warmup, "warmup", 5*time.Second, "a put load at the same rate before the first phase, not measured")
	flag.DurationVar(&c.catchup, "catchup", 5*time.Second, "after the phases, a stuck watcher through this much of the load must then catch up (0: no check)")
	flag.IntVar(&c.pairs, "pairs", 2, "pairs of phases, base then stuck")
	flag.IntVar(&c.keys, "keys", 1000, "distinct keys the puts cycle over")
	flag.IntVar(&c.valSize, "val-size", 256, "value size in bytes (at least 9: a phase number and the moment the put was due)")
	flag.StringVar(&c.prefix, "prefix", "/slowwatch/", "prefix of the keys put and watched")
	flag.IntVar(&c.pid, "pid", 0, "process id of the member at --endpoint, for its resident memory (0: not sampled)")
	flag.StringVar(&c.pprofURL, "pprof-url", "", "the member's Go profiler, http://host:port/debug/pprof, for its live heap after each phase (empty: not read)")
	flag.StringVar(&c.metricsURL, "metrics-url", "", "the member's Prometheus /metrics URL: its watch gauges are shown while the stuck watcher is stuck (empty: not read)")
	flag.StringVar(&c.profileDir, "profile-dir", "", "with --pprof-url: save the member's heap profile after each phase here, as phase-N-KIND.heap.pb.gz")
	flag.BoolVar(&c.compact, "compact", true, "compact the history to the current revision before each phase")
	flag.DurationVar(&c.settle, "settle", 2*time.Second, "pause after the compaction, before a phase")
	flag.DurationVar(&c.drainTimeout, "drain-timeout", 60*time.Second, "how long readers (and the stuck watcher, resumed) may take to receive a phase's events")
	flag.IntVar(&c.watchBuffer, "watch-buffer", 128, "responses a watch stream's channel holds in the server (etcd's chanBufLen, edictkv's mvcc WatchBuffer): used for the memory bound")
	flag.Int64Var(&c.memBound, "mem-bound", 0, "bytes of live heap a stuck watcher may add (0: the bound derived from --watch-buffer and the sizes; see boundBytes)")
	flag.Float64Var(&c.maxP99Ratio, "max-p99-ratio", 1.2, "put p99 with the stuck watcher over put p99 without it that passes")
	flag.Parse()
	if putEPs == "" {
		putEPs = c.endpoint
	}
	c.putEndpoints = splitList(putEPs)
	if err := c.validate(); err != nil {
		fmt.Fprintln(os.Stderr, "slowwatch:", err)
		os.Exit(2)
	}
	if c.memBound == 0 {
		c.memBound = boundBytes(c.watchBuffer, len(c.key(c.keys-1)), c.valSize)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res, err := run(ctx, c)
	if res != nil {
		res.print(os.Stdout, c)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "slowwatch:", err)
		os.Exit(1)
	}
}

func (c *config) validate() error {
	switch {
	case c.endpoint == "":
		return errors.New("--endpoint is required")
	case c.watchers < 2:
		return fmt.Errorf("--watchers %d: need at least 2 (one stuck, one reading)", c.watchers)
	case c.streams < 1 || c.streams > c.watchers-1:
		return fmt.Errorf("--streams %d: want 1..%d (the readers)", c.streams, c.watchers-1)
	case c.conns < 1 || c.putConns < 1 || c.clients < 1:
		return errors.New("--conns, --put-conns and --clients must be positive")
	case c.rate <= 0 || c.phase <= 0 || c.pairs < 1:
		return errors.New("--rate, --phase and --pairs must be positive")
	case c.keys < 1:
		return errors.New("--keys must be positive")
	case c.valSize < stampBytes:
		return fmt.Errorf("--val-size %d: at least %d", c.valSize, stampBytes)
	case c.prefix == "":
		return errors.New("--prefix must not be empty")
	case c.maxP99Ratio <= 0:
		return errors.New("--max-p99-ratio must be positive")
	}
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

func (c *config) key(i int) string { return fmt.Sprintf("%s%08d", c.prefix, i) }

// boundBytes is what a watcher whose client never reads, alone on its
// stream and its connection, may hold in a member whose watch streams
// buffer watchBuffer responses (the stream's channel in the store, etcd's
// and edictkv's) and park one more per watcher (the victim), with one
// more in the server's hands for the gRPC send that blocked. With one put
// per revision each response holds one event: the key, the value and at
// most 512 bytes of structure (event, key-value, response, the log
// entry's envelope around the value). Beyond those, gRPC's: its
// per-stream write quota (64 KiB of encoded responses the server queues
// for a stream whose window is shut) and the connection's own buffers
// (32 KiB to read, 32 KiB to write, a frame of up to 16 KiB, header
// tables and the stream's state; 128 KiB allowed).
func boundBytes(watchBuffer, keySize, valSize int) int64 {
	const (
		grpcWriteQuota = 64 << 10
		grpcConn       = 128 << 10
	)
	resp := int64(keySize + valSize + 512)
	return int64(watchBuffer+2)*resp + grpcWriteQuota + grpcConn
}

// stampBytes is what a put's value starts with: the phase number (one
// byte) and the moment the put was due (Unix nanoseconds, 8 bytes).
const stampBytes = 9

func stamp(val []byte, phase int, due time.Time) {
	val[0] = byte(phase)
	binary.BigEndian.PutUint64(val[1:stampBytes], uint64(due.UnixNano()))
}

// readStamp decodes what stamp wrote.
func readStamp(val []byte) (phase int, due time.Time, err error) {
	if len(val) < stampBytes {
		return 0, time.Time{}, fmt.Errorf("value of %d bytes holds no stamp (%d bytes)", len(val), stampBytes)
	}
	ns := binary.BigEndian.Uint64(val[1:stampBytes])
	if ns > math.MaxInt64 {
		return 0, time.Time{}, fmt.Errorf("stamp's time %d is out of range", ns)
	}
	return int(val[0]), time.Unix(0, int64(ns)), nil
}

func dial(addr string, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	opts = append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(math.MaxInt32))}, opts...)
	cc, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	return cc, nil
}

// phaseResult is one phase's figures.
type phaseResult struct {
	n     int
	stuck bool
	puts  []time.Duration // each put's latency from its due moment
	// elapsed is from the first put's due moment to the last response.
	elapsed   time.Duration
	events    *histogram // readers' event delays from the put's due moment
	rssPeak   int64      // VmRSS, bytes (0: not sampled)
	anonPeak  int64      // RssAnon, bytes
	heapAfter int64      // HeapAlloc after a forced GC once the readers have the phase's events (0: not read)
	heapGone  int64      // the same once the stuck watcher is gone, or a second later in a base phase
	drain     time.Duration
	// stuckGauges are the member's watch gauges while the stuck watcher
	// was stuck: what it says it holds back.
	stuckGauges string
}

func (p *phaseResult) kind() string {
	if p.stuck {
		return "stuck"
	}
	return "base"
}

func (p *phaseResult) rps() float64 { return float64(len(p.puts)) / p.elapsed.Seconds() }

type results struct {
	phases []*phaseResult
	heap0  int64 // live heap after the readers were created
	bound  int64

	// The catch-up check: events the stuck watcher was due, those it got
	// once it read again, how long that took, the member's gauges before.
	catchDue, catchGot int
	catchTime          time.Duration
	catchGauges        string
}

func (r *results) catchLine() string {
	s := fmt.Sprintf("catch-up: a watcher unread through %d puts received %d/%d events in order once it read again, in %s ms",
		r.catchDue, r.catchGot, r.catchDue, ms(r.catchTime))
	if r.catchGauges != "" {
		s += "; the member, before: " + r.catchGauges
	}
	return s
}

func run(ctx context.Context, c config) (*results, error) {
	res := &results{bound: c.memBound}
	readers, err := openReaders(ctx, c)
	if err != nil {
		return nil, err
	}
	defer readers.close()
	fmt.Fprintf(os.Stderr, "slowwatch: %d readers on %d streams over %d connections to %s\n",
		c.watchers-1, c.streams, c.conns, c.endpoint)

	load, err := newLoad(c)
	if err != nil {
		return nil, err
	}
	defer load.close()

	if c.pprofURL != "" {
		if res.heap0, err = liveHeap(ctx, c.pprofURL); err != nil {
			return nil, err
		}
	}
	var putsSoFar int
	if c.warmup > 0 {
		puts, _, err := load.run(ctx, 0, c.warmup)
		if err != nil {
			return res, fmt.Errorf("warm-up: %w", err)
		}
		putsSoFar += len(puts)
		if err := readers.await(ctx, putsSoFar, c.drainTimeout); err != nil {
			return res, fmt.Errorf("warm-up: %w", err)
		}
		readers.takeHistogram(0, newHistogram())
	}
	for i := range 2 * c.pairs {
		p := &phaseResult{n: i + 1, stuck: i%2 == 1, events: newHistogram()}
		res.phases = append(res.phases, p)
		n, err := runPhase(ctx, c, p, readers, load, putsSoFar)
		putsSoFar += n
		if err != nil {
			return res, fmt.Errorf("phase %d (%s): %w", p.n, p.kind(), err)
		}
		fmt.Fprintf(os.Stderr, "slowwatch: %s\n", p.line())
	}
	if c.catchup > 0 {
		n, err := catchUp(ctx, c, res, readers, load, putsSoFar)
		putsSoFar += n
		if err != nil {
			return res, fmt.Errorf("catch-up check: %w", err)
		}
		fmt.Fprintf(os.Stderr, "slowwatch: %s\n", res.catchLine())
	}
	return res, readers.check(putsSoFar)
}

// runPhase runs one phase after putsBefore puts and returns how many it
// made. A second after the readers have everything, the member's live
// heap is read (the stuck watcher, if any, still unread), and again a
// second after the stuck watcher is closed, or after another second in a
// base phase: the difference is what the stuck watcher held, or the
// reading's own noise.
func runPhase(ctx context.Context, c config, p *phaseResult, readers *readerSet, load *load, putsBefore int) (int, error) {
	if c.compact {
		if err := load.compact(ctx); err != nil {
			return 0, err
		}
	}
	sleep(ctx, c.settle)
	var stuck *stuckWatcher
	if p.stuck {
		var err error
		if stuck, err = openStuck(ctx, c); err != nil {
			return 0, err
		}
		defer stuck.close()
	}
	rss := sampleRSS(c.pid)
	puts, elapsed, err := load.run(ctx, p.n, c.phase)
	p.rssPeak, p.anonPeak = rss.stop()
	p.puts, p.elapsed = puts, elapsed
	if err != nil {
		return len(puts), err
	}
	t0 := time.Now()
	if err := readers.await(ctx, putsBefore+len(puts), c.drainTimeout); err != nil {
		return len(puts), err
	}
	p.drain = time.Since(t0)
	readers.takeHistogram(p.n, p.events)
	if stuck != nil && c.metricsURL != "" {
		if p.stuckGauges, err = readWatchGauges(ctx, c.metricsURL); err != nil {
			return len(puts), err
		}
	}
	if c.pprofURL == "" {
		return len(puts), nil
	}
	// A second for what the load left in flight (batches not yet
	// committed, gRPC's buffers) to settle.
	sleep(ctx, time.Second)
	if p.heapAfter, err = liveHeap(ctx, c.pprofURL); err != nil {
		return len(puts), err
	}
	if err := saveHeapProfile(ctx, c, fmt.Sprintf("phase-%d-%s", p.n, p.kind())); err != nil {
		return len(puts), err
	}
	stuck.close()
	sleep(ctx, time.Second) // for the member to see the stuck watcher's connection close
	if p.heapGone, err = liveHeap(ctx, c.pprofURL); err != nil {
		return len(puts), err
	}
	if err := saveHeapProfile(ctx, c, fmt.Sprintf("phase-%d-%s-after", p.n, p.kind())); err != nil {
		return len(puts), err
	}
	return len(puts), nil
}

// catchUp checks that a watcher that stopped reading gets everything once
// it reads again: a stuck watcher through --catchup seconds of the load,
// then read until it has every event of them, in order. It returns the
// puts it made.
func catchUp(ctx context.Context, c config, res *results, readers *readerSet, load *load, putsBefore int) (int, error) {
	stuck, err := openStuck(ctx, c)
	if err != nil {
		return 0, err
	}
	defer stuck.close()
	puts, _, err := load.run(ctx, 0, c.catchup)
	if err != nil {
		return len(puts), err
	}
	if err := readers.await(ctx, putsBefore+len(puts), c.drainTimeout); err != nil {
		return len(puts), err
	}
	readers.takeHistogram(0, newHistogram())
	if c.metricsURL != "" {
		if res.catchGauges, err = readWatchGauges(ctx, c.metricsURL); err != nil {
			return len(puts), err
		}
	}
	res.catchDue = len(puts)
	t := time.Now()
	res.catchGot, err = stuck.resume(ctx, len(puts), c.drainTimeout)
	res.catchTime = time.Since(t)
	return len(puts), err
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// ---------------------------------------------------------------------
// Readers.

// readerStream is one watch stream of readers; its goroutine alone
// touches the watchers' state, under mu for the checks.
type readerStream struct {
	cancel   context.CancelFunc
	stream   pb.Watch_WatchClient
	ids      []int64
	created  chan struct{}
	received atomic.Int64 // events, over all its watchers

	mu        sync.Mutex
	count     map[int64]int
	last      map[int64]int64
	disorder  int // events at or below their watcher's last revision
	badStamps int
	err       error
	hists     map[int]*histogram // by phase
}

type readerSet struct {
	conns   []*grpc.ClientConn
	streams []*readerStream
}

func openReaders(ctx context.Context, c config) (*readerSet, error) {
	rs := &readerSet{}
	for range c.conns {
		cc, err := dial(c.endpoint)
		if err != nil {
			rs.close()
			return nil, err
		}
		rs.conns = append(rs.conns, cc)
	}
	readers := c.watchers - 1
	for s := range c.streams {
		sctx, cancel := context.WithCancel(ctx)
		st, err := pb.NewWatchClient(rs.conns[s%len(rs.conns)]).Watch(sctx)
		if err != nil {
			cancel()
			rs.close()
			return nil, fmt.Errorf("open watch stream %d: %w", s, err)
		}
		r := &readerStream{cancel: cancel, stream: st, created: make(chan struct{}),
			count: map[int64]int{}, last: map[int64]int64{}, hists: map[int]*histogram{}}
		for w := s; w < readers; w += c.streams {
			r.ids = append(r.ids, int64(w+1))
		}
		rs.streams = append(rs.streams, r)
		go r.recv()
	}
	end := prefixEnd(c.prefix)
	for _, r := range rs.streams {
		for _, id := range r.ids {
			req := &pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: &pb.WatchCreateRequest{
				Key: []byte(c.prefix), RangeEnd: end, WatchId: id}}}
			if err := r.stream.Send(req); err != nil {
				rs.close()
				return nil, fmt.Errorf("create watcher %d: %w", id, err)
			}
		}
	}
	deadline := time.NewTimer(c.drainTimeout)
	defer deadline.Stop()
	for i, r := range rs.streams {
		select {
		case <-r.created:
		case <-deadline.C:
			rs.close()
			return nil, fmt.Errorf("watch stream %d: its %d watchers not all created after %v", i, len(r.ids), c.drainTimeout)
		case <-ctx.Done():
			rs.close()
			return nil, ctx.Err()
		}
		if err := r.failure(); err != nil {
			rs.close()
			return nil, err
		}
	}
	return rs, nil
}

func (r *readerStream) failure() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

func (r *readerStream) fail(err error) {
	r.mu.Lock()
	if r.err == nil {
		r.err = err
	}
	r.mu.Unlock()
}

func (r *readerStream) recv() {
	created := 0
	for {
		resp, err := r.stream.Recv()
		if err != nil {
			r.fail(fmt.Errorf("watch stream ended: %w", err))
			if created < len(r.ids) {
				close(r.created)
			}
			return
		}
		switch {
		case resp.Canceled:
			r.fail(fmt.Errorf("watcher %d cancelled: %q (compact revision %d)", resp.WatchId, resp.CancelReason, resp.CompactRevision))
		case resp.Created:
			if created++; created == len(r.ids) {
				close(r.created)
			}
			continue
		}
		if len(resp.Events) == 0 {
			continue
		}
		now := time.Now()
		r.mu.Lock()
		id := resp.WatchId
		for _, ev := range resp.Events {
			rev := ev.Kv.ModRevision
			if rev <= r.last[id] {
				r.disorder++
			}
			r.last[id] = rev
			r.count[id]++
			phase, due, err := readStamp(ev.Kv.Value)
			if err != nil {
				r.badStamps++
				continue
			}
			h := r.hists[phase]
			if h == nil {
				h = newHistogram()
				r.hists[phase] = h
			}
			h.add(now.Sub(due))
		}
		r.mu.Unlock()
		r.received.Add(int64(len(resp.Events)))
	}
}

// await waits until every reader has received puts events in all.
func (rs *readerSet) await(ctx context.Context, puts int, timeout time.Duration) error {
	want := int64(0)
	for _, r := range rs.streams {
		want += int64(len(r.ids) * puts)
	}
	deadline := time.Now().Add(timeout)
	for {
		got := int64(0)
		for _, r := range rs.streams {
			if err := r.failure(); err != nil {
				return err
			}
			got += r.received.Load()
		}
		switch {
		case got == want:
			return nil
		case got > want:
			return fmt.Errorf("readers received %d events, more than the %d puts × readers (%d)", got, puts, want)
		case time.Now().After(deadline):
			return fmt.Errorf("readers received %d of %d events (%d puts × readers) after %v", got, want, puts, timeout)
		}
		sleep(ctx, 5*time.Millisecond)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

func (rs *readerSet) takeHistogram(phase int, into *histogram) {
	for _, r := range rs.streams {
		r.mu.Lock()
		if h := r.hists[phase]; h != nil {
			into.merge(h)
			delete(r.hists, phase)
		}
		r.mu.Unlock()
	}
}

// check: every reader got each of the puts once, in revision order.
func (rs *readerSet) check(puts int) error {
	var errs []error
	for i, r := range rs.streams {
		r.mu.Lock()
		for _, id := range r.ids {
			if n := r.count[id]; n != puts {
				errs = append(errs, fmt.Errorf("stream %d watcher %d received %d events of %d puts", i, id, n, puts))
			}
		}
		if r.disorder > 0 {
			errs = append(errs, fmt.Errorf("stream %d: %d events at or below their watcher's previous revision", i, r.disorder))
		}
		if r.badStamps > 0 {
			errs = append(errs, fmt.Errorf("stream %d: %d events whose value has no stamp", i, r.badStamps))
		}
		r.mu.Unlock()
	}
	return errors.Join(errs...)
}

func (rs *readerSet) close() {
	for _, r := range rs.streams {
		r.cancel()
	}
	for _, cc := range rs.conns {
		cc.Close()
	}
}

// prefixEnd is etcd's range end of a prefix (clientv3.GetPrefixRangeEnd).
func prefixEnd(prefix string) []byte {
	end := []byte(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return []byte{0}
}

// ---------------------------------------------------------------------
// The stuck watcher.

type stuckWatcher struct {
	cc      *grpc.ClientConn
	cancel  context.CancelFunc
	stream  pb.Watch_WatchClient
	fromRev int64 // the revision of its created response: it is due every later one
}

// openStuck opens a watcher of the prefix on a connection of its own
// whose windows are gRPC's fixed minimum (setting them turns off the BDP
// estimator, which would otherwise grow a window the client never
// drains up to 16 MiB), and reads nothing after its created response.
func openStuck(ctx context.Context, c config) (*stuckWatcher, error) {
	const window = 64 << 10
	cc, err := dial(c.endpoint, grpc.WithInitialWindowSize(window), grpc.WithInitialConnWindowSize(window))
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	st, err := pb.NewWatchClient(cc).Watch(sctx)
	if err == nil {
		err = st.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: &pb.WatchCreateRequest{
			Key: []byte(c.prefix), RangeEnd: prefixEnd(c.prefix), WatchId: 1}}})
	}
	var resp *pb.WatchResponse
	if err == nil {
		resp, err = st.Recv()
	}
	if err == nil && (!resp.Created || resp.Canceled) {
		err = fmt.Errorf("want a created response, got %v", resp)
	}
	if err != nil {
		cancel()
		cc.Close()
		return nil, fmt.Errorf("open the stuck watcher: %w", err)
	}
	return &stuckWatcher{cc: cc, cancel: cancel, stream: st, fromRev: resp.Header.Revision}, nil
}

// resume reads the stuck watcher again until it has the due events after
// its created revision, in revision order, and says how many it got.
func (s *stuckWatcher) resume(ctx context.Context, due int, timeout time.Duration) (int, error) {
	type result struct {
		got int
		err error
	}
	done := make(chan result, 1)
	go func() {
		got, last := 0, s.fromRev
		for got < due {
			resp, err := s.stream.Recv()
			if err != nil {
				done <- result{got, err}
				return
			}
			if resp.Canceled {
				done <- result{got, fmt.Errorf("cancelled: %q (compact revision %d)", resp.CancelReason, resp.CompactRevision)}
				return
			}
			for _, ev := range resp.Events {
				if ev.Kv.ModRevision <= last {
					done <- result{got, fmt.Errorf("event at revision %d after %d", ev.Kv.ModRevision, last)}
					return
				}
				last = ev.Kv.ModRevision
				got++
			}
		}
		done <- result{got, nil}
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case r := <-done:
		if r.err == nil && r.got != due {
			r.err = fmt.Errorf("received %d events, %d were due", r.got, due)
		}
		return r.got, r.err
	case <-t.C:
		s.cancel()
		r := <-done
		return r.got, fmt.Errorf("received %d of %d events after %v", r.got, due, timeout)
	case <-ctx.Done():
		s.cancel()
		<-done
		return 0, ctx.Err()
	}
}

func (s *stuckWatcher) close() {
	if s == nil {
		return
	}
	s.cancel()
	s.cc.Close()
}

// ---------------------------------------------------------------------
// The put load.

type load struct {
	c     config
	conns []*grpc.ClientConn
	kvs   []pb.KVClient
	next  int // the next key's index
}

func newLoad(c config) (*load, error) {
	l := &load{c: c}
	for i := range c.putConns {
		cc, err := dial(c.putEndpoints[i%len(c.putEndpoints)])
		if err != nil {
			l.close()
			return nil, err
		}
		l.conns = append(l.conns, cc)
		l.kvs = append(l.kvs, pb.NewKVClient(cc))
	}
	return l, nil
}

func (l *load) close() {
	for _, cc := range l.conns {
		cc.Close()
	}
}

// compact compacts the history to the member's current revision.
func (l *load) compact(ctx context.Context) error {
	kv := pb.NewKVClient(l.conns[0])
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	r, err := kv.Range(cctx, &pb.RangeRequest{Key: []byte(l.c.prefix), Limit: 1})
	if err != nil {
		return fmt.Errorf("read the revision to compact at: %w", err)
	}
	if _, err := kv.Compact(cctx, &pb.CompactionRequest{Revision: r.Header.Revision}); err != nil {
		return fmt.Errorf("compact at %d: %w", r.Header.Revision, err)
	}
	return nil
}

// run offers d's worth of puts at the configured rate, each due at start
// + i/rate, stamped with phase, and returns each one's latency from its
// due moment.
func (l *load) run(ctx context.Context, phase int, d time.Duration) ([]time.Duration, time.Duration, error) {
	n := int(l.c.rate * d.Seconds())
	type job struct {
		key string
		due time.Time
	}
	jobs := make(chan job, n)
	lat := make([]time.Duration, n)
	var failed atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	var idx atomic.Int64
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for w := range l.c.clients {
		kv := l.kvs[w%len(l.kvs)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			val := make([]byte, l.c.valSize)
			for i := range val[stampBytes:] {
				val[stampBytes+i] = 'v'
			}
			for j := range jobs {
				stamp(val, phase, j.due)
				rctx, rcancel := context.WithTimeout(pctx, 30*time.Second)
				_, err := kv.Put(rctx, &pb.PutRequest{Key: []byte(j.key), Value: val})
				rcancel()
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, fmt.Errorf("put %s: %w", j.key, err))
					continue
				}
				lat[idx.Add(1)-1] = time.Since(j.due)
			}
		}()
	}
	start := time.Now()
	for i := range n {
		due := start.Add(time.Duration(float64(i) / l.c.rate * float64(time.Second)))
		if d := time.Until(due); d > 0 {
			sleep(ctx, d)
		}
		if ctx.Err() != nil {
			break
		}
		jobs <- job{key: l.c.key(l.next), due: due}
		l.next = (l.next + 1) % l.c.keys
	}
	close(jobs)
	wg.Wait()
	elapsed := time.Since(start)
	if f := failed.Load(); f > 0 {
		return lat[:idx.Load()], elapsed, fmt.Errorf("%d of %d puts failed, the first: %w", f, n, firstErr.Load().(error))
	}
	if err := ctx.Err(); err != nil {
		return lat[:idx.Load()], elapsed, err
	}
	return lat, elapsed, nil
}

// ---------------------------------------------------------------------
// The member's memory.

type rssSampler struct {
	stopc      chan struct{}
	done       chan struct{}
	rss, anon  int64
	pid        int
	readFailed error
}

func sampleRSS(pid int) *rssSampler {
	s := &rssSampler{stopc: make(chan struct{}), done: make(chan struct{}), pid: pid}
	if pid == 0 {
		close(s.done)
		return s
	}
	go func() {
		defer close(s.done)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			s.sample()
			select {
			case <-t.C:
			case <-s.stopc:
				s.sample()
				return
			}
		}
	}()
	return s
}

func (s *rssSampler) sample() {
	rss, anon, err := readRSS(s.pid)
	if err != nil {
		s.readFailed = err
		return
	}
	s.rss, s.anon = max(s.rss, rss), max(s.anon, anon)
}

// stop ends the sampling and returns the peaks of VmRSS and RssAnon.
func (s *rssSampler) stop() (rss, anon int64) {
	if s.pid != 0 {
		close(s.stopc)
	}
	<-s.done
	if s.readFailed != nil {
		fmt.Fprintf(os.Stderr, "slowwatch: reading the member's memory: %v\n", s.readFailed)
	}
	return s.rss, s.anon
}

func readRSS(pid int) (rss, anon int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	return parseStatus(string(b))
}

// parseStatus reads VmRSS and RssAnon (kB) of a /proc/PID/status.
func parseStatus(s string) (rss, anon int64, err error) {
	found := 0
	for _, line := range strings.Split(s, "\n") {
		name, rest, ok := strings.Cut(line, ":")
		if !ok || (name != "VmRSS" && name != "RssAnon") {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, 0, fmt.Errorf("status line %q: want a number of kB", line)
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || kb < 0 {
			return 0, 0, fmt.Errorf("status line %q: want a number of kB", line)
		}
		if name == "VmRSS" {
			rss = kb << 10
		} else {
			anon = kb << 10
		}
		found++
	}
	if found != 2 {
		return 0, 0, errors.New("status has no VmRSS or no RssAnon")
	}
	return rss, anon, nil
}

// liveHeap reads HeapAlloc from the Go heap profile in text form taken
// after a GC (heap?debug=1&gc=1): the bytes of live objects. It asks
// twice and keeps the second: what sync.Pools hold (gRPC's buffers, after
// a load, a few hundred KiB to 1 MiB) survives one GC in the pools'
// victim caches and goes at the next.
func liveHeap(ctx context.Context, pprofURL string) (int64, error) {
	var n int64
	for range 2 {
		body, err := get(ctx, pprofURL+"/heap?debug=1&gc=1")
		if err != nil {
			return 0, err
		}
		if n, err = parseHeapAlloc(string(body)); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// saveHeapProfile saves the member's heap profile, taken after a GC, as
// NAME.heap.pb.gz in --profile-dir (nothing without one), for `go tool
// pprof -diff_base`.
func saveHeapProfile(ctx context.Context, c config, name string) error {
	if c.profileDir == "" {
		return nil
	}
	body, err := get(ctx, c.pprofURL+"/heap?gc=1")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(c.profileDir, name+".heap.pb.gz"), body, 0o644); err != nil {
		return fmt.Errorf("save the heap profile: %w", err)
	}
	return nil
}

func get(ctx context.Context, url string) ([]byte, error) {
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return body, nil
}

// watchGaugeNames are the member's gauges of watchers held back: edictkv's
// parked watchers and their events, etcd's slow (unsynced) watchers and
// the events pending for its victims.
var watchGaugeNames = []string{
	`edictkv_watchers{state="parked"}`, `edictkv_watchers{state="unsynced"}`, "edictkv_watch_parked_events",
	"etcd_debugging_mvcc_slow_watcher_total", "etcd_debugging_mvcc_pending_events_total",
}

func readWatchGauges(ctx context.Context, url string) (string, error) {
	body, err := get(ctx, url)
	if err != nil {
		return "", err
	}
	return watchGauges(string(body)), nil
}

// watchGauges picks watchGaugeNames out of a Prometheus text exposition,
// as "name value" pairs joined by ", ".
func watchGauges(metrics string) string {
	var out []string
	for _, line := range strings.Split(metrics, "\n") {
		name, value, ok := strings.Cut(line, " ")
		if ok && slices.Contains(watchGaugeNames, name) {
			out = append(out, name+" "+strings.TrimSpace(value))
		}
	}
	return strings.Join(out, ", ")
}

// parseHeapAlloc finds "# HeapAlloc = N" in a text heap profile.
func parseHeapAlloc(s string) (int64, error) {
	for _, line := range strings.Split(s, "\n") {
		v, ok := strings.CutPrefix(strings.TrimSpace(line), "# HeapAlloc = ")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("heap profile line %q: want a byte count", line)
		}
		return n, nil
	}
	return 0, errors.New("heap profile has no HeapAlloc line (want the text form, ?debug=1)")
}

// ---------------------------------------------------------------------
// Figures.

// histogram counts durations in buckets 2% wide from 1 µs up.
type histogram struct {
	counts []int64
	n      int64
}

const histGrowth = 1.02

func newHistogram() *histogram { return &histogram{counts: make([]int64, 1200)} }

func (h *histogram) add(d time.Duration) {
	us := float64(d) / float64(time.Microsecond)
	b := 0
	if us > 1 {
		b = min(int(math.Log(us)/math.Log(histGrowth))+1, len(h.counts)-1)
	}
	h.counts[b]++
	h.n++
}

func (h *histogram) merge(o *histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
}

// quantile is the upper edge of the bucket that holds the q-th quantile.
func (h *histogram) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(h.n)))
	var seen int64
	for b, c := range h.counts {
		if seen += c; seen >= max(rank, 1) {
			return time.Duration(math.Pow(histGrowth, float64(b)) * float64(time.Microsecond))
		}
	}
	return 0
}

// quantile of exact samples: the smallest with at least q of them at or
// below it.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3f", float64(d)/float64(time.Millisecond)) }
func mib(b int64) string        { return fmt.Sprintf("%.1f", float64(b)/(1<<20)) }

// kib is b in KiB, "na" for a figure not measured (negative).
func kib(b int64) string {
	if b < 0 {
		return "na"
	}
	return fmt.Sprintf("%.0f", float64(b)/(1<<10))
}

// signedKiB is b in KiB, "na" if not measured.
func signedKiB(b int64, measured bool) string {
	if !measured {
		return "na"
	}
	return fmt.Sprintf("%.0f", float64(b)/(1<<10))
}

func (p *phaseResult) line() string {
	s := slices.Sorted(slices.Values(p.puts))
	out := fmt.Sprintf("phase %d %-5s %6d puts %7.1f/s  put p50 %s p99 %s max %s ms  event p50 %s p99 %s ms  drain %s ms  RSS peak %s MiB (anon %s)",
		p.n, p.kind(), len(p.puts), p.rps(), ms(quantile(s, 0.5)), ms(quantile(s, 0.99)), ms(quantile(s, 1)),
		ms(p.events.quantile(0.5)), ms(p.events.quantile(0.99)), ms(p.drain), mib(p.rssPeak), mib(p.anonPeak))
	if p.heapAfter > 0 {
		out += fmt.Sprintf("  live heap %s MiB, then %s MiB", mib(p.heapAfter), mib(p.heapGone))
	}
	if p.stuckGauges != "" {
		out += "  the member, the watcher stuck: " + p.stuckGauges
	}
	return out
}

// pooled is the figures of all phases of one kind.
type pooled struct {
	puts     []time.Duration
	elapsed  time.Duration
	events   *histogram
	rssPeak  int64
	anonPeak int64
}

func (r *results) pool(stuck bool) pooled {
	p := pooled{events: newHistogram()}
	for _, ph := range r.phases {
		if ph.stuck != stuck {
			continue
		}
		p.puts = append(p.puts, ph.puts...)
		p.elapsed += ph.elapsed
		p.events.merge(ph.events)
		p.rssPeak, p.anonPeak = max(p.rssPeak, ph.rssPeak), max(p.anonPeak, ph.anonPeak)
	}
	slices.Sort(p.puts)
	return p
}

// stuckHeap is the most live heap a stuck watcher held: over the stuck
// phases, the live heap while it was stuck less that once it was gone.
// ok is false if it was not measured.
func (r *results) stuckHeap() (held int64, ok bool) {
	for _, ph := range r.phases {
		if ph.stuck && ph.heapAfter > 0 && ph.heapGone > 0 {
			if d := ph.heapAfter - ph.heapGone; !ok || d > held {
				held, ok = d, true
			}
		}
	}
	return held, ok
}

// heapNoise is how far the live heap moved between the two readings of a
// base phase, where nothing changed in between: the reading's own noise
// (-1 if not measured).
func (r *results) heapNoise() int64 {
	n := int64(-1)
	for _, ph := range r.phases {
		if !ph.stuck && ph.heapAfter > 0 && ph.heapGone > 0 {
			d := ph.heapAfter - ph.heapGone
			n = max(n, d, -d)
		}
	}
	return n
}

func (r *results) print(w io.Writer, c config) {
	base, stuck := r.pool(false), r.pool(true)
	if len(base.puts) == 0 || len(stuck.puts) == 0 {
		return
	}
	bp99, sp99 := quantile(base.puts, 0.99), quantile(stuck.puts, 0.99)
	ratio := float64(sp99) / float64(bp99)
	held, measured := r.stuckHeap()
	memOK := measured && held <= r.bound
	p99OK := ratio <= c.maxP99Ratio
	rps := func(p pooled) float64 { return float64(len(p.puts)) / p.elapsed.Seconds() }
	fmt.Fprintln(w)
	for _, ph := range r.phases {
		fmt.Fprintln(w, ph.line())
	}
	fmt.Fprintf(w, "\nbase  (readers only):      %7.1f puts/s  put p50 %s p99 %s ms  event p99 %s ms  RSS peak %s MiB\n",
		rps(base), ms(quantile(base.puts, 0.5)), ms(bp99), ms(base.events.quantile(0.99)), mib(base.rssPeak))
	fmt.Fprintf(w, "stuck (readers + 1 stuck): %7.1f puts/s  put p50 %s p99 %s ms  event p99 %s ms  RSS peak %s MiB\n",
		rps(stuck), ms(quantile(stuck.puts, 0.5)), ms(sp99), ms(stuck.events.quantile(0.99)), mib(stuck.rssPeak))
	fmt.Fprintf(w, "put p99 stuck/base %.3f (pass at <= %.2f): %v\n", ratio, c.maxP99Ratio, p99OK)
	if measured {
		fmt.Fprintf(w, "live heap the stuck watcher held (stuck, less gone): %s KiB (bound %s KiB; noise, base phases: %s KiB): %v\n",
			signedKiB(held, true), kib(r.bound), kib(r.heapNoise()), memOK)
	}
	kv := []string{
		"watchers=" + strconv.Itoa(c.watchers), "streams=" + strconv.Itoa(c.streams), "conns=" + strconv.Itoa(c.conns),
		fmt.Sprintf("rate=%g", c.rate), "phase_s=" + strconv.FormatFloat(c.phase.Seconds(), 'f', -1, 64),
		"pairs=" + strconv.Itoa(c.pairs), "val_size=" + strconv.Itoa(c.valSize),
		fmt.Sprintf("base_rps=%.1f", rps(base)), "base_p50_ms=" + ms(quantile(base.puts, 0.5)), "base_p99_ms=" + ms(bp99),
		"base_event_p99_ms=" + ms(base.events.quantile(0.99)), "base_rss_peak_mib=" + mib(base.rssPeak),
		"base_anon_peak_mib=" + mib(base.anonPeak),
		fmt.Sprintf("stuck_rps=%.1f", rps(stuck)), "stuck_p50_ms=" + ms(quantile(stuck.puts, 0.5)), "stuck_p99_ms=" + ms(sp99),
		"stuck_event_p99_ms=" + ms(stuck.events.quantile(0.99)), "stuck_rss_peak_mib=" + mib(stuck.rssPeak),
		"stuck_anon_peak_mib=" + mib(stuck.anonPeak),
		fmt.Sprintf("p99_ratio=%.3f", ratio), "p99_ok=" + strconv.FormatBool(p99OK),
		"heap0_mib=" + mib(r.heap0), "stuck_heap_kib=" + signedKiB(held, measured), "heap_noise_kib=" + kib(r.heapNoise()),
		"mem_bound_kib=" + kib(r.bound), "mem_ok=" + strconv.FormatBool(memOK),
		"catchup_due=" + strconv.Itoa(r.catchDue), "catchup_got=" + strconv.Itoa(r.catchGot), "catchup_ms=" + ms(r.catchTime),
		"pass=" + strconv.FormatBool(p99OK && memOK),
	}
	fmt.Fprintln(w, "SLOWWATCH", strings.Join(kv, " "))
}
