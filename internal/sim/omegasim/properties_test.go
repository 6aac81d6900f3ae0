package omegasim

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect"
	"github.com/edictlog/edictlog/elect/omega"
	"github.com/edictlog/edictlog/internal/sim"
)

var seeds = []uint64{1, 2, 3, 4, 5, 6}

const d = scenarioDelta

// Ω (§3.1): after loss before GST, a healed partition and crashes, one
// correct process is leader from GST+100δ on. For the stable variants the
// good period also has no demotion of an accessible leader (§3.3).
func TestOmega(t *testing.T) {
	for _, v := range variants {
		for _, n := range []int{3, 5, 7} {
			for _, seed := range seeds {
				r, _, err := omegaScenario(v, n, seed)
				assert.NoError(t, err, "%v n=%d seed=%d: %v", v, n, seed, r)
				if k := v.Stability(); k > 0 {
					assert.Empty(t, r.stability(k), "%v n=%d seed=%d", v, n, seed)
				}
			}
		}
	}
}

// Negative control: an instance whose timeout never fires keeps naming a
// crashed leader, and the Ω check says so.
func TestOmegaCheckerCatchesStuckInstance(t *testing.T) {
	for _, v := range variants {
		r := newRun(v, omega.Config{Delta: d, Timeout: time.Hour}, sim.ProtocolConfig{N: 3, Seed: 1})
		r.sim.RunFor(50 * d)
		require.NoError(t, r.omega(40*d), "%v settles at first", v)
		r.crash(1)
		r.sim.RunFor(300 * d)
		assert.Error(t, r.omega(100*d), "%v", v)
	}
}

// Communication efficiency (§3.2): in steady state only the leader's n−1
// links carry messages.
func TestCommunicationEfficiency(t *testing.T) {
	for _, v := range variants {
		for _, n := range []int{3, 5, 7, 9} {
			for _, seed := range seeds[:3] {
				res := electionScenario(v, scenarioConfig(), n, 1, seed)
				assert.NoError(t, res.linkErr, "%v n=%d seed=%d", v, n, seed)
				assert.Equal(t, n-1, res.links, "%v n=%d seed=%d", v, n, seed)
			}
		}
	}
}

// allToAll is the simple Ω of §1.1: everyone sends OK to everyone and
// names the lowest id heard from recently. Not communication-efficient.
type allToAll struct {
	self    edict.ProcessID
	members []edict.ProcessID
	heard   map[edict.ProcessID]edict.Time
	next    edict.Time
	out     []elect.Outgoing
}

func (a *allToAll) Observe(elect.Observation) {}
func (a *allToAll) WeakLeader(now edict.Time) edict.ProcessID {
	best := a.self
	for p, t := range a.heard {
		if p < best && now.Before(t.Add(2*d)) {
			best = p
		}
	}
	return best
}
func (a *allToAll) Tick(now edict.Time) {
	for _, p := range a.members {
		if p != a.self {
			a.out = append(a.out, elect.Outgoing{To: p, Payload: omega.Encode(omega.Message{Kind: omega.OK})})
		}
	}
	a.next = now.Add(d)
}
func (a *allToAll) Receive(now edict.Time, from edict.ProcessID, _ []byte) { a.heard[from] = now }
func (a *allToAll) Outbox() []elect.Outgoing {
	out := a.out
	a.out = nil
	return out
}
func (a *allToAll) NextTick() edict.Time { return a.next }

func TestLinksCheckerCatchesAllToAll(t *testing.T) {
	s := sim.NewProtocolRun(sim.ProtocolConfig{N: 4, Seed: 1, MaxDelay: d, New: func(id edict.ProcessID, ms []edict.ProcessID, inc uint64) elect.Protocol {
		return &allToAll{self: id, members: ms, heard: map[edict.ProcessID]edict.Time{}, next: edict.Time{Incarnation: inc}}
	}})
	s.RunFor(20 * d)
	s.ResetCounts()
	s.RunFor(20 * d)
	leader, ok := s.Agreed()
	require.True(t, ok)
	links, err := linksUsed(s.Sent, leader, 4)
	assert.Error(t, err)
	assert.Equal(t, 12, links)
	_, err = linksUsed(map[[2]edict.ProcessID]int{{1, 2}: 3, {1, 3}: 1, {2, 1}: 1}, 1, 3)
	assert.Error(t, err, "a follower's link is one too many")
}

