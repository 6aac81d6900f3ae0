//go:build jepsen

package kvserver

// Test-only fault injection for the Jepsen harness (jepsen/cluster),
// compiled in only with the build tag jepsen. A process built so serves
//
//	GET  /debug/jepsen/faults  → FaultsJSON (the current settings)
//	POST /debug/jepsen/faults  ← FaultsJSON; an absent field is unchanged
//
// blocked lists process ids whose log traffic (messages and snapshot
// streams, both directions) is dropped silently, as a network partition
// would; clock_rate makes the Node's clock run at that rate relative to
// real time from now on, continuously (no jump at a change).
//
// The environment variable EDICTKV_JEPSEN_FAULTS, if set, holds the
// settings (a FaultsJSON) the process starts with, so that a process
// restarted inside a partition is partitioned from its first message.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/transport"
)

// FaultsJSON is the body of /debug/jepsen/faults (jepsen builds only).
// In a POST a nil field leaves its setting as it is.
type FaultsJSON struct {
	Blocked   *[]uint64 `json:"blocked,omitempty"`
	ClockRate *float64  `json:"clock_rate,omitempty"`
}

// faultHooks holds one process's injected faults.
type faultHooks struct{ *faults }

type faults struct {
	log     *slog.Logger
	stop    chan struct{} // closed when the process's Server stops
	blocked atomic.Pointer[map[edict.ProcessID]bool]
	clock   rateClock
}

func newFaultHooks(p *Process) faultHooks {
	f := &faults{log: p.log.With("component", "jepsen-faults"), stop: make(chan struct{})}
	f.blocked.Store(&map[edict.ProcessID]bool{})
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
		f.log.Warn("jepsen faults from the environment", "blocked", f.blockedList(), "clock_rate", f.clock.rate)
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

func (f *faults) wrapTransport(t *transport.TCP) transport.Transport {
	return newFaultyTransport(t, f)
}

// wrapClock returns the rate-scaled view of c; every call returns the same
// clock (there is one per process).
func (f *faults) wrapClock(c *lazyClock) edict.Clock {
	f.clock.mu.Lock()
	f.clock.inner = c
	f.clock.mu.Unlock()
	return &f.clock
}

func (f *faults) routes(s *Server) {
	go func() {
		<-s.stop
		close(f.stop)
	}()
	s.mux.HandleFunc("GET /debug/jepsen/faults", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, f.current())
	})
	s.mux.HandleFunc("POST /debug/jepsen/faults", func(w http.ResponseWriter, r *http.Request) {
		var req FaultsJSON
		b, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
		if err == nil {
			err = json.Unmarshal(b, &req)
		}
		if err != nil {
			writeError(w, errorf(http.StatusBadRequest, CodeInvalidRequest, fmt.Sprintf("faults body: %v", err)))
			return
		}
		if req.ClockRate != nil {
			if r := *req.ClockRate; !(r > 0) || math.IsInf(r, 0) {
				writeError(w, errorf(http.StatusBadRequest, CodeInvalidRequest, "clock_rate must be positive and finite"))
				return
			}
		}
		if req.Blocked != nil {
			f.setBlocked(*req.Blocked)
		}
		if req.ClockRate != nil {
			f.clock.setRate(*req.ClockRate)
		}
		cur := f.current()
		f.log.Warn("jepsen faults set", "blocked", *cur.Blocked, "clock_rate", *cur.ClockRate)
		writeJSON(w, http.StatusOK, cur)
	})
}

func (f *faults) current() FaultsJSON {
	bl := f.blockedList()
	rate := f.clock.getRate()
	return FaultsJSON{Blocked: &bl, ClockRate: &rate}
}

// faultyTransport drops every message and snapshot stream to or from a
// blocked process, silently: Send reports success, as for a message a
// network loses.
type faultyTransport struct {
	*transport.TCP
	f     *faults
	recv  chan transport.Message
	snaps chan *transport.IncomingSnapshot
}

func newFaultyTransport(t *transport.TCP, f *faults) *faultyTransport {
	ft := &faultyTransport{TCP: t, f: f, recv: make(chan transport.Message), snaps: make(chan *transport.IncomingSnapshot)}
	go forward(t.Receive(), ft.recv, f, func(m transport.Message) edict.ProcessID { return m.From }, nil)
	go forward(t.Snapshots(), ft.snaps, f, func(in *transport.IncomingSnapshot) edict.ProcessID { return in.From },
		// The stream's sender sees a failed transfer, as when a network
		// cuts the connection.
		func(in *transport.IncomingSnapshot) { _ = in.Finish(transport.ErrUnreachable) })
	return ft
}

// forward passes what arrives on in to out, except what comes from a
// blocked process, and closes out when in closes (as the TCP transport
// closes its channels at Close). Once the process's server has stopped, a
// value the Node does not take at once is dropped, so that the goroutine
// ends with the transport even though the Node no longer reads.
func forward[T any](in <-chan T, out chan<- T, f *faults, from func(T) edict.ProcessID, drop func(T)) {
	defer close(out)
	for v := range in {
		ok := false
		if !f.isBlocked(from(v)) {
			select {
			case out <- v:
				ok = true
			case <-f.stop:
				select {
				case out <- v:
					ok = true
				default:
				}
			}
		}
		if !ok && drop != nil {
			drop(v)
		}
	}
}

func (t *faultyTransport) Send(ctx context.Context, to edict.ProcessID, m transport.Message) error {
	if t.f.isBlocked(to) {
		return nil
	}
	return t.TCP.Send(ctx, to, m)
}

// snapshotDropWait is how long a snapshot stream to a blocked process
// "hangs" before it fails, as a stream into a partition would, rather than
// failing at once and being retried in a tight loop.
const snapshotDropWait = 5 * time.Second

func (t *faultyTransport) SendSnapshot(ctx context.Context, to edict.ProcessID, meta transport.SnapshotMeta, r io.Reader) error {
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

func (t *faultyTransport) Receive() <-chan transport.Message { return t.recv }

func (t *faultyTransport) Snapshots() <-chan *transport.IncomingSnapshot { return t.snaps }

// rateClock is the Node's clock scaled to run at rate relative to the raw
// clock: now = anchor + (raw - anchorRaw) * rate, re-anchored at every
// rate change so that the reading never jumps. Until a rate other than 1
// is set it reads exactly the raw clock.
type rateClock struct {
	mu    sync.Mutex
	inner *lazyClock
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
	if raw.IsZero() {
		return raw // before the first start
	}
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
	if raw.IsZero() {
		return // the first reading will anchor at this rate
	}
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
