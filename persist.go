package edictlog

import (
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edictlog/edictlog/wire"
)

// persister writes a Node's batches off the loop goroutine (Env.Persist),
// so that the loop keeps stepping lease messages while the disk is busy:
// a granter in the middle of a long fsync still answers grant requests,
// and a leader's renewals do not wait behind its own appends.
//
// It keeps the Driver's order: batches are written in the order they were
// handed over, the messages that waited for a batch leave only after it
// is durable, and Synced reaches the loop after both. Batches queued
// while the disk was busy are written together, as one transaction when
// they only append (group commit): one fsync for all of them.
type persister struct {
	n *Node

	// entries and bytes are the backlog: handed over, not yet durable.
	entries, bytes atomic.Int64

	mu      sync.Mutex
	queue   []persistJob
	wake    chan struct{} // one token: the queue changed
	closing bool          // Shutdown: write what is queued, then stop
	aborted bool          // a failure: stop without writing more
	done    chan struct{}
}

type persistJob struct {
	seq   uint64
	batch wire.Batch
	after []wire.Message
	bytes int
}

func newPersister(n *Node) *persister {
	return &persister{n: n, wake: make(chan struct{}, 1), done: make(chan struct{})}
}

// enqueue hands a batch over without waiting; the caller then wakes the
// persister (signal).
func (p *persister) enqueue(j persistJob) {
	for _, e := range j.batch.Entries {
		j.bytes += len(e.Data)
	}
	p.entries.Add(int64(len(j.batch.Entries)))
	p.bytes.Add(int64(j.bytes))
	p.mu.Lock()
	p.queue = append(p.queue, j)
	p.mu.Unlock()
}

// full reports whether the backlog has reached a bound of the Config's:
// the Node then takes no proposals and drops appends with entries.
func (p *persister) full() bool {
	return p.entries.Load() >= int64(p.n.cfg.MaxUnsyncedEntries) || p.bytes.Load() >= int64(p.n.cfg.MaxUnsyncedBytes)
}

func (p *persister) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// backlog is what is handed over and not yet durable, in entries and
// payload bytes.
func (p *persister) backlog() (entries, bytes int) {
	return int(p.entries.Load()), int(p.bytes.Load())
}

// close stops the persister once what is queued is written (Shutdown), or
// at once without writing more (abort: the Node failed).
func (p *persister) close(abort bool) {
	p.mu.Lock()
	p.closing = true
	p.aborted = p.aborted || abort
	p.mu.Unlock()
	p.signal()
}

func (p *persister) wait() { <-p.done }

func (p *persister) run() {
	defer close(p.done)
	for {
		p.mu.Lock()
		jobs := p.queue
		p.queue = nil
		closing, aborted := p.closing, p.aborted
		p.mu.Unlock()
		if aborted {
			return
		}
		if len(jobs) == 0 {
			if closing {
				return
			}
			<-p.wake
			continue
		}
		for len(jobs) > 0 {
			k := 1
			for k < len(jobs) && jobs[k].batch.AppendsOnly() {
				k++
			}
			b := merge(jobs[:k])
			if err := p.store(b); err != nil {
				return
			}
			for _, j := range jobs[:k] {
				p.n.sendAll(j.after)
				p.entries.Add(-int64(len(j.batch.Entries)))
				p.bytes.Add(-int64(j.bytes))
			}
			seq := jobs[k-1].seq
			jobs = jobs[k:]
			if !p.n.post(func() { p.n.d.Synced(seq); p.n.synced(seq) }) {
				return
			}
		}
	}
}

// store writes one batch, reporting a failure to the loop, which stops
// the Node: nothing that waited for the batch has left.
func (p *persister) store(b wire.Batch) error {
	if b.Empty() {
		return nil
	}
	start := time.Now()
	err := p.n.cfg.Store.StoreBatch(b)
	p.n.observeFsync(start, len(b.Entries))
	if err != nil {
		p.mu.Lock()
		p.aborted = true
		p.mu.Unlock()
		select {
		case p.n.fatal <- err:
		default:
		}
		return err
	}
	return nil
}

