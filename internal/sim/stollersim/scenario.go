package stollersim

import (
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect/stoller"
	"github.com/edictlog/edictlog/internal/sim"
)

// Setup is one configuration of a measured run.
type Setup struct {
	N     int
	Seed  uint64
	Async bool // NewAsync rather than NewBully
	// FD and FDName: the FD factory (nil: the algorithm's default) and
	// its name for reports.
	FD     stoller.FDFactory
	FDName string
	Tau    time.Duration // τ (default DefaultTau)
	// MinDelay and Delta (δ, the maximum delay) bound message delays
	// (default 1 ms, 5 ms); OracleDelay is the simulator's perfect-FD delay,
	// the Oracle's τ_FD (default 20 ms). Rho is the drift (default 1e-3).
	MinDelay, Delta, OracleDelay time.Duration
	Rho                          float64
	Loss                         float64
}

func (s Setup) withDefaults() Setup {
	if s.Tau <= 0 {
		s.Tau = stoller.DefaultTau
	}
	if s.MinDelay <= 0 {
		s.MinDelay = time.Millisecond
	}
	if s.Delta <= 0 {
		s.Delta = 5 * time.Millisecond
	}
	if s.OracleDelay <= 0 {
		s.OracleDelay = 20 * time.Millisecond
	}
	if s.Rho == 0 {
		s.Rho = 1e-3
	}
	if s.FD == nil {
		if s.Async {
			s.FD, s.FDName = stoller.NewPing(stoller.FDConfig{}), "ping"
		} else {
			s.FD, s.FDName = stoller.NewOracle, "oracle"
		}
	}
	return s
}

// Harness builds the run, checking SLE1/LdrElected (Bully) or
// ALE1/LdrsElected (Async) at every step.
func (s Setup) Harness() *Harness {
	if s.Async {
		return NewHarnessFor(s, ALE1, LdrsElected)
	}
	return NewHarnessFor(s, SLE1, LdrElected)
}

// NewHarnessFor builds the run of s with the given checkers (a negative
// control holds one algorithm to the other's specification).
func NewHarnessFor(s Setup, safety func(Snapshot) error, live func(Snapshot) bool) *Harness {
	s = s.withDefaults()
	build := func(c stoller.Config) Instance {
		c.Tau, c.FD, c.Hold = s.Tau, s.FD, s.Delta
		if s.Async {
			return stoller.NewAsync(c)
		}
		return stoller.NewBully(c)
	}
	return NewHarness(s.simConfig(), build, safety, live)
}

func (s Setup) simConfig() sim.ProtocolConfig {
	s = s.withDefaults()
	sc := sim.ProtocolConfig{N: s.N, MinDelay: s.MinDelay, MaxDelay: s.Delta, Loss: s.Loss, Rho: s.Rho, Seed: s.Seed}
	if s.FDName == "oracle" {
		sc.FailureDetector = s.OracleDelay
	}
	return sc
}

// TauFD is the FD's latency τ_FD for this setup.
func (s Setup) TauFD() time.Duration {
	s = s.withDefaults()
	ms := make([]edict.ProcessID, s.N)
	for i := range ms {
		ms[i] = edict.ProcessID(i + 1)
	}
	switch f := s.FD(1, ms, 1).(type) {
	case interface {
		Latency(time.Duration) time.Duration
	}:
		return f.Latency(s.Delta)
	default:
		return s.OracleDelay
	}
}

// Bound is c_S (Bully) or c_A (Async) for the setup, in virtual time: τ
// and the FD's timeouts run on clocks as slow as 1−ρ.
func (s Setup) Bound() time.Duration {
	s = s.withDefaults()
	b := stoller.BoundS(s.N, s.Tau, s.Delta, s.TauFD())
	if s.Async {
		b = stoller.BoundA(s.N, s.Tau, s.Delta, s.TauFD())
	}
	return edict.ScaleUp(b, 1/(1-s.Rho))
}

// CrashRun is what LeaderCrash measured.
type CrashRun struct {
	// Time from the crash until LdrElected (LdrsElected) held.
	Time    time.Duration
	Elected bool
	// Election counts Halt, Ack, Rej, Ldr and NotNorm messages in the c
	// after the crash (Norm? is the steady state's); FD the failure
	// detector's messages in the same window.
	Election, FD int
	Leader       edict.ProcessID
	// Safety is the first SLE1/ALE1 violation of the whole run, Relapse
	// a departure from the elected state while stable.
	Safety, Relapse error
}

// LeaderCrash elects a leader, crashes it once the system has been
// stable for c+2τ, and measures the new election over the next c.
func LeaderCrash(s Setup) CrashRun {
	s = s.withDefaults()
	h := s.Harness()
	c := s.Bound()
	h.Bound = c
	h.Sim.RunFor(c + 2*s.Tau)
	ldr := h.Leader()
	if _, ok := h.Elected(); !ok || ldr == edict.None {
		return CrashRun{Safety: h.Violation, Relapse: h.Relapse}
	}
	before := h.Sent()
	h.Crash(ldr)
	h.Sim.RunFor(c)
	d := diff(h.Sent(), before)
	r := CrashRun{Safety: h.Violation, Relapse: h.Relapse, Leader: h.Leader(), Election: electionMessages(d)}
	for k, v := range d {
		if !k.Election() {
			r.FD += v
		}
	}
	r.Time, r.Elected = h.Elected()
	return r
}
