package replog

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect"
	"github.com/edictlog/edictlog/wire"
	"github.com/stretchr/testify/require"
)

// tcluster drives Cores by hand: one shared clock, a message queue the
// test delivers, and per-process records of what was persisted and
// applied, standing in for the stores and the state machine.
type tcluster struct {
	t       *testing.T
	now     int64
	inc     map[edict.ProcessID]uint64
	cores   map[edict.ProcessID]*Core
	dets    map[edict.ProcessID]*elect.LowestLive
	down    map[edict.ProcessID]bool
	queue   []wire.Message
	applied map[edict.ProcessID][]wire.Entry
	reads   map[edict.ProcessID][]ReadState
	events  map[edict.ProcessID][]Event
	// stored is each process's durable log, as the store would hold it.
	stored   map[edict.ProcessID][]wire.Entry
	stable   map[edict.ProcessID]map[string][]byte
	snapReqs map[edict.ProcessID][]edict.ProcessID
	epoch0   wire.EpochConfig
	// slow gives a process a disk whose writes take this long: its
	// batches, and the messages that wait for them, are queued in disk
	// and written in order once due (writeDue, which settle calls); a
	// crash loses what is queued. Others' stores are synchronous.
	slow map[edict.ProcessID]time.Duration
	disk map[edict.ProcessID][]queuedWrite
	// sent, if set, sees every message as it leaves its sender.
	sent func(wire.Message)
}

// queuedWrite is a batch on a slow disk.
type queuedWrite struct {
	seq   uint64
	batch wire.Batch
	after []wire.Message
	due   int64
}

func newTCluster(t *testing.T, ids ...edict.ProcessID) *tcluster {
	c := &tcluster{t: t, now: int64(time.Hour), inc: map[edict.ProcessID]uint64{}, cores: map[edict.ProcessID]*Core{},
		dets: map[edict.ProcessID]*elect.LowestLive{}, down: map[edict.ProcessID]bool{},
		applied: map[edict.ProcessID][]wire.Entry{}, reads: map[edict.ProcessID][]ReadState{},
		events: map[edict.ProcessID][]Event{}, stored: map[edict.ProcessID][]wire.Entry{},
		stable: map[edict.ProcessID]map[string][]byte{}, snapReqs: map[edict.ProcessID][]edict.ProcessID{}, epoch0: wire.EpochConfig{Epoch: 0, Members: ids},
		slow: map[edict.ProcessID]time.Duration{}, disk: map[edict.ProcessID][]queuedWrite{}}
	for _, id := range ids {
		c.stable[id] = map[string][]byte{}
		c.boot(id, []wire.EpochConfig{c.epoch0})
	}
	return c
}

func (c *tcluster) boot(id edict.ProcessID, epochs []wire.EpochConfig) {
	c.inc[id]++
	det := elect.NewLowestLive(id, epochs[len(epochs)-1].Members, time.Second)
	c.dets[id] = det
	var recs []wire.EpochRecord
	for k, v := range c.stable[id] {
		if r, err := wire.DecodeEpochRecord(k, v); err == nil && len(k) > 0 && k[len(k)-5:] == "wedge" {
			recs = append(recs, r)
		}
	}
	var reign edict.Stamp
	if b, ok := c.stable[id][wire.KeyAcceptedReign]; ok {
		r, err := wire.DecodeStamp(wire.KeyAcceptedReign, b)
		require.NoError(c.t, err)
		reign = r
	}
	clean, err := cleanStopBefore(stableMap(c.stable[id]), c.inc[id])
	require.NoError(c.t, err)
	core, err := NewCore(CoreConfig{ID: id, Elect: elect.Config{Detector: det, Rand: rand.New(rand.NewPCG(uint64(id), c.inc[id])),
		// The transcripts (testdata/*.txt) were written for a 200 ms
		// renewal interval and a renewal half an interval early; their
		// stories time lease ends by them.
		RenewInterval: 200 * time.Millisecond, RenewLead: 100 * time.Millisecond}},
		State{Epochs: epochs, Records: recs, AcceptedReign: reign, Entries: slices.Clone(c.stored[id]), CleanStop: clean}, c.reading(id))
	require.NoError(c.t, err)
	c.cores[id] = core
	c.applied[id] = nil
	c.down[id] = false
	c.collect(id)
}

