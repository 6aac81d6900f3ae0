package fetzer

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/edictlog/edictlog/edict"
)

// Config configures one Elector. Zero timing fields take the defaults
// below, which satisfy every constraint of §IX for the simulator's network
// (delays 1–5ms, so δ = 5ms and δmin = 1ms).
type Config struct {
	// ID is this process; Members is 𝒫 (ID must be one of them).
	ID      edict.ProcessID
	Members []edict.ProcessID
	// Incarnation counts this process's starts from 1 (0 means 1). A
	// process past its first start waits LockTime before its first
	// supportive reply; see "Recovery" in the package doc.
	Incarnation uint64

	// Delta is Δ (§IV): a message whose calculated delay bound is at most
	// Δ is "fast". It must exceed the bound the round-trip calculation
	// gives a timely message, 2δ − δmin (see fast.go). Default 15ms (the
	// value of §XI).
	Delta time.Duration
	// DeltaMin is δmin (§III), the least transmission delay. Default 1ms.
	DeltaMin time.Duration
	// Sigma is σ (§III), the scheduling time-out delay. Default 10ms.
	Sigma time.Duration
	// EP is the election period (§VIII). Default 100ms: the least round
	// multiple of 10ms for which the two bounds on lockTime of §IX C.2 leave
	// room (EP ≳ 3Δ + 2σ − δmin).
	EP time.Duration
	// Expires is how long an alive-set entry lasts without a new fast
	// message (§VIII). Default 300ms, about twice the lower bound of §IX C,
	// so that one lost Election does not empty the alive-sets (§IX C
	// suggests "a small multiple"; §XI used about four).
	Expires time.Duration
	// LockTime is how long a supportive reply binds its sender (§VIII).
	// Default: the upper bound of §IX C.2, as the paper chooses it.
	LockTime time.Duration
	// Rho is ρ (§III), the clocks' drift bound. Default 1e-4.
	Rho float64

	// Majority selects the majority mode of §X: minNumSupporters =
	// ⌈(N+1)/2⌉, so only a logical partition of a majority has a leader
	// and there is at most one leader at a time. Off, minNumSupporters = 1
	// and every stable partition elects a local leader.
	Majority bool
}

// Defaults, see Config.
const (
	DefaultDelta    = 15 * time.Millisecond
	DefaultDeltaMin = 1 * time.Millisecond
	DefaultSigma    = 10 * time.Millisecond
	DefaultEP       = 100 * time.Millisecond
	DefaultExpires  = 300 * time.Millisecond
	DefaultRho      = 1e-4
)

// MaxMembers bounds |𝒫|, and so every set a message carries.
const MaxMembers = 1024

// withDefaults fills the zero fields.
func (c Config) withDefaults() Config {
	c.Members = slices.Clone(c.Members)
	slices.Sort(c.Members)
	if c.Incarnation == 0 {
		c.Incarnation = 1
	}
	if c.Delta == 0 {
		c.Delta = DefaultDelta
	}
	if c.DeltaMin == 0 {
		c.DeltaMin = DefaultDeltaMin
	}
	if c.Sigma == 0 {
		c.Sigma = DefaultSigma
	}
	if c.EP == 0 {
		c.EP = DefaultEP
	}
	if c.Expires == 0 {
		c.Expires = DefaultExpires
	}
	if c.Rho == 0 {
		c.Rho = DefaultRho
	}
	if c.LockTime == 0 {
		c.LockTime = c.LockTimeMax()
	}
	return c
}

func scale(d time.Duration, f float64) time.Duration {
	return time.Duration(math.Round(float64(d) * f))
}

// LockTimeMax is the upper bound of §IX C.2,
// lockTime ≤ (1−ρ)[(EP−σ)(1−ρ) − Δ + δmin]: a lock taken just before the
// candidate's Election m1 ends before its next Election m2 arrives (Fig.
// 21). The pseudo-code of Fig. 30 initialises lockTime to
// (1−ρ)(EP(1−ρ) − Δ + δmin), without σ; we follow the text (see doc.go).
func (c Config) LockTimeMax() time.Duration {
	r := c.Rho
	return scale(scale(c.EP-c.Sigma, 1-r)-c.Delta+c.DeltaMin, 1-r)
}

