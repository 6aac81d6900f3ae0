package process

import (
	"os"
	"runtime"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"sync"
)

// DefaultHeapFloor is Config.HeapFloor's default: the heap goal the
// garbage collector is kept at, at least, while a process runs.
const DefaultHeapFloor = 64 << 20

// maxGCPercent bounds the GOGC the heap floor sets, for a heap so small
// at start that the floor is hundreds of times its size.
const maxGCPercent = 10_000

// The heap floor is one setting of the Go runtime, shared by every
// Process of the OS process (dev mode runs three): the first Process to
// start sets it, the last to stop gives the runtime its GOGC back.
//
// Why: a server's live heap is small (a few MiB of index and buffers)
// and its garbage large (each request allocates its decoded messages,
// the log's batches, bbolt's nodes), so at GOGC 100 the collector runs
// as soon as the heap doubles: tens of times a second under load. Each
// cycle takes a P for its mark worker (a quarter of the CPUs, half of a
// two-CPU machine's) and makes the allocating goroutines assist, and the
// requests in flight then wait: an execution trace of a put workload put
// half of the slowest 1% of requests' time inside a mark phase, against
// an eighth of the others'. Keeping the goal at a floor a server can
// spare, and at GOGC's own goal above it, collects a small heap a few
// times a second instead; a heap past half the floor is collected as
// GOGC says. A memory limit (GOMEMLIMIT) still bounds the heap, and an
// explicit GOGC in the environment is left alone.
var heapFloor heapFloorState

type heapFloorState struct {
	mu     sync.Mutex
	users  int
	floor  uint64
	base   int    // the GOGC the runtime had
	gen    uint64 // the cycle of sentinels that is current
	sample []rtmetrics.Sample
}

// holdHeapFloor keeps the heap goal at floor bytes or more until release
// is called (by every holder). floor <= 0 holds nothing.
func holdHeapFloor(floor int64) (release func()) {
	if floor <= 0 || os.Getenv("GOGC") != "" {
		return func() {}
	}
	h := &heapFloor
	h.mu.Lock()
	defer h.mu.Unlock()
	h.users++
	if h.users == 1 {
		h.floor = uint64(floor)
		h.base = debug.SetGCPercent(100)
		if h.base <= 0 {
			h.base = 100
		}
		h.gen++
		h.sample = []rtmetrics.Sample{{Name: "/gc/heap/live:bytes"}}
		h.tuneLocked()
		armHeapFloor(h.gen)
	}
	return sync.OnceFunc(func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.users--
		if h.users == 0 {
			h.gen++ // the sentinel of the running cycle stops there
			debug.SetGCPercent(h.base)
		}
	})
}

// tuneLocked sets GOGC so that the next goal, the live heap times
// 1+GOGC/100, is at least the floor, and at least the base GOGC's goal.
func (h *heapFloorState) tuneLocked() {
	rtmetrics.Read(h.sample)
	live := uint64(0)
	if h.sample[0].Value.Kind() == rtmetrics.KindUint64 {
		live = h.sample[0].Value.Uint64()
	}
	debug.SetGCPercent(gcPercentFor(live, h.floor, h.base))
}

// gcPercentFor is the GOGC whose goal for a live heap of live bytes is
// the floor, or base's goal if that is larger.
func gcPercentFor(live, floor uint64, base int) int {
	if live == 0 {
		return maxGCPercent
	}
	if live >= floor {
		return base
	}
	pct := (floor - live) * 100 / live
	return int(min(max(pct, uint64(base)), maxGCPercent))
}

// gcSentinel is garbage from the cycle after the one that allocated it:
// its finalizer runs once per garbage collection, and re-arms the next.
// It is larger than the runtime's tiny allocations, whose finalizers may
// wait for their neighbours.
type gcSentinel struct {
	gen uint64
	_   [24]byte
}

func armHeapFloor(gen uint64) {
	runtime.SetFinalizer(&gcSentinel{gen: gen}, afterGC)
}

func afterGC(s *gcSentinel) {
	h := &heapFloor
	h.mu.Lock()
	defer h.mu.Unlock()
	if s.gen != h.gen {
		return // released, or released and held again: that cycle has a sentinel of its own
	}
	h.tuneLocked()
	armHeapFloor(s.gen)
}
