//go:build jepsen

package process

// Test-only fault injection for the Jepsen harness (jepsen/cluster),
// compiled in only with the build tag jepsen. A process built so serves
//
//	GET  /debug/jepsen/faults  → FaultsJSON (the current settings)
//	POST /debug/jepsen/faults  ← FaultsJSON; an absent field is unchanged
//
// blocked lists process ids whose log traffic (messages and snapshot
// streams, both directions) is dropped silently, as a network partition
// would; clock_rate makes the Node's clock run at that rate relative to
// real time from now on, continuously (no jump at a change); delay holds,
// duplicates and reorders the log messages this process receives, and
// holds incoming snapshot streams (DelayJSON); fsync adds a delay before
// every durable batch the log writes (FsyncJSON), as a slow disk would.
// The answer to both methods
// also carries stats: what the delay and the fsync delay did since each
// was last set, and the
// snapshot streams this process sent and received since it started. Every
// snapshot stream sent is also logged ("jepsen snapshot sent", with
// installed true or false) so that the harness can count installs across
// restarts from the process logs.
//
// The environment variable EDICTKV_JEPSEN_FAULTS, if set, holds the
// settings (a FaultsJSON) the process starts with, so that a process
// restarted inside a partition is partitioned from its first message.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/httpapi"
	"github.com/edictlog/edictlog/cmd/edictkv/kvjson"
	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/transport"
	"github.com/edictlog/edictlog/wire"
)

// FaultsJSON is the body of /debug/jepsen/faults (jepsen builds only).
// In a POST a nil field leaves its setting as it is.
type FaultsJSON struct {
	Blocked   *[]uint64  `json:"blocked,omitempty"`
	ClockRate *float64   `json:"clock_rate,omitempty"`
	Delay     *DelayJSON `json:"delay,omitempty"`
	Fsync     *FsyncJSON `json:"fsync,omitempty"`
	// Stats is only in answers (ignored in a POST).
	Stats *FaultStatsJSON `json:"stats,omitempty"`
}

// DelayJSON is the delay fault (jepsen builds only): for each log message
// this process receives, independently, with probability P it is held for
// a uniform time in [MinMS, MaxMS] before the Node sees it; with
// probability Dup a second copy (a deep copy: the Node may keep what it is
// given) is delivered after a uniform time in [0, MaxMS]; with probability
// Reorder it is held up to ReorderMS (default 20) so that the next few
// overtake it. Held messages from a peer that is blocked by the time they
// are due are dropped, as a partition would lose them in flight. Incoming
// snapshot streams are held for a uniform time in [SnapshotMS/2,
// SnapshotMS] before the Node takes them (the sender waits meanwhile), so
// that leadership can change while a stream is in flight. Message delay
// is applied by the receiver because the transport encodes a message at
// Send (the sender may reuse its payload) and hands every receiver its own
// copy, so holding on the receiving side needs no copy but for duplicates.
// The zero DelayJSON turns the fault off.
type DelayJSON struct {
	P          float64 `json:"p,omitempty"`
	MinMS      int     `json:"min_ms,omitempty"`
	MaxMS      int     `json:"max_ms,omitempty"`
	Dup        float64 `json:"dup,omitempty"`
	Reorder    float64 `json:"reorder,omitempty"`
	ReorderMS  int     `json:"reorder_ms,omitempty"`
	SnapshotMS int     `json:"snapshot_ms,omitempty"`
}

// maxDelayMS bounds every hold: a minute is far beyond any lease, and
// keeps a typo from parking messages for hours.
const maxDelayMS = 60_000

func (d DelayJSON) validate() error {
	for _, p := range []float64{d.P, d.Dup, d.Reorder} {
		if !(p >= 0 && p <= 1) {
			return errors.New("delay: p, dup and reorder must be within [0, 1]")
		}
	}
	for _, ms := range []int{d.MinMS, d.MaxMS, d.ReorderMS, d.SnapshotMS} {
		if ms < 0 || ms > maxDelayMS {
			return fmt.Errorf("delay: holds must be within [0, %d] ms", maxDelayMS)
		}
	}
	if d.MinMS > d.MaxMS {
		return errors.New("delay: min_ms exceeds max_ms")
	}
	return nil
}

