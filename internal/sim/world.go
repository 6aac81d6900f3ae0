package sim

import (
	"container/heap"
	"math/rand/v2"
	"time"
)

// quantum is the spacing of events: all event times are multiples of it,
// so that two readings of one clock at different events always differ.
const quantum = int64(Resolution)

// Resolution is the simulator's clock tick: every event happens at a
// multiple of it, so a timer fires up to one Resolution after the instant
// its deadline is reached, and a timeout "strictly after T" fires at
// T+Resolution. A bound derived in the papers' continuous time gains one
// Resolution per timer in its chain.
const Resolution = time.Microsecond

func quantize(t int64) int64 {
	if r := t % quantum; r != 0 {
		t += quantum - r
	}
	return t
}

type event struct {
	at  int64
	seq uint64
	run func()
}

type eventQueue []*event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(*event)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// world is the event loop and the source of all randomness of a run.
type world struct {
	rng    *rand.Rand
	now    int64
	seq    uint64
	queue  eventQueue
	events int
}

func newWorld(seed uint64) *world {
	return &world{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// at schedules run at real time t (never before now).
func (w *world) at(t int64, run func()) {
	t = quantize(max(t, w.now))
	w.seq++
	heap.Push(&w.queue, &event{at: t, seq: w.seq, run: run})
}

// after schedules run d after now.
func (w *world) after(d time.Duration, run func()) { w.at(w.now+int64(d), run) }

// step runs the next event; it returns false when none is left before end.
func (w *world) step(end int64) bool {
	if len(w.queue) == 0 {
		return false
	}
	if w.queue[0].at > end {
		return false // left queued: a scripted run goes on past end later
	}
	e := heap.Pop(&w.queue).(*event)
	// Real time strictly increases between events (see package doc).
	if e.at <= w.now && w.events > 0 {
		e.at = w.now + quantum
	}
	w.now = e.at
	w.events++
	e.run()
	return true
}

// between returns a uniform duration in [lo, hi].
func (w *world) between(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(w.rng.Int64N(int64(hi-lo)+1))
}

func (w *world) chance(p float64) bool { return p > 0 && w.rng.Float64() < p }