// merge joins the batches of jobs, of which all but the first only append
// (wire.Batch.AppendsOnly), into one transaction with the same effect: their entries
// follow one another, their stable changes apply in order. The entries
// are gathered into one slice allocated once: joining them pairwise copied
// the growing run again for every batch, the largest allocation of a busy
// leader (16% of its bytes under 64 writers).
func merge(jobs []persistJob) wire.Batch {
	if len(jobs) == 1 {
		return jobs[0].batch
	}
	out := jobs[0].batch
	n := 0
	stable := false
	for _, j := range jobs {
		n += len(j.batch.Entries)
		stable = stable || len(j.batch.Stable) > 0 || len(j.batch.Delete) > 0
	}
	out.Entries = make([]wire.Entry, 0, n)
	for _, j := range jobs {
		out.Entries = append(out.Entries, j.batch.Entries...)
	}
	if !stable {
		return out
	}
	out.Stable = maps.Clone(out.Stable)
	if out.Stable == nil {
		out.Stable = map[string][]byte{}
	}
	out.Delete = slices.Clone(out.Delete)
	for _, j := range jobs[1:] {
		c := j.batch
		for _, k := range c.Delete {
			delete(out.Stable, k)
			if !slices.Contains(out.Delete, k) {
				out.Delete = append(out.Delete, k)
			}
		}
		for k, v := range c.Stable {
			out.Stable[k] = v
			out.Delete = slices.DeleteFunc(out.Delete, func(d string) bool { return d == k })
		}
	}
	if len(out.Stable) == 0 {
		out.Stable = nil
	}
	return out
}

// observeFsync records how long a durable write took, and says so when it
// took long enough to threaten the lease: a granter or leader whose disk is
// this slow would have lost its lease had its loop waited for it.
func (n *Node) observeFsync(start time.Time, entries int) {
	d := time.Since(start)
	limit := n.cfg.MaxLease / 4
	n.fsync.record(d, limit > 0 && d > limit)
	if limit > 0 && d > limit {
		n.log.Warn("slow durable write", "took", d, "entries", entries, "lease", n.cfg.MaxLease)
	}
}

// StorageStats describes a Node's durable writes since it started.
type StorageStats struct {
	// Writes counts the transactions the persister committed (each one
	// fsync, each possibly several Readys' batches); WriteTime is their
	// total duration and WriteMax the longest.
	Writes    uint64
	WriteTime time.Duration
	WriteMax  time.Duration
	// SlowWrites counts those that took longer than a quarter of
	// MaxLease, each also logged as a warning.
	SlowWrites uint64
	// BacklogEntries and BacklogBytes are handed to the store and not
	// yet durable (entries, and their payload bytes).
	BacklogEntries int
	BacklogBytes   int
	// AppendsShed counts appends with entries a follower dropped while
	// its backlog was at a bound (Config.MaxUnsyncedEntries, Bytes);
	// Throttled counts the times a leader stopped taking proposals.
	AppendsShed, Throttled uint64
}

// fsyncStats is what observeFsync counts, read by StorageStats from any
// goroutine.
type fsyncStats struct {
	writes, nanos, maxNanos, slow atomic.Uint64
	shed, throttled               atomic.Uint64
}

func (s *fsyncStats) record(d time.Duration, slow bool) {
	s.writes.Add(1)
	s.nanos.Add(uint64(d))
	for {
		m := s.maxNanos.Load()
		if uint64(d) <= m || s.maxNanos.CompareAndSwap(m, uint64(d)) {
			break
		}
	}
	if slow {
		s.slow.Add(1)
	}
}

// StorageStats reports the Node's durable writes and what waits for them.
func (n *Node) StorageStats() StorageStats {
	e, b := n.persister.backlog()
	return StorageStats{
		Writes: n.fsync.writes.Load(), WriteTime: time.Duration(n.fsync.nanos.Load()),
		WriteMax: time.Duration(n.fsync.maxNanos.Load()), SlowWrites: n.fsync.slow.Load(),
		BacklogEntries: e, BacklogBytes: b,
		AppendsShed: n.fsync.shed.Load(), Throttled: n.fsync.throttled.Load(),
	}
}
