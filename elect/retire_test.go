package elect

import (
	"testing"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A retiring granter refuses every grant request, its grantee's renewal
// included, reports Retired only once its grant has lapsed by its own
// clock, and the life after a clean stop grants at once; a life after a
// crash is quarantined as before.
func TestRetireWaitsForGrantsThenSkipsQuarantine(t *testing.T) {
	c := newCluster(t, 1, 2, 3)
	core := c.cores[3]
	req := wire.Lease{Type: wire.LeaseGrantRequest, From: 2, To: 3, Start: c.reading(2), Delta: 100 * time.Millisecond}
	require.NoError(t, core.Step(c.reading(3), req))
	c.collect(3)
	require.Len(t, c.queue, 1)
	require.Equal(t, wire.LeaseGrant, c.queue[0].Type)
	c.queue = nil
	gs, _ := core.Grant(0)

	core.Retire(c.reading(3))
	c.collect(3)
	assert.True(t, core.Retiring())
	assert.False(t, core.Retired(c.reading(3)), "its grant to p2 still stands")
	assert.Equal(t, gs.Finish, core.RetiredAt(), "retired when the grant's F_q passes")
	assert.Equal(t, gs.Finish, core.NextTick(), "the core asks to be ticked when its last grant lapses")

	renew := req
	renew.Start = c.reading(2)
	require.NoError(t, core.Step(c.reading(3), renew))
	c.collect(3)
	require.Len(t, c.queue, 1)
	assert.Equal(t, wire.LeaseNack, c.queue[0].Type, "a retiring granter refuses its grantee's renewal")
	c.queue = nil
	gs2, _ := core.Grant(0)
	assert.Equal(t, gs.Finish, gs2.Finish, "the refusal did not extend the grant")

	c.advance(100 * time.Millisecond)
	c.tick(3)
	assert.NotContains(t, kinds(c.events[3]), Retired, "F_q = now + (1+ρ)·δ: not yet")
	c.advance(time.Millisecond)
	c.tick(3)
	assert.True(t, core.Retired(c.reading(3)))
	assert.Equal(t, []EventKind{Retired}, kinds(c.events[3]))
	c.tick(3)
	assert.Equal(t, []EventKind{Retired}, kinds(c.events[3]), "reported once")

	// The next life, after the clean stop: no quarantine.
	cfg := testConfig(3, []edict.ProcessID{1, 2, 3}, nil)
	cfg.AfterCleanStop = true
	c.start(3, 2, cfg)
	assert.False(t, c.cores[3].Quarantined(c.reading(3)))
	req.Start = c.reading(1)
	req.From = 1
	require.NoError(t, c.cores[3].Step(c.reading(3), req))
	c.collect(3)
	require.Len(t, c.queue, 1)
	assert.Equal(t, wire.LeaseGrant, c.queue[0].Type, "granted at once after a clean stop")
	c.queue = nil

	// The life after that one crashed: quarantined.
	c.start(3, 3, testConfig(3, []edict.ProcessID{1, 2, 3}, nil))
	assert.True(t, c.cores[3].Quarantined(c.reading(3)))
}

// A leader that retires releases its lease first, and a process that
// retires in its own restart quarantine is retired only when the
// quarantine ends: a grant of the life before may still stand.
func TestRetireReleasesAndOutlastsQuarantine(t *testing.T) {
	c := newCluster(t, 1, 2, 3)
	c.elect(1)
	require.True(t, c.cores[1].IsLeader(c.reading(1)))
	c.cores[1].Retire(c.reading(1))
	c.collect(1)
	assert.False(t, c.cores[1].IsLeader(c.reading(1)))
	c.deliver(nil)
	c.tick(1)
	assert.True(t, c.cores[1].Retired(c.reading(1)), "its grant to itself was released")
	c.advance(10 * c.cores[1].cfg.MaxLease)
	c.tick(1)
	assert.Nil(t, c.cores[1].attempt, "a retiring process does not campaign")
	c.cores[1].Campaign(c.reading(1))
	assert.Nil(t, c.cores[1].attempt, "nor when asked to")

	cfg := testConfig(3, []edict.ProcessID{1, 2, 3}, nil)
	c.start(3, 2, cfg)
	c.cores[3].Retire(c.reading(3))
	assert.False(t, c.cores[3].Retired(c.reading(3)), "in quarantine")
	c.advance(c.cores[3].cfg.quarantine())
	assert.True(t, c.cores[3].Retired(c.reading(3)))
}

func kinds(evs []Event) []EventKind {
	var ks []EventKind
	for _, e := range evs {
		ks = append(ks, e.Kind)
	}
	return ks
}