// LockTimeMin is the lower bound of §IX C.2, lockTime > (2Δ+σ)(1+3ρ): a
// leadership of lockTime(1−2ρ) must outlast the 2Δ(1+ρ)+σ(1+ρ) the
// release timer takes, or a leader is demoted before it is elected.
func (c Config) LockTimeMin() time.Duration {
	return scale(2*c.Delta+c.Sigma, 1+3*c.Rho)
}

// ExpiresMin is the larger of the two lower bounds of §IX C (Fig. 19): two
// successive Elections of a timely candidate arrive within
// (1+ρ)(EP(1+ρ) + Δ − δmin), and two successive replies within
// EP + 2(1+ρ)(Δ − δmin).
func (c Config) ExpiresMin() time.Duration {
	r := c.Rho
	a := scale(scale(c.EP, 1+r)+c.Delta-c.DeltaMin, 1+r)
	b := c.EP + scale(c.Delta-c.DeltaMin, 2*(1+r))
	return max(a, b)
}

// Kappa is κ, the maximum election time: the timeliness bound of §IX C.1,
// κ > (expires + σ + EP)(1+ρ) + 2Δ, which is also at least the bound for
// bounded inconsistency of §IX D, κ ≥ 2Δ + (1+ρ)(expires + lockTime(1−2ρ)).
// Kappa returns the larger bound plus 1µs, to make the first strict.
func (c Config) Kappa() time.Duration {
	c = c.withDefaults()
	r := c.Rho
	t := scale(c.Expires+c.Sigma+c.EP, 1+r) + 2*c.Delta
	bi := 2*c.Delta + scale(c.Expires+scale(c.LockTime, 1-2*r), 1+r)
	return max(t, bi) + time.Microsecond
}

// MinSupporters is minNumSupporters (Fig. 30, §X).
func (c Config) MinSupporters() int {
	if c.Majority {
		return len(c.Members)/2 + 1 // ⌈(N+1)/2⌉
	}
	return 1
}

// Validate refuses a configuration that breaks the paper's constraints,
// naming the constraint.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.ID == edict.None:
		return errors.New("fetzer: config without an ID")
	case len(c.Members) == 0 || len(c.Members) > MaxMembers:
		return fmt.Errorf("fetzer: %d members (want 1..%d)", len(c.Members), MaxMembers)
	case slices.Contains(c.Members, edict.None):
		return errors.New("fetzer: member id 0")
	case len(slices.Compact(slices.Clone(c.Members))) != len(c.Members):
		return errors.New("fetzer: duplicate member ids")
	case !slices.Contains(c.Members, c.ID):
		return fmt.Errorf("fetzer: ID %d is not a member", c.ID)
	case c.Rho < 0 || c.Rho >= 0.01:
		return fmt.Errorf("fetzer: ρ = %g outside [0, 0.01): the paper neglects ρ² (§III)", c.Rho)
	case c.Delta <= 0 || c.DeltaMin < 0 || c.Sigma < 0 || c.EP <= 0 || c.Expires <= 0:
		return errors.New("fetzer: negative or zero time parameter")
	case c.DeltaMin >= c.Delta:
		return fmt.Errorf("fetzer: δmin = %v must be below Δ = %v (§IV: Δ > δ ≥ δmin)", c.DeltaMin, c.Delta)
	case c.EP <= c.Sigma:
		return fmt.Errorf("fetzer: EP = %v must exceed σ = %v (§IX C.2 schedules within [EP−σ, EP])", c.EP, c.Sigma)
	case c.LockTime <= c.LockTimeMin():
		return fmt.Errorf("fetzer: lockTime = %v must exceed (2Δ+σ)(1+3ρ) = %v (§IX C.2, lower bound); raise EP", c.LockTime, c.LockTimeMin())
	case c.LockTime > c.LockTimeMax():
		return fmt.Errorf("fetzer: lockTime = %v must be at most (1−ρ)[(EP−σ)(1−ρ)−Δ+δmin] = %v (§IX C.2, upper bound)", c.LockTime, c.LockTimeMax())
	case c.Expires <= c.ExpiresMin():
		return fmt.Errorf("fetzer: expires = %v must exceed %v (§IX C, Fig. 19)", c.Expires, c.ExpiresMin())
	}
	return nil
}
