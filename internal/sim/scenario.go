package sim

import (
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect"
)

// Scenario is a family of runs: the seed picks everything the scenario
// leaves open.
type Scenario struct {
	Name string
	N    int // processes in epoch 0
	Mode elect.Mode

	Duration time.Duration // total virtual time
	GST      time.Duration // from here on: timely network, accurate detector, no faults

	// Lease protocol parameters given to every core.
	Rho           float64
	RoundTrip     time.Duration // d
	RenewInterval time.Duration // i
	// RenewLead is elect.Config.RenewLead (0: its default).
	RenewLead time.Duration
	Skew      time.Duration // Δ, OQwBS only

	// Network before GST.
	MinDelay, MaxDelay time.Duration
	Loss, Duplicate    float64
	LongDelay          float64 // chance of an extra delay up to 3·MaxLease
	// SpanDelay is the chance of an extra delay of 1–5 s, which spans
	// reigns: a reply arrives in a later reign of its sender, a request
	// after its sender lost, regained and lost its lease again. Only
	// delays that end before GST are added.
	SpanDelay  float64
	Partitions bool

	// Clocks: rates wander in [1−DriftFactor·ρ, 1+DriftFactor·ρ];
	// DriftExtreme pins each clock at one end of the range.
	DriftFactor  float64
	DriftExtreme bool

	// NoFailureDetector: processes learn of crashes only from leases that
	// lapse and from silence (LowestLive.SuspectAfter), as an edictlog.Node
	// without gossip does; and the lowest id dies for good at GST, the
	// case such a detector finds hardest.
	NoFailureDetector bool
	Crashes           bool          // crash and restart processes before GST
	CrashEvery        time.Duration // mean spacing of crashes (default 700ms)
	MaxDowntime       time.Duration // longest a crashed process stays down (default 3·MaxLease)
	Competing         bool          // detectors name everyone weak leader before GST
	Transfers         bool          // leaders release and others campaign before GST
	Reconfigure       bool          // an epoch change (stop edict, wedging) before GST
	// Carry: the epoch change adds a member (rather than replacing one),
	// and a leader of epoch 0 carries its lease into epoch 1
	// (elect.Core.WedgeKeeping), as the log's leader does through a
	// membership change that keeps it, then campaigns in epoch 1 after a
	// random delay: other members' campaigns meet it there.
	Carry bool

	// Detector, if set, builds each process's weak leader election (for
	// each start; incarnation counts them) instead of elect.LowestLive: a
	// Protocol's messages travel as wire.LeaseDetector lease messages.
	Detector func(id edict.ProcessID, members []edict.ProcessID, incarnation uint64) elect.Detector

	// CleanStops is the chance that a crash of Crashes is a clean stop
	// instead (elect.Core.Retire): the process grants nothing more, goes
	// down once its last grant has lapsed (elect.Retired), and its next
	// life starts without the restart quarantine. A crash that comes
	// during the stop leaves no record: that restart is quarantined.
	CleanStops float64

	// Negative controls: break the model's assumptions.
	ForgetOnRestart bool // a restart wipes stable storage: no quarantine
	RogueLeader     bool // a leader keeps stamping edicts past E_p

	EdictInterval  time.Duration
	VerifyInterval time.Duration
}

// withDefaults fills in the protocol and timing defaults shared by every
// scenario.
func (sc Scenario) withDefaults() Scenario {
	if sc.N == 0 {
		sc.N = 5
	}
	if sc.Rho == 0 {
		sc.Rho = 1e-3
	}
	if sc.RoundTrip == 0 {
		sc.RoundTrip = 10 * time.Millisecond
	}
	if sc.RenewInterval == 0 {
		sc.RenewInterval = 200 * time.Millisecond
	}
	if sc.Skew == 0 && sc.Mode == elect.BoundedSkew {
		sc.Skew = 40 * time.Millisecond
	}
	if sc.MinDelay == 0 {
		sc.MinDelay = 100 * time.Microsecond
	}
	if sc.MaxDelay == 0 {
		sc.MaxDelay = sc.RoundTrip / 2
	}
	if sc.DriftFactor == 0 {
		sc.DriftFactor = 1
	}
	if sc.Duration == 0 {
		sc.GST = 4 * time.Second
		sc.Duration = sc.GST + sc.ElectionBound() + 2*time.Second
	}
	if sc.CrashEvery == 0 {
		sc.CrashEvery = 700 * time.Millisecond
	}
	if sc.MaxDowntime == 0 {
		sc.MaxDowntime = 3 * sc.MaxLease()
	}
	if sc.EdictInterval == 0 {
		sc.EdictInterval = 50 * time.Millisecond
	}
	if sc.VerifyInterval == 0 {
		sc.VerifyInterval = 150 * time.Millisecond
	}
	return sc
}