// FsyncJSON is the slow-disk fault (jepsen builds only): before every
// durable batch of the log (edictlog.Store.StoreBatch: the entries, and the
// records stored with them, each written with one fsync) the process waits
// a uniform time in [MinMS, MaxMS], as if the write and its fsync took that
// much longer. The wait is in the store, under the Node's persister and
// under the timing of edictkv_append_seconds and the Node's storage
// statistics, so everything that watches the disk sees it. The other
// writes (the incarnation at start, compaction, snapshots) are left alone:
// the issue is a disk too slow for the log's own writes. The wait ends
// early once the process's server has stopped, so that a shutdown never
// waits for it. The zero FsyncJSON turns the fault off.
type FsyncJSON struct {
	MinMS int `json:"min_ms,omitempty"`
	MaxMS int `json:"max_ms,omitempty"`
}

func (d FsyncJSON) validate() error {
	if d.MinMS < 0 || d.MaxMS < 0 || d.MinMS > maxDelayMS || d.MaxMS > maxDelayMS {
		return fmt.Errorf("fsync: delays must be within [0, %d] ms", maxDelayMS)
	}
	if d.MaxMS > 0 && d.MinMS > d.MaxMS {
		return errors.New("fsync: min_ms exceeds max_ms")
	}
	return nil
}

// on reports whether the fault adds anything: a lone min_ms is a fixed
// delay.
func (d FsyncJSON) on() bool { return d.MinMS > 0 || d.MaxMS > 0 }

// FaultStatsJSON counts what the faults did (jepsen builds only). Held,
// Duplicated, Reordered and SnapshotsHeld count since the delay was last
// set; the snapshot counts since the process started.
type FaultStatsJSON struct {
	Held       uint64 `json:"held"`
	Duplicated uint64 `json:"duplicated"`
	Reordered  uint64 `json:"reordered"`
	// SnapshotsHeld counts incoming streams held; SnapshotsHolding is how
	// many are held right now.
	SnapshotsHeld    uint64 `json:"snapshots_held"`
	SnapshotsHolding int64  `json:"snapshots_holding"`
	// SnapshotsReceived counts incoming streams handed to the Node.
	SnapshotsReceived uint64 `json:"snapshots_received"`
	// SnapshotsSending is how many streams this process is sending right
	// now; SnapshotsInstalled and SnapshotsFailed count the finished ones
	// by the receiver's verdict.
	SnapshotsSending   int64  `json:"snapshots_sending"`
	SnapshotsInstalled uint64 `json:"snapshots_installed"`
	SnapshotsFailed    uint64 `json:"snapshots_failed"`
	// FsyncDelayed counts the durable batches the fsync fault delayed,
	// and FsyncDelayMS the delay it added to them in all, since it was
	// last set; FsyncWaiting is how many wait right now.
	FsyncDelayed uint64 `json:"fsync_delayed"`
	FsyncDelayMS uint64 `json:"fsync_delay_ms"`
	FsyncWaiting int64  `json:"fsync_waiting"`
}

// faultHooks holds one process's injected faults.
type faultHooks struct{ *faults }

type faults struct {
	log     *slog.Logger
	stop    chan struct{} // closed when the process's Server stops
	stopped sync.Once
	blocked atomic.Pointer[map[edict.ProcessID]bool]
	delay   atomic.Pointer[delayState]
	fsync   atomic.Pointer[fsyncState]
	clock   rateClock
	// fsyncWaiting counts the batches waiting in the fsync delay, across
	// settings.
	fsyncWaiting atomic.Int64

	snapsHolding, snapsSending                 atomic.Int64
	snapsReceived, snapsInstalled, snapsFailed atomic.Uint64
}