// k-stability (§3.3), against recovered lower ids: processes 1..f crash
// (so the leader is f+1), recover, and do not demote it.
func TestRecoveredLowerIDsDoNotDemote(t *testing.T) {
	for _, v := range variants {
		for _, n := range []int{3, 5, 7} {
			for _, seed := range seeds[:3] {
				res := electionScenario(v, scenarioConfig(), n, (n-1)/2, seed)
				assert.Empty(t, res.demotions, "%v n=%d seed=%d", v, n, seed)
				assert.True(t, res.leaderKept, "%v n=%d seed=%d: %+v", v, n, seed, res)
			}
		}
	}
}

// §5's problem scenario 1 demotes Fig. 1's accessible leader long after
// the process that caused it died; the stable variants keep theirs.
func TestScenario1(t *testing.T) {
	for _, v := range variants {
		for _, n := range []int{3, 5} {
			r, viol := scenario1(v, n, 1)
			if v == omega.Fig1 {
				assert.NotEmpty(t, viol, "Fig. 1 is not stable: %v", r)
			} else {
				assert.Empty(t, viol, "%v n=%d", v, n)
			}
		}
	}
}

// In a good period, with followers crashing and recovering at random, a
// stable variant's leader never changes (it neither crashes nor is
// suspected).
func TestLeaderChangesOnlyOnCrash(t *testing.T) {
	for _, v := range []omega.Variant{omega.Stable3, omega.Stable6, omega.ConstantTime} {
		for _, seed := range seeds {
			n := 5
			r := newRun(v, scenarioConfig(), sim.ProtocolConfig{N: n, Seed: seed})
			r.sim.RunFor(50 * d)
			leader := r.leaderNow()
			require.NotEqual(t, edict.None, leader)
			rng := rand.New(rand.NewPCG(seed, 7))
			for range 20 {
				p := edict.ProcessID(rng.IntN(n) + 1)
				if p == leader {
					continue
				}
				if r.sim.Up(p) {
					r.crash(p)
				} else {
					r.recover(p)
				}
				r.sim.RunFor(time.Duration(rng.IntN(20)+1) * d)
			}
			r.sim.RunFor(50 * d)
			assert.Empty(t, r.stability(v.Stability()), "%v seed=%d", v, seed)
			assert.Equal(t, leader, r.leaderNow(), "%v seed=%d: %v", v, seed, r)
		}
	}
}

// Negative control for the stability checker on a made-up history.
func TestStabilityCheckerControl(t *testing.T) {
	alive := map[edict.ProcessID]bool{1: true, 2: true}
	pts := []point{{at: 0, leader: 1, alive: alive}, {at: 100 * d, leader: 2, alive: alive}}
	assert.Len(t, stabilityViolations(pts, nil, 0, nil, 6*d), 1, "accessible for 100δ, demoted")
	assert.Empty(t, stabilityViolations(pts, nil, 95*d, nil, 6*d), "accessible only 5δ")
	recovered := []lifeEvent{{at: 97 * d, p: 1, up: true}}
	assert.Empty(t, stabilityViolations(pts, recovered, 0, nil, 6*d), "restarted 3δ before")
	dead := []point{pts[0], {at: 100 * d, leader: 2, alive: map[edict.ProcessID]bool{2: true}}}
	assert.Empty(t, stabilityViolations(dead, nil, 0, nil, 6*d), "crashed leaders may be replaced")
}

// Election time: from a crash of the leaders of f consecutive rounds to an
// agreed live leader, within the bound (Theorem 5's 9δ for ConstantTime,
// for every f; the derived bounds for the others, one tick per timer
// included: see electionBound).
func TestElectionTime(t *testing.T) {
	for _, v := range variants {
		for _, n := range []int{3, 5, 7, 9} {
			for f := 1; f <= (n-1)/2; f++ {
				for _, seed := range seeds[:3] {
					res := electionScenario(v, scenarioConfig(), n, f, seed)
					bound, why := electionBound(v, scenarioConfig(), f)
					assert.True(t, res.elected && res.elect <= bound,
						"%v n=%d f=%d seed=%d: %v > %s = %v", v, n, f, seed, res.elect, why, bound)
				}
			}
		}
	}
}

// Negative controls for the election-time check: an instance with four
// times the timeout misses the bound computed for the default one, and
// Fig. 4 without Fig. 5 misses 9δ once enough round leaders are dead.
func TestElectionTimeControl(t *testing.T) {
	slow := omega.Config{Delta: d, Timeout: 8 * d}
	for _, v := range variants {
		res := electionScenario(v, slow, 5, 2, 1)
		bound, _ := electionBound(v, scenarioConfig(), 2)
		assert.Greater(t, res.elect, bound, "%v", v)
	}
	res := electionScenario(omega.Stable6, scenarioConfig(), 9, 4, 1)
	assert.Greater(t, res.elect, 9*d, fmt.Sprintf("Fig. 4 with 4 dead round leaders: %v", res.elect))
}
