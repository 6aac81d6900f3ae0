package stollersim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect"
	"github.com/edictlog/edictlog/elect/stoller"
	"github.com/edictlog/edictlog/internal/sim"
)

// probe is a Protocol that only runs an FD: it monitors every other node
// from its start and records the DownSig signals, so that §2's
// completeness (1) and §6's accuracy-when-stable can be checked alone.
type probe struct {
	id      edictID
	fd      stoller.FailureDetector
	started bool
	out     []elect.Outgoing
	sigs    *[]sig
	now     func() time.Duration // virtual time
}

// sig is a DownSig raised by by about whom, at virtual time at.
type sig struct {
	at       time.Duration
	by, whom edictID
}

func (p *probe) Tick(now edict.Time) {
	if !p.started {
		p.started = true
		p.fd.Tick(now)
		for j := edictID(1); j <= 5; j++ {
			if j != p.id {
				p.fd.Start(now, j)
			}
		}
	}
	p.fd.Tick(now)
	p.drain(now)
}

func (p *probe) Receive(now edict.Time, from edictID, b []byte) {
	m, err := stoller.Decode(b)
	if err == nil {
		p.fd.Receive(now, from, m)
	}
	p.drain(now)
}

func (p *probe) drain(now edict.Time) {
	down, out := p.fd.Drain()
	for _, j := range down {
		*p.sigs = append(*p.sigs, sig{p.now(), p.id, j})
	}
	for _, e := range out {
		e.Msg.Inc = 1
		p.out = append(p.out, elect.Outgoing{To: e.To, Payload: stoller.Encode(e.Msg)})
	}
}

func (p *probe) Observe(o elect.Observation) { p.fd.Observe(o); p.drain(o.At) }
func (p *probe) Outbox() []elect.Outgoing {
	o := p.out
	p.out = nil
	return o
}
func (p *probe) NextTick() edict.Time {
	if !p.started {
		return edict.Time{Incarnation: 1}
	}
	return p.fd.NextTick()
}
func (p *probe) WeakLeader(edict.Time) edict.ProcessID { return p.id }

// runFD crashes node 5 at 1 s and makes node 2 play dead to node 4 at
// 2 s; it returns the signals and the FD's latency bound.
func runFD(t *testing.T, f stoller.FDFactory, playDead bool) ([]sig, time.Duration) {
	var sigs []sig
	insts := map[edictID]*probe{}
	var s *sim.ProtocolRun
	s = sim.NewProtocolRun(sim.ProtocolConfig{N: 5, Seed: 4, Rho: 1e-3, MaxDelay: 5 * time.Millisecond,
		New: func(id edictID, ms []edictID, inc uint64) elect.Protocol {
			p := &probe{id: id, fd: f(id, ms, inc), sigs: &sigs, now: func() time.Duration { return s.Now() }}
			insts[id] = p
			return p
		}})
	s.RunFor(time.Second)
	require.Empty(t, sigs, "accuracy: nobody is down yet")
	s.Crash(5)
	s.RunFor(time.Second)
	if playDead {
		insts[2].fd.PlayDead(s.Reading(2), []edictID{4})
		s.RunFor(2 * time.Second)
	}
	lat := time.Duration(0)
	if l, ok := insts[1].fd.(interface {
		Latency(time.Duration) time.Duration
	}); ok {
		lat = l.Latency(5 * time.Millisecond)
	}
	return sigs, lat
}

func TestFDCompleteAndAccurate(t *testing.T) {
	for _, fd := range fds[1:] {
		sigs, lat := runFD(t, fd.f, true)
		by := map[edictID]time.Duration{}
		for _, s := range sigs {
			switch {
			case s.whom == 5:
				by[s.by] = s.at
			case s.whom == 2 && s.by == 4:
				assert.Greater(t, s.at, 2*time.Second, "%s: PlayDead", fd.name)
			default:
				t.Errorf("%s: inaccurate %+v", fd.name, s)
			}
		}
		for id := edictID(1); id <= 4; id++ {
			at, ok := by[id]
			require.True(t, ok, "%s: %v never reported 5's crash", fd.name, id)
			assert.LessOrEqual(t, at-time.Second, edict.ScaleUp(lat, 1.01), "%s: latency", fd.name)
		}
		found := false
		for _, s := range sigs {
			found = found || (s.whom == 2 && s.by == 4)
		}
		assert.True(t, found, "%s: PlayDead(4) by 2 not seen by 4", fd.name)
		t.Logf("%s: τ_FD bound %v, detections of 5 at %v", fd.name, lat, by)
	}
}

// Negative control for the FD checks: a ping FD whose Timeout is below
// Period+2δ raises false alarms on live nodes.
func TestFDCheckerReportsEagerTimeout(t *testing.T) {
	sigs, _ := runFDNoRequire(stoller.NewPing(stoller.FDConfig{Period: 10 * time.Millisecond, Timeout: 3 * time.Millisecond}))
	inaccurate := 0
	for _, s := range sigs {
		if s.whom != 5 || s.at < time.Second {
			inaccurate++
		}
	}
	assert.Positive(t, inaccurate)
}

func runFDNoRequire(f stoller.FDFactory) ([]sig, time.Duration) {
	var sigs []sig
	var s *sim.ProtocolRun
	s = sim.NewProtocolRun(sim.ProtocolConfig{N: 5, Seed: 4, MaxDelay: 5 * time.Millisecond,
		New: func(id edictID, ms []edictID, inc uint64) elect.Protocol {
			return &probe{id: id, fd: f(id, ms, inc), sigs: &sigs, now: func() time.Duration { return s.Now() }}
		}})
	s.RunFor(time.Second)
	s.Crash(5)
	s.RunFor(time.Second)
	return sigs, 0
}

// §7's steady-state comparison: FD messages per τ with each FD.
func TestFDSteadyStateMessages(t *testing.T) {
	for _, fd := range fds {
		for _, n := range []int{5, 9} {
			s := Setup{N: n, Seed: 1, Async: fd.name != "oracle", FD: fd.f, FDName: fd.name}.withDefaults()
			h := s.Harness()
			h.Sim.RunFor(time.Second)
			before := h.Sent()
			h.Sim.RunFor(10 * s.Tau)
			d := diff(h.Sent(), before)
			fdm, normq := 0, d[stoller.NormQ]
			for k, v := range d {
				if !k.Election() {
					fdm += v
				}
			}
			t.Logf("%-6s N=%d per τ: Norm? %.1f, FD %.1f, election %d", fd.name, n, float64(normq)/10, float64(fdm)/10, electionMessages(d))
			assert.Equal(t, 10*(n-1), normq, "Norm? to greater(leader) every τ")
			assert.Zero(t, electionMessages(d), "no election while stable")
		}
	}
}