// detectDelay bounds how late the simulated failure detector reports a
// crash or a recovery after GST.
func (sc *Scenario) detectDelay() time.Duration { return 100 * time.Millisecond }

// stabilityDelay is how long after GST Leader Stability is checked from:
// the longest a lease obtained before GST lasts, (1+ρ)/(1−ρ)·MaxLease.
func (sc *Scenario) stabilityDelay() time.Duration {
	return time.Duration(float64(sc.MaxLease()) * (1 + sc.Rho) / (1 - sc.Rho))
}

// suspectAfter is the detectors' silence timeout in NoFailureDetector
// scenarios (elect.LowestLive.SuspectAfter).
func (sc *Scenario) suspectAfter() time.Duration { return 2 * sc.MaxLease() }

// newDetector builds p's weak leader election for a start.
func (sc *Scenario) newDetector(id edict.ProcessID, members []edict.ProcessID, incarnation uint64) elect.Detector {
	if sc.Detector != nil {
		return sc.Detector(id, members, incarnation)
	}
	d := elect.NewLowestLive(id, members, sc.MaxLease())
	if sc.NoFailureDetector {
		d.SuspectAfter = sc.suspectAfter()
	}
	return d
}

// setMembers tells a detector that can be told of a membership change.
func setMembers(d elect.Detector, members []edict.ProcessID) {
	if m, ok := d.(interface{ SetMembers([]edict.ProcessID) }); ok {
		m.SetMembers(members)
	}
}

// ElectionBound is the time after GST by which Eventual Election (eq. 5)
// must have produced a leader. Its parts, all in real time:
//   - grants outstanding at GST, and a restarted process's quarantine,
//     expire within (1+ρ)·MaxLease/(1−ρ) each;
//   - the failure detector is accurate within detectDelay, and a stale
//     leader hint lasts MaxLease;
//   - a candidate whose attempt fails backs off at most the longest grant
//     a nack reported (MaxLease, scaled) plus d + i of jitter, twice (one
//     collision with a candidate that started before the detector
//     settled), and an attempt takes at most one round trip d.
func (sc *Scenario) ElectionBound() time.Duration {
	ml := sc.MaxLease()
	scale := (1 + sc.Rho) / (1 - sc.Rho)
	expire := time.Duration(float64(ml) * scale)
	backoff := time.Duration(float64(ml)*scale) + sc.RoundTrip + sc.RenewInterval
	bound := 2*expire + sc.detectDelay() + ml + 2*backoff + sc.RoundTrip
	if sc.NoFailureDetector {
		// Suspicion by silence, then one collision with the next live id.
		bound += sc.suspectAfter() + backoff
	}
	return bound
}

// Scenarios are the families TestNerio runs; every one is checked with the
// full checker.
func Scenarios() []Scenario {
	return []Scenario{
		{Name: "basic"},
		{Name: "loss", Loss: 0.2, Duplicate: 0.05, LongDelay: 0.02},
		{Name: "partitions", Partitions: true, Loss: 0.02, LongDelay: 0.01},
		{Name: "crashes", Crashes: true, Loss: 0.02},
		{Name: "lapse-only", Crashes: true, NoFailureDetector: true, Loss: 0.02},
		// The forget-grant negative control's twin with quarantine on:
		// most granters restart within one lease, often.
		{Name: "crash-storm", N: 3, Crashes: true, CrashEvery: 100 * time.Millisecond, MaxDowntime: 60 * time.Millisecond, Competing: true, CleanStops: 0.3},
		{Name: "competing", Competing: true, Transfers: true, Loss: 0.05, Duplicate: 0.05},
		{Name: "drift", DriftExtreme: true, Loss: 0.05, LongDelay: 0.02},
		{Name: "reconfigure", Reconfigure: true, Crashes: true, Loss: 0.05},
		{Name: "reconfigure-carry", N: 3, Reconfigure: true, Carry: true, Competing: true, Crashes: true, Loss: 0.05},
		{Name: "skew", Mode: elect.BoundedSkew, Loss: 0.05, Crashes: true},
		{Name: "chaos", Partitions: true, Crashes: true, Competing: true, Transfers: true, DriftExtreme: true, Loss: 0.1, Duplicate: 0.05, LongDelay: 0.02},
	}
}

// Defaults returns sc with every unset timing filled in, as a run would
// use it.
func (sc Scenario) Defaults() Scenario { return sc.withDefaults() }