// delayState is one setting of the delay fault and what it has done; a new
// setting starts new counts.
type delayState struct {
	DelayJSON
	held, duplicated, reordered, snapsHeld atomic.Uint64
}

// fsyncState is one setting of the fsync fault and what it has done.
type fsyncState struct {
	FsyncJSON
	delayed, delayedNanos atomic.Uint64
}

func (d *delayState) on() bool {
	return d.P > 0 || d.Dup > 0 || d.Reorder > 0 || d.SnapshotMS > 0
}

func newFaultHooks(p *Process) faultHooks {
	f := &faults{log: p.log.With("component", "jepsen-faults"), stop: make(chan struct{})}
	f.blocked.Store(&map[edict.ProcessID]bool{})
	f.delay.Store(&delayState{})
	f.fsync.Store(&fsyncState{})
	f.clock.rate = 1
	if env := os.Getenv(FaultsEnv); env != "" {
		var init FaultsJSON
		if err := json.Unmarshal([]byte(env), &init); err != nil {
			f.log.Error("ignoring bad "+FaultsEnv, "err", err)
			return faultHooks{f}
		}
		if init.Blocked != nil {
			f.setBlocked(*init.Blocked)
		}
		if r := init.ClockRate; r != nil && *r > 0 && !math.IsInf(*r, 0) {
			f.clock.rate = *r // the first reading anchors at it
		}
		if d := init.Delay; d != nil {
			if err := d.validate(); err != nil {
				f.log.Error("ignoring bad delay in "+FaultsEnv, "err", err)
			} else {
				f.delay.Store(&delayState{DelayJSON: *d})
			}
		}
		if d := init.Fsync; d != nil {
			if err := d.validate(); err != nil {
				f.log.Error("ignoring bad fsync in "+FaultsEnv, "err", err)
			} else {
				f.fsync.Store(&fsyncState{FsyncJSON: *d})
			}
		}
		f.log.Warn("jepsen faults from the environment", "blocked", f.blockedList(), "clock_rate", f.clock.rate,
			"delay", f.delay.Load().DelayJSON, "fsync", f.fsync.Load().FsyncJSON)
	}
	return faultHooks{f}
}

// FaultsEnv names the environment variable with a process's initial
// faults (jepsen builds only).
const FaultsEnv = "EDICTKV_JEPSEN_FAULTS"

func (f *faults) setBlocked(ids []uint64) {
	m := map[edict.ProcessID]bool{}
	for _, id := range ids {
		m[edict.ProcessID(id)] = true
	}
	f.blocked.Store(&m)
}

func (f *faults) isBlocked(id edict.ProcessID) bool { return (*f.blocked.Load())[id] }

func (f *faults) blockedList() []uint64 {
	out := []uint64{}
	for id := range *f.blocked.Load() {
		out = append(out, uint64(id))
	}
	slices.Sort(out)
	return out
}

// wrapStore returns s with the fsync fault in front of its durable
// batches.
func (f *faults) wrapStore(s StatsStore) StatsStore { return &slowStore{StatsStore: s, f: f} }

// slowStore delays every durable batch under the fsync fault in force
// (FsyncJSON).
type slowStore struct {
	StatsStore
	f *faults
}

// StoreBatch implements edictlog.LogStore: the wait, then the write. The
// setting is read once per batch, so a change applies from the next one.
func (s *slowStore) StoreBatch(b wire.Batch) error {
	if st := s.f.fsync.Load(); st.on() {
		d := uniformMS(st.MinMS, max(st.MinMS, st.MaxMS))
		s.f.fsyncWaiting.Add(1)
		start := time.Now()
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-s.f.stop:
			t.Stop()
		}
		s.f.fsyncWaiting.Add(-1)
		st.delayed.Add(1)
		st.delayedNanos.Add(uint64(time.Since(start)))
	}
	return s.StatsStore.StoreBatch(b)
}

