package elect

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
	"github.com/stretchr/testify/require"
)

// cluster is a hand-driven set of cores sharing one clock rate, with a
// message queue the test delivers explicitly.
type cluster struct {
	t      *testing.T
	now    int64 // nanoseconds, common to all clocks
	inc    map[edict.ProcessID]uint64
	cores  map[edict.ProcessID]*Core
	dets   map[edict.ProcessID]*LowestLive
	queue  []wire.Lease
	events map[edict.ProcessID][]Event
	stored map[edict.ProcessID][]wire.EpochRecord
}

func testConfig(id edict.ProcessID, members []edict.ProcessID, det Detector) Config {
	return Config{
		ID:       id,
		Epochs:   []wire.EpochConfig{{Epoch: 0, Members: slices.Sorted(slices.Values(members))}},
		Detector: det,
		Rand:     rand.New(rand.NewPCG(uint64(id), 1)),
	}
}

func newCluster(t *testing.T, ids ...edict.ProcessID) *cluster {
	c := &cluster{t: t, now: int64(time.Hour), inc: map[edict.ProcessID]uint64{}, cores: map[edict.ProcessID]*Core{},
		dets: map[edict.ProcessID]*LowestLive{}, events: map[edict.ProcessID][]Event{}, stored: map[edict.ProcessID][]wire.EpochRecord{}}
	for _, id := range ids {
		c.start(id, 1, testConfig(id, ids, nil))
	}
	return c
}

func (c *cluster) start(id edict.ProcessID, inc uint64, cfg Config) {
	c.inc[id] = inc
	det := NewLowestLive(id, cfg.Epochs[0].Members, time.Second)
	c.dets[id] = det
	cfg.Detector = det
	core, err := New(cfg, c.stored[id], c.reading(id))
	require.NoError(c.t, err)
	c.cores[id] = core
}

func (c *cluster) reading(id edict.ProcessID) edict.Time {
	c.now += int64(time.Microsecond) // every call gets a fresh reading
	return edict.Time{Incarnation: c.inc[id], Nanos: c.now}
}

func (c *cluster) advance(d time.Duration) { c.now += int64(d) }

// collect moves a core's Ready into the queue, events and stored records.
func (c *cluster) collect(id edict.ProcessID) {
	rd := c.cores[id].Ready()
	c.stored[id] = append(c.stored[id], rd.Persist...)
	c.queue = append(c.queue, rd.Messages...)
	c.events[id] = append(c.events[id], rd.Events...)
}

func (c *cluster) tick(id edict.ProcessID) {
	c.cores[id].Tick(c.reading(id))
	c.collect(id)
}

// deliver delivers queued messages until none is left, dropping those the
// filter refuses.
func (c *cluster) deliver(keep func(wire.Lease) bool) {
	for len(c.queue) > 0 {
		m := c.queue[0]
		c.queue = c.queue[1:]
		if keep != nil && !keep(m) || c.cores[m.To] == nil {
			continue
		}
		require.NoError(c.t, c.cores[m.To].Step(c.reading(m.To), m))
		c.collect(m.To)
	}
}

// holdBack delivers queued messages until none is left, as deliver does,
// except those held, which it returns undelivered: the test lets them
// arrive later.
func (c *cluster) holdBack(held func(wire.Lease) bool) []wire.Lease {
	var out []wire.Lease
	c.deliver(func(m wire.Lease) bool {
		if held(m) {
			out = append(out, m)
			return false
		}
		return true
	})
	return out
}

func (c *cluster) lastEvent(id edict.ProcessID, kind EventKind) (Event, bool) {
	es := c.events[id]
	for i := len(es) - 1; i >= 0; i-- {
		if es[i].Kind == kind {
			return es[i], true
		}
	}
	return Event{}, false
}

// elect makes id leader: it is the lowest id, so the detector names it.
func (c *cluster) elect(id edict.ProcessID) {
	c.tick(id)
	c.deliver(nil)
	require.True(c.t, c.cores[id].IsLeader(c.reading(id)), "%v should lead", id)
}

// learnEpoch makes cfg known to every core in ids, as a committed stop
// edict would.
func (c *cluster) learnEpoch(cfg wire.EpochConfig, ids ...edict.ProcessID) {
	for _, id := range ids {
		require.NoError(c.t, c.cores[id].AddEpoch(cfg))
	}
}

// act runs f at id and delivers what follows.
func (c *cluster) act(id edict.ProcessID, f func(*Core, edict.Time)) {
	f(c.cores[id], c.reading(id))
	c.collect(id)
	c.deliver(nil)
}
