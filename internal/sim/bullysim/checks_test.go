package bullysim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect/bully"
	"github.com/edictlog/edictlog/internal/sim"
)

// Negative controls: every checker reports a deliberately broken state.

func normal(c edict.ProcessID, g uint64) bully.State {
	return bully.State{S: bully.Normal, C: c, G: bully.Group{Creator: c, Incarnation: 1, Seq: g}}
}

func TestCheckAssertion1(t *testing.T) {
	ok := map[edict.ProcessID]bully.State{1: normal(3, 0), 2: {S: bully.Election, H: 2}, 3: normal(3, 0)}
	assert.NoError(t, CheckAssertion1(ok))
	bad := map[edict.ProcessID]bully.State{1: normal(2, 0), 2: normal(2, 0), 3: normal(3, 0)}
	assert.Error(t, CheckAssertion1(bad))
}

func TestCheckAssertion2(t *testing.T) {
	ok := map[edict.ProcessID]bully.State{1: normal(3, 0), 2: normal(3, 0), 3: normal(3, 0)}
	assert.NoError(t, CheckAssertion2(ok, 3))
	assert.NoError(t, CheckAssertion2(ok, edict.None))
	assert.Error(t, CheckAssertion2(ok, 2), "not the wanted coordinator")
	notNormal := map[edict.ProcessID]bully.State{1: normal(3, 0), 2: {S: bully.Reorganization, C: 3}, 3: normal(3, 0)}
	assert.Error(t, CheckAssertion2(notNormal, 3))
	deadCoord := map[edict.ProcessID]bully.State{1: normal(4, 0), 2: normal(4, 0)}
	assert.Error(t, CheckAssertion2(deadCoord, edict.None))
	split := map[edict.ProcessID]bully.State{1: normal(1, 0), 2: normal(3, 0), 3: normal(3, 0)}
	assert.Error(t, CheckAssertion2(split, edict.None))
}

func TestCheckAssertion3(t *testing.T) {
	// Two groups, each agreeing: fine.
	ok := map[edict.ProcessID]bully.State{1: normal(1, 1), 2: normal(3, 2), 3: normal(3, 2)}
	assert.NoError(t, CheckAssertion3(ok))
	bad := map[edict.ProcessID]bully.State{1: normal(1, 1), 2: normal(3, 2), 3: normal(3, 2)}
	bad[1] = bully.State{S: bully.Normal, C: 1, G: bad[2].G} // same group, other coordinator
	assert.Error(t, CheckAssertion3(bad))
}

// triangle is Stoller's Figure 2: 1–2 and 2–3 connected, 1–3 not.
func triangle() Graph {
	return Graph{Nodes: []edict.ProcessID{1, 2, 3}, Connected: func(a, b edict.ProcessID) bool {
		return a == b || a+b != 4
	}}
}

func TestGraph(t *testing.T) {
	g := triangle()
	assert.Equal(t, [][]edict.ProcessID{{1, 2}, {2, 3}}, g.MaximalCliques())
	assert.Equal(t, 2, g.MinCliqueCover())
	assert.True(t, g.reaches(1, 3))
	full := Graph{Nodes: []edict.ProcessID{1, 2, 3, 4}, Connected: func(a, b edict.ProcessID) bool { return true }}
	assert.Equal(t, 1, full.MinCliqueCover())
	none := Graph{Nodes: []edict.ProcessID{1, 2, 3, 4}, Connected: func(a, b edict.ProcessID) bool { return a == b }}
	assert.Equal(t, 4, none.MinCliqueCover())
	assert.False(t, none.reaches(1, 2))
}

func TestCheckAssertion4(t *testing.T) {
	g := triangle()
	// Stoller's outcome: {1, 2} under 1, {3} alone.
	flaw := map[edict.ProcessID]bully.State{1: normal(1, 1), 2: normal(1, 1), 3: normal(3, 2)}
	assert.Error(t, CheckAssertion4(flaw, g))
	assert.NoError(t, CheckAssertion4Prime(flaw, g), "Assertion 4′ accepts it")
	// One group under 2 satisfies Assertion 4 (Figure 2: it forces it).
	one := map[edict.ProcessID]bully.State{1: normal(2, 1), 2: normal(2, 1), 3: normal(2, 1)}
	assert.NoError(t, CheckAssertion4(one, g))
}

func TestCheckAssertion4Prime(t *testing.T) {
	g := triangle()
	ok := map[edict.ProcessID]bully.State{1: normal(1, 1), 2: normal(1, 1), 3: normal(3, 2)}
	assert.NoError(t, CheckAssertion4Prime(ok, g))
	three := map[edict.ProcessID]bully.State{1: normal(1, 1), 2: normal(2, 2), 3: normal(3, 3)}
	assert.ErrorContains(t, CheckAssertion4Prime(three, g), "4′b", "3 groups > clique cover 2")
	notNormal := map[edict.ProcessID]bully.State{1: normal(1, 1), 2: {S: bully.Election, C: 1}, 3: normal(3, 2)}
	assert.ErrorContains(t, CheckAssertion4Prime(notNormal, g), "4′a")
	wrongGroup := map[edict.ProcessID]bully.State{1: normal(1, 1), 2: normal(1, 5), 3: normal(3, 2)}
	assert.ErrorContains(t, CheckAssertion4Prime(wrongGroup, g), "4′a")
	apart := Graph{Nodes: g.Nodes, Connected: func(a, b edict.ProcessID) bool { return a == b || a+b == 3 }}
	unreachable := map[edict.ProcessID]bully.State{1: normal(1, 1), 2: normal(1, 1), 3: normal(1, 1)}
	assert.ErrorContains(t, CheckAssertion4Prime(unreachable, apart), "reach")
	deadCoord := map[edict.ProcessID]bully.State{1: normal(1, 1), 2: normal(1, 1), 3: normal(4, 2)}
	assert.ErrorContains(t, CheckAssertion4Prime(deadCoord, g), "not running")
}

// lying is a Bully that, once told to lie, reports itself Normal under a
// coordinator of its own: a broken instance for the harness's controls.
type lying struct {
	*bully.Bully
	lie bool
}

func (l *lying) State() bully.State {
	s := l.Bully.State()
	if l.lie {
		s.S, s.C = bully.Normal, 1
	}
	return s
}

// The harness's every-step check catches a broken instance: a follower
// that believes in a coordinator of its own (Assertion 1 broken at its
// very next step).
func TestWorldCatchesBrokenInstance(t *testing.T) {
	var liar *lying
	w := newWorld(sim.ProtocolConfig{N: 3, Seed: 1, Rho: 1e-3}, func(c bully.Config) stater {
		if c.ID != 1 {
			return bully.NewBully(c)
		}
		liar = &lying{Bully: bully.NewBully(c)}
		return liar
	}, CheckAssertion1)
	_, ok := w.untilHolds(time.Second, func(s map[edict.ProcessID]bully.State) error { return CheckAssertion2(s, 3) })
	assert.True(t, ok)
	assert.NoError(t, w.bad)
	liar.lie = true // 1 and 3 Normal, disagreeing
	w.sim.RunFor(100 * time.Millisecond)
	assert.Error(t, w.bad)
}