func (f *faults) wrapTransport(t *transport.TCP) edictlog.Transport {
	return newFaultyTransport(t, f)
}

// wrapClock returns the rate-scaled view of c, the clock the Node would
// read (edictlog.Config.WrapClock); every call returns the same clock (there is
// one per process).
func (f *faults) wrapClock(c edict.Clock) edict.Clock {
	f.clock.mu.Lock()
	f.clock.inner = c
	f.clock.mu.Unlock()
	return &f.clock
}

func (f *faults) routes(s *httpapi.Server) {
	s.Handle("GET /debug/jepsen/faults", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httpapi.WriteJSON(w, http.StatusOK, f.current())
	}))
	s.Handle("POST /debug/jepsen/faults", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req FaultsJSON
		b, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
		if err == nil {
			err = json.Unmarshal(b, &req)
		}
		if err != nil {
			httpapi.WriteError(w, http.StatusBadRequest, kvjson.CodeInvalidRequest, fmt.Sprintf("faults body: %v", err))
			return
		}
		if req.ClockRate != nil {
			if r := *req.ClockRate; !(r > 0) || math.IsInf(r, 0) {
				httpapi.WriteError(w, http.StatusBadRequest, kvjson.CodeInvalidRequest, "clock_rate must be positive and finite")
				return
			}
		}
		if req.Delay != nil {
			if err := req.Delay.validate(); err != nil {
				httpapi.WriteError(w, http.StatusBadRequest, kvjson.CodeInvalidRequest, err.Error())
				return
			}
		}
		if req.Fsync != nil {
			if err := req.Fsync.validate(); err != nil {
				httpapi.WriteError(w, http.StatusBadRequest, kvjson.CodeInvalidRequest, err.Error())
				return
			}
		}
		if req.Blocked != nil {
			f.setBlocked(*req.Blocked)
		}
		if req.ClockRate != nil {
			f.clock.setRate(*req.ClockRate)
		}
		if req.Delay != nil {
			f.delay.Store(&delayState{DelayJSON: *req.Delay})
		}
		if req.Fsync != nil {
			f.fsync.Store(&fsyncState{FsyncJSON: *req.Fsync})
		}
		cur := f.current()
		f.log.Warn("jepsen faults set", "blocked", *cur.Blocked, "clock_rate", *cur.ClockRate, "delay", *cur.Delay, "fsync", *cur.Fsync)
		httpapi.WriteJSON(w, http.StatusOK, cur)
	}))
}

// serverClosed tells the deliveries to the Node that the process's Server
// has stopped (forward); the process calls it when it closes the Server.
func (f *faults) serverClosed() { f.stopped.Do(func() { close(f.stop) }) }

func (f *faults) current() FaultsJSON {
	bl := f.blockedList()
	rate := f.clock.getRate()
	d := f.delay.Load()
	dj := d.DelayJSON
	fs := f.fsync.Load()
	fj := fs.FsyncJSON
	st := FaultStatsJSON{Held: d.held.Load(), Duplicated: d.duplicated.Load(), Reordered: d.reordered.Load(),
		SnapshotsHeld: d.snapsHeld.Load(), SnapshotsHolding: f.snapsHolding.Load(),
		SnapshotsReceived: f.snapsReceived.Load(), SnapshotsSending: f.snapsSending.Load(),
		SnapshotsInstalled: f.snapsInstalled.Load(), SnapshotsFailed: f.snapsFailed.Load(),
		FsyncDelayed: fs.delayed.Load(), FsyncDelayMS: fs.delayedNanos.Load() / uint64(time.Millisecond),
		FsyncWaiting: f.fsyncWaiting.Load()}
	return FaultsJSON{Blocked: &bl, ClockRate: &rate, Delay: &dj, Fsync: &fj, Stats: &st}
}

// faultyTransport drops every message and snapshot stream to or from a
// blocked process, silently: Send reports success, as for a message a
// network loses. Under the delay fault it holds, duplicates and reorders
// what it receives (DelayJSON).
type faultyTransport struct {
	*transport.TCP
	f     *faults
	recv  chan wire.Message
	snaps chan *wire.IncomingSnapshot
}