func (c *tcluster) reading(id edict.ProcessID) edict.Time {
	c.now += int64(time.Microsecond)
	return edict.Time{Incarnation: c.inc[id], Nanos: c.now}
}

func (c *tcluster) advance(d time.Duration) { c.now += int64(d) }

// collect runs Ready cycles: persist, send, apply, Advance, Synced.
func (c *tcluster) collect(id edict.ProcessID) {
	core := c.cores[id]
	for {
		rd := core.Ready()
		if rd.IsEmpty() {
			return
		}
		c.send(rd.Immediate...)
		queued := rd.Sync != 0 && (c.slow[id] > 0 || len(c.disk[id]) > 0)
		if queued {
			c.disk[id] = append(c.disk[id], queuedWrite{seq: rd.Sync, batch: rd.Batch, after: rd.Messages, due: c.now + int64(c.slow[id])})
		} else {
			c.store(id, rd.Batch)
			c.send(rd.Messages...)
		}
		for _, e := range rd.Apply {
			c.applied[id] = append(c.applied[id], e)
		}
		c.reads[id] = append(c.reads[id], rd.Reads...)
		c.events[id] = append(c.events[id], rd.Events...)
		c.snapReqs[id] = append(c.snapReqs[id], rd.Snapshots...)
		core.Advance(c.reading(id), rd)
		if rd.Sync != 0 && !queued {
			// A synchronous store: the batch is durable.
			core.Synced(c.reading(id), rd.Sync)
		}
		if n := len(c.applied[id]); n > 0 {
			core.Applied(c.reading(id), c.applied[id][n-1].Index)
		}
	}
}

func (c *tcluster) send(ms ...wire.Message) {
	if c.sent != nil {
		for _, m := range ms {
			c.sent(m)
		}
	}
	c.queue = append(c.queue, ms...)
}

// writeDue completes the writes of id's slow disk that are due: each
// batch is stored, the messages that waited for it leave, and the Core
// is told.
func (c *tcluster) writeDue(id edict.ProcessID) {
	for len(c.disk[id]) > 0 && c.disk[id][0].due <= c.now && !c.down[id] {
		w := c.disk[id][0]
		c.disk[id] = c.disk[id][1:]
		c.store(id, w.batch)
		c.send(w.after...)
		c.cores[id].Synced(c.reading(id), w.seq)
		c.collect(id)
	}
}

// crash stops id and loses what its disk had not written.
func (c *tcluster) crash(id edict.ProcessID) {
	c.down[id] = true
	c.disk[id] = nil
}

// storedEpochs are the epoch configurations id's stores hold, for a
// restart (boot) after a membership change.
func (c *tcluster) storedEpochs(id edict.ProcessID) []wire.EpochConfig {
	var eps []wire.EpochConfig
	for k, v := range c.stable[id] {
		if ec, err := wire.DecodeEpochConfig(k, v); err == nil && strings.HasSuffix(k, "/config") {
			eps = append(eps, ec)
		}
	}
	if len(eps) == 0 {
		return []wire.EpochConfig{c.epoch0}
	}
	slices.SortFunc(eps, func(a, b wire.EpochConfig) int { return cmp.Compare(a.Epoch, b.Epoch) })
	return eps
}

// store makes b durable in id's stores, as a synchronous store would.
func (c *tcluster) store(id edict.ProcessID, b wire.Batch) {
	log := c.stored[id]
	if b.Reset != nil {
		log = nil
	}
	if b.TruncateFrom != 0 {
		for i, e := range log {
			if e.Index >= b.TruncateFrom {
				log = log[:i]
				break
			}
		}
	}
	c.stored[id] = append(log, b.Entries...)
	for k, v := range b.Stable {
		c.stable[id][k] = v
	}
}

