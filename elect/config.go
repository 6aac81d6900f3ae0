package elect

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
)

// Mode selects the lease algorithm.
type Mode uint8

const (
	// BoundedDrift is OQwBD (§3): clocks drift by at most ρ (eq. 15). The
	// default, because a drift bound is a property of the oscillator while
	// a skew bound needs clock synchronization (§5).
	BoundedDrift Mode = iota
	// BoundedSkew is OQwBS (§4): any two clocks' Nanos differ by at most
	// Skew (eq. 20). Use it only with a synchronized clock whose Nanos all
	// processes share (e.g. PTP-disciplined CLOCK_TAI); the incarnation
	// still orders one process's readings.
	BoundedSkew
)

func (m Mode) String() string {
	switch m {
	case BoundedDrift:
		return "OQwBD"
	case BoundedSkew:
		return "OQwBS"
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// Config configures a Core. Durations are real-time periods; the core
// converts them to clock intervals with the (1±ρ) factors of eq. 15.
type Config struct {
	// ID is this process. Required.
	ID edict.ProcessID
	// Epochs are the epoch configurations known at start, at least one.
	// The lowest is RUNNING unless a persisted record says it terminated.
	Epochs []wire.EpochConfig
	// Mode is the lease algorithm; BoundedDrift by default.
	Mode Mode
	// Rho is the drift bound ρ of eq. 15 (default 1e-3). It assumes every
	// clock in the cluster advances at a rate within 1±ρ of real time
	// between readings; with CLOCK_MONOTONIC_RAW that is the crystal's
	// tolerance (typically 1e-5 or better), so 1e-3 leaves a wide margin
	// and costs 0.1% of each lease.
	Rho float64
	// Skew is Δ of eq. 20, for BoundedSkew only.
	Skew time.Duration
	// RoundTrip is d of §10.1: a round-trip time that 99.9% of exchanges
	// beat. Default 10ms.
	RoundTrip time.Duration
	// RenewInterval is i of §10.1, the spacing of lease renewals. Default
	// 300ms (with RoundTrip 10ms: leases of about 310ms, MaxLease 620ms).
	RenewInterval time.Duration
	// RenewLead is the least time before its lease ends that a leader
	// starts renewing it (at least three round trips). Default
	// 0.9·RenewInterval (270ms): a leader whose process stalls (a busy
	// host, a starved CPU, a disk hog's kernel work) for up to RenewLead
	// less a round trip just before its renewal still renews in time.
	// Leases are then renewed about every RenewInterval/10: lease
	// messages are cheap, and failover time is set by MaxLease, which
	// this does not change. The lead in force is longer while the
	// process has seen longer stalls in the last 30 to 60 s (twice the
	// longest, as leader or as granter; Stats.Stall and Stats.RenewLead),
	// and the lease it asks for as much longer, up to MaxLease: on a
	// starved host, where a stall of a leader or of its renewals' round
	// trips outlasts RenewLead now and then, the lease rides the stalls
	// out at the price of a slower failover for as long as they go on.
	// Issue 16's
	// measurements on a 2-core machine (docs/protocol.md, "Timing
	// defaults"): beside a disk hog the leader stalled for 150–300ms at
	// times; with 200ms/¾ it lost its lease 18 times in three rounds of
	// etcd's put benchmark, with 300ms/0.9 once in two rounds; failover
	// after a SIGKILL took p99 824ms and 1.23s.
	RenewLead time.Duration
	// MaxLease bounds δ. Granters refuse longer requests, and a restarted
	// process grants nothing for (1+ρ)·MaxLease (the restart quarantine).
	// Default 2·(RoundTrip+RenewInterval), at least the largest δ §10.1
	// chooses. It is also as long as a starved leader's lease grows
	// (RenewLead), and so bounds what a crash costs on a starved host.
	MaxLease time.Duration
	// FallbackAfter is how long a member sees no leader before it
	// campaigns whatever the detector names (maybeStart). Default
	// 4·MaxLease; see fallbackAfter for why.
	FallbackAfter time.Duration
	// Detector is the weak leader election (§9). Required.
	Detector Detector
	// Log is the replicated log this core elects a leader for, if any:
	// what grants and wedges report of it. Nil reports nothing (the lease
	// protocol alone, as the detector papers' harnesses run it).
	Log Log
	// Rand is the seeded source for back-off jitter. Required: the core
	// never reads global randomness.
	Rand *rand.Rand
	// AfterCleanStop says that the life before this one ended with a
	// clean stop (Retire, then Retired, made durable by the runtime):
	// every grant it made had lapsed by its own clock, so this life,
	// though restarted, starts without the restart quarantine
	// (docs/protocol.md, "Clocks"). Only the life right after the one
	// that retired may say so: the runtime's record of the stop names that
	// life's incarnation.
	AfterCleanStop bool
}

// ApplyDefaults fills the zero timing fields — Rho, RoundTrip,
// RenewInterval, MaxLease — with the defaults documented on each. New
// calls it; a runtime that needs the values earlier (edictlog.Node, to size its
// detector) calls it too, so that the defaults live in one place.
func (c *Config) ApplyDefaults() {
	if c.Rho == 0 {
		c.Rho = 1e-3
	}
	if c.RoundTrip == 0 {
		c.RoundTrip = 10 * time.Millisecond
	}
	if c.RenewInterval == 0 {
		c.RenewInterval = 300 * time.Millisecond
	}
	if c.MaxLease == 0 {
		c.MaxLease = 2 * (c.RoundTrip + c.RenewInterval)
	}
	if c.RenewLead == 0 {
		c.RenewLead = c.RenewInterval * 9 / 10
	}
	if c.FallbackAfter == 0 {
		c.FallbackAfter = 4 * c.MaxLease
	}
}

// validate names the field that is wrong.
func (c *Config) validate() error {
	switch {
	case c.ID == edict.None:
		return errors.New("elect: Config.ID must be non-zero")
	case len(c.Epochs) == 0:
		return errors.New("elect: Config.Epochs must name at least one epoch")
	case c.Rho < 0 || c.Rho >= 0.5:
		return fmt.Errorf("elect: Config.Rho %g outside [0, 0.5)", c.Rho)
	case c.Mode != BoundedDrift && c.Mode != BoundedSkew:
		return fmt.Errorf("elect: Config.Mode %d unknown", c.Mode)
	case c.Mode == BoundedSkew && c.Skew <= 0:
		return errors.New("elect: Config.Skew must be positive in BoundedSkew mode")
	case c.RoundTrip <= 0:
		return errors.New("elect: Config.RoundTrip must be positive")
	case c.RenewInterval <= 0:
		return errors.New("elect: Config.RenewInterval must be positive")
	case c.RenewLead < 0:
		return errors.New("elect: Config.RenewLead must not be negative")
	case c.MaxLease < c.RoundTrip+c.RenewInterval:
		return fmt.Errorf("elect: Config.MaxLease %v shorter than RoundTrip+RenewInterval %v: renewals could not keep the lease", c.MaxLease, c.RoundTrip+c.RenewInterval)
	case c.FallbackAfter < c.MaxLease:
		return fmt.Errorf("elect: Config.FallbackAfter %v shorter than MaxLease %v: a live leader's grants could look like none", c.FallbackAfter, c.MaxLease)
	case c.Detector == nil:
		return errors.New("elect: Config.Detector is required")
	case c.Rand == nil:
		return errors.New("elect: Config.Rand is required (a seeded source)")
	}
	seen := map[uint64]bool{}
	for i, e := range c.Epochs {
		if err := e.Check(); err != nil {
			return fmt.Errorf("elect: Config.Epochs[%d]: %w", i, err)
		}
		if seen[e.Epoch] {
			return fmt.Errorf("elect: Config.Epochs lists epoch %d twice", e.Epoch)
		}
		seen[e.Epoch] = true
	}
	return nil
}

// quarantine is how long a restarted process grants nothing: any grant it
// made before the crash protected a lease of at most MaxLease real time
// from when it was made (Lemma 3.1); (1+ρ)·MaxLease on its own clock is at
// least MaxLease of real time. Under OQwBS a grant can outlive its δ by up
// to 2Δ of skew.
func (c *Config) quarantine() time.Duration {
	q := edict.ScaleUp(c.MaxLease, 1+c.Rho)
	if c.Mode == BoundedSkew {
		q += edict.ScaleUp(2*c.Skew, 1+c.Rho)
	}
	return q
}

// Log is what the lease protocol carries for the log it elects a leader
// for, declared here where it is consumed. The lease protocol never reads
// the positions it reports; it hands them back in events (Event.Positions,
// StopNamed), so that the log never needs to look inside its messages.
type Log interface {
	// Durable is the index and stamp of the last entry on this process's
	// durable storage: what a grant reports.
	Durable() (uint64, edict.Stamp)
	// StopProof is the newest stop edict this process knows committed
	// (index 0 if none): what a wedge request names.
	StopProof() (uint64, edict.Stamp)
}