func newFaultyTransport(t *transport.TCP, f *faults) *faultyTransport {
	ft := &faultyTransport{TCP: t, f: f, recv: make(chan wire.Message), snaps: make(chan *wire.IncomingSnapshot)}
	go forward(t.Receive(), ft.recv, f, func(m wire.Message) edict.ProcessID { return m.From }, f.planMessage, nil)
	go forward(t.Snapshots(), ft.snaps, f, func(in *wire.IncomingSnapshot) edict.ProcessID { return in.From }, f.planSnapshot,
		// The stream's sender sees a failed transfer, as when a network
		// cuts the connection.
		func(in *wire.IncomingSnapshot) { _ = in.Finish(transport.ErrUnreachable) })
	return ft
}

// delivery is one value to hand to the Node after a hold; done, if set,
// runs once it is handed over (ok) or dropped.
type delivery[T any] struct {
	v    T
	hold time.Duration
	done func(ok bool)
}

// planMessage decides, under the delay fault in force, when m reaches the
// Node, and whether a copy of it does too.
func (f *faults) planMessage(m wire.Message) []delivery[wire.Message] {
	d := f.delay.Load()
	if !d.on() {
		return []delivery[wire.Message]{{v: m}}
	}
	first := delivery[wire.Message]{v: m}
	if d.P > 0 && rand.Float64() < d.P {
		first.hold = uniformMS(d.MinMS, d.MaxMS)
		d.held.Add(1)
	} else if d.Reorder > 0 && rand.Float64() < d.Reorder {
		// A short hold lets the messages right behind overtake this one.
		r := d.ReorderMS
		if r == 0 {
			r = 20
		}
		first.hold = uniformMS(1, r)
		d.reordered.Add(1)
	}
	out := []delivery[wire.Message]{first}
	if d.Dup > 0 && rand.Float64() < d.Dup {
		// The copy comes late, possibly much later than the original:
		// by then it is a stale message of an earlier exchange or reign.
		out = append(out, delivery[wire.Message]{v: deepCopy(m), hold: uniformMS(0, d.MaxMS)})
		d.duplicated.Add(1)
	}
	return out
}

// planSnapshot holds an incoming snapshot stream under the delay fault; it
// counts the streams handed to the Node and logs each.
func (f *faults) planSnapshot(in *wire.IncomingSnapshot) []delivery[*wire.IncomingSnapshot] {
	d := f.delay.Load()
	out := delivery[*wire.IncomingSnapshot]{v: in}
	if d.SnapshotMS > 0 {
		out.hold = uniformMS(d.SnapshotMS/2, d.SnapshotMS)
		d.snapsHeld.Add(1)
		f.snapsHolding.Add(1)
	}
	hold := out.hold
	out.done = func(ok bool) {
		if hold > 0 {
			f.snapsHolding.Add(-1)
		}
		if !ok {
			return
		}
		f.snapsReceived.Add(1)
		f.log.Info("jepsen snapshot received", "from", uint64(in.From), "index", in.Header.LastIndex,
			"bytes", in.Header.Size, "held_ms", hold.Milliseconds())
	}
	return []delivery[*wire.IncomingSnapshot]{out}
}

// uniformMS is a uniform duration in [lo, hi] milliseconds.
func uniformMS(lo, hi int) time.Duration {
	if hi <= lo {
		return time.Duration(lo) * time.Millisecond
	}
	return time.Duration(lo)*time.Millisecond + rand.N(time.Duration(hi-lo)*time.Millisecond)
}