func (c *tcluster) tick(id edict.ProcessID) {
	c.cores[id].Tick(c.reading(id))
	c.collect(id)
}

func (c *tcluster) tickAll() {
	for _, id := range c.ids() {
		if !c.down[id] {
			c.tick(id)
		}
	}
}

func (c *tcluster) ids() []edict.ProcessID {
	var ids []edict.ProcessID
	for id := range c.cores {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// deliver delivers queued messages until none is left, dropping those the
// filter refuses and those to processes that are down.
func (c *tcluster) deliver(keep func(wire.Message) bool) {
	for n := 0; len(c.queue) > 0; n++ {
		require.Less(c.t, n, 100000, "messages keep coming")
		m := c.queue[0]
		c.queue = c.queue[1:]
		if c.down[m.To] || c.down[m.From] || c.cores[m.To] == nil || keep != nil && !keep(m) {
			continue
		}
		require.NoError(c.t, c.cores[m.To].Step(c.reading(m.To), m))
		c.collect(m.To)
	}
}

// settle ticks and delivers for a while of virtual time.
func (c *tcluster) settle(d time.Duration, keep func(wire.Message) bool) {
	for end := c.now + int64(d); c.now < end; {
		c.advance(5 * time.Millisecond)
		for _, id := range c.ids() {
			c.writeDue(id)
		}
		c.tickAll()
		c.deliver(keep)
	}
}

func (c *tcluster) leader() edict.ProcessID {
	var l edict.ProcessID
	for _, id := range c.ids() {
		if !c.down[id] && c.cores[id].CanServeLease(c.reading(id)) {
			require.Equal(c.t, edict.None, l, "two leaders serve reads")
			l = id
		}
	}
	return l
}

func (c *tcluster) propose(id edict.ProcessID, data string) wire.Entry {
	e, err := c.cores[id].Propose(c.reading(id), wire.EntryCommand, []byte(data))
	require.NoError(c.t, err)
	c.cores[id].Flush(c.reading(id))
	c.collect(id)
	return e
}

func appliedData(es []wire.Entry) []string {
	var out []string
	for _, e := range es {
		if e.Kind == wire.EntryCommand {
			out = append(out, string(e.Data))
		}
	}
	return out
}

func obsDown(p edict.ProcessID) elect.Observation {
	return elect.Observation{Kind: elect.ProcessDown, Process: p}
}

// addLearnerWhileDown has p1, the leader, add p4 as a learner (address
// "addr-4") and commit ten entries while process down is cut off, so that
// down misses the config edict.
func (c *tcluster) addLearnerWhileDown(down edict.ProcessID) {
	c.settle(50*time.Millisecond, nil)
	c.down[down] = true
	c.stable[4] = map[string][]byte{}
	c.boot(4, []wire.EpochConfig{c.epoch0})
	_, err := c.cores[1].AddLearner(c.reading(1), 4, "addr-4")
	require.NoError(c.t, err)
	c.cores[1].Flush(c.reading(1))
	c.collect(1)
	for i := range 10 {
		c.propose(1, fmt.Sprintf("v%d", i))
	}
	c.settle(100*time.Millisecond, nil)
}

// joinLearner boots p4 with an empty store and has p1, the leader, add it
// as a learner and catch it up with the entry "before".
func (c *tcluster) joinLearner() {
	c.settle(50*time.Millisecond, nil)
	c.propose(1, "before")
	c.stable[4] = map[string][]byte{}
	c.boot(4, []wire.EpochConfig{c.epoch0})
	_, err := c.cores[1].AddLearner(c.reading(1), 4, "addr-4")
	require.NoError(c.t, err)
	c.cores[1].Flush(c.reading(1))
	c.collect(1)
	c.settle(200*time.Millisecond, nil)
}

// stableMap reads a process's stable records as a store's Get would.
type stableMap map[string][]byte

func (m stableMap) Get(k string) ([]byte, error) {
	if v, ok := m[k]; ok {
		return v, nil
	}
	return nil, fmt.Errorf("stable key %q: %w", k, wire.ErrNotFound)
}