// forward passes what arrives on in to out, except what comes from a
// blocked process, each value when plan says (and again, for a duplicate),
// and closes out when in closes (as the TCP transport closes its channels
// at Close) once no held value can still be handed over. Once the
// process's server has stopped, a value the Node does not take at once is
// dropped, so that the goroutines end with the transport even though the
// Node no longer reads. A held value whose sender is blocked by the time it
// is due is dropped.
func forward[T any](in <-chan T, out chan<- T, f *faults, from func(T) edict.ProcessID, plan func(T) []delivery[T], drop func(T)) {
	closing := make(chan struct{})
	var held sync.WaitGroup
	defer func() {
		close(closing)
		held.Wait()
		close(out)
	}()
	give := func(v T) bool {
		select {
		case out <- v:
			return true
		case <-closing:
			return false
		case <-f.stop:
			select {
			case out <- v:
				return true
			default:
				return false
			}
		}
	}
	finish := func(dv delivery[T], ok bool) {
		if dv.done != nil {
			dv.done(ok)
		}
		if !ok && drop != nil {
			drop(dv.v)
		}
	}
	for v := range in {
		if f.isBlocked(from(v)) {
			finish(delivery[T]{v: v}, false)
			continue
		}
		for _, dv := range plan(v) {
			if dv.hold <= 0 {
				finish(dv, give(dv.v))
				continue
			}
			held.Add(1)
			go func() {
				defer held.Done()
				t := time.NewTimer(dv.hold)
				defer t.Stop()
				select {
				case <-t.C:
				case <-closing:
					finish(dv, false)
					return
				}
				finish(dv, !f.isBlocked(from(dv.v)) && give(dv.v))
			}()
		}
	}
}

func (t *faultyTransport) Send(ctx context.Context, to edict.ProcessID, m wire.Message) error {
	if t.f.isBlocked(to) {
		return nil
	}
	return t.TCP.Send(ctx, to, m)
}

// snapshotDropWait is how long a snapshot stream to a blocked process
// "hangs" before it fails, as a stream into a partition would, rather than
// failing at once and being retried in a tight loop.
const snapshotDropWait = 5 * time.Second

func (t *faultyTransport) SendSnapshot(ctx context.Context, to edict.ProcessID, meta wire.SnapshotHeader, r io.Reader) error {
	t.f.snapsSending.Add(1)
	start := time.Now()
	err := t.sendSnapshot(ctx, to, meta, r)
	t.f.snapsSending.Add(-1)
	// The harness counts installs from these lines (the counters restart
	// with the process; the log does not).
	if err == nil {
		t.f.snapsInstalled.Add(1)
		t.f.log.Info("jepsen snapshot sent", "peer", uint64(to), "index", meta.LastIndex, "bytes", meta.Size,
			"ms", time.Since(start).Milliseconds(), "installed", true)
	} else {
		t.f.snapsFailed.Add(1)
		t.f.log.Info("jepsen snapshot sent", "peer", uint64(to), "index", meta.LastIndex, "bytes", meta.Size,
			"ms", time.Since(start).Milliseconds(), "installed", false, "err", err.Error())
	}
	return err
}

func (t *faultyTransport) sendSnapshot(ctx context.Context, to edict.ProcessID, meta wire.SnapshotHeader, r io.Reader) error {
	if t.f.isBlocked(to) {
		timer := time.NewTimer(snapshotDropWait)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-ctx.Done():
		}
		return fmt.Errorf("%w: %d (jepsen partition)", transport.ErrUnreachable, to)
	}
	return t.TCP.SendSnapshot(ctx, to, meta, r)
}

func (t *faultyTransport) Receive() <-chan wire.Message { return t.recv }

func (t *faultyTransport) Snapshots() <-chan *wire.IncomingSnapshot { return t.snaps }

// deepCopy copies v and everything it points to (exported and unexported
// fields are copied by value first; pointers, slices and maps reachable
// through exported fields are copied anew), so that a duplicate message
// shares no memory with the original, as two decodes of one frame would
// not.
func deepCopy[T any](v T) T {
	rv := reflect.ValueOf(&v).Elem()
	out := reflect.New(rv.Type()).Elem()
	copyValue(out, rv)
	return out.Interface().(T)
}

func copyValue(dst, src reflect.Value) {
	switch src.Kind() {
	case reflect.Pointer:
		if src.IsNil() {
			return
		}
		p := reflect.New(src.Type().Elem())
		copyValue(p.Elem(), src.Elem())
		dst.Set(p)
	case reflect.Slice:
		if src.IsNil() {
			return
		}
		s := reflect.MakeSlice(src.Type(), src.Len(), src.Len())
		for i := range src.Len() {
			copyValue(s.Index(i), src.Index(i))
		}
		dst.Set(s)
	case reflect.Map:
		if src.IsNil() {
			return
		}
		m := reflect.MakeMapWithSize(src.Type(), src.Len())
		for it := src.MapRange(); it.Next(); {
			k := reflect.New(src.Type().Key()).Elem()
			copyValue(k, it.Key())
			e := reflect.New(src.Type().Elem()).Elem()
			copyValue(e, it.Value())
			m.SetMapIndex(k, e)
		}
		dst.Set(m)
	case reflect.Struct:
		dst.Set(src)
		for i := range src.NumField() {
			if dst.Field(i).CanSet() {
				copyValue(dst.Field(i), src.Field(i))
			}
		}
	case reflect.Array:
		for i := range src.Len() {
			copyValue(dst.Index(i), src.Index(i))
		}
	default:
		dst.Set(src)
	}
}

// rateClock is the Node's clock scaled to run at rate relative to the raw
// clock: now = anchor + (raw - anchorRaw) * rate, re-anchored at every
// rate change so that the reading never jumps. Until a rate other than 1
// is set it reads exactly the raw clock.
type rateClock struct {
	mu    sync.Mutex
	inner edict.Clock
	rate  float64
	inc   uint64    // incarnation the segments belong to
	segs  []segment // rate segments, oldest first; the last is current
	last  int64     // last scaled reading, for strictness
}

type segment struct {
	raw, scaled int64 // anchor readings
	rate        float64
}

func (s segment) scale(raw int64) int64 {
	return s.scaled + int64(math.Round(float64(raw-s.raw)*s.rate))
}

func (s segment) unscale(scaled int64) int64 {
	return s.raw + int64(math.Round(float64(scaled-s.scaled)/s.rate))
}

// sync starts the segments afresh when the incarnation changes (the raw
// clock is new); mu is held.
func (c *rateClock) sync(raw edict.Time) {
	if raw.Incarnation != c.inc || len(c.segs) == 0 {
		c.inc = raw.Incarnation
		c.segs = []segment{{raw: raw.Nanos, scaled: raw.Nanos, rate: c.rate}}
		c.last = raw.Nanos - 1
	}
}

func (c *rateClock) Now() edict.Time {
	raw := c.inner.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sync(raw)
	n := c.segs[len(c.segs)-1].scale(raw.Nanos)
	if n <= c.last {
		n = c.last + 1
	}
	c.last = n
	return edict.Time{Incarnation: raw.Incarnation, Nanos: n}
}

func (c *rateClock) Suspended(since edict.Time) bool {
	c.mu.Lock()
	rawSince := since
	if since.Incarnation == c.inc && len(c.segs) > 0 {
		i := len(c.segs) - 1
		for i > 0 && c.segs[i].scaled > since.Nanos {
			i--
		}
		rawSince.Nanos = c.segs[i].unscale(since.Nanos)
	}
	c.mu.Unlock()
	return c.inner.Suspended(rawSince)
}

func (c *rateClock) setRate(rate float64) {
	if c.inner == nil {
		c.mu.Lock()
		c.rate = rate
		c.mu.Unlock()
		return
	}
	raw := c.inner.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rate = rate
	c.sync(raw)
	n := max(c.segs[len(c.segs)-1].scale(raw.Nanos), c.last+1)
	c.last = n
	c.segs = append(c.segs, segment{raw: raw.Nanos, scaled: n, rate: rate})
}

func (c *rateClock) getRate() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rate
}
