package omega

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/edictlog/edictlog/edict"
)

// Variant names one of the paper's algorithms.
type Variant uint8

const (
	// Fig1 is the basic algorithm (§4, Fig. 1): communication-efficient,
	// reliable links, not stable.
	Fig1 Variant = iota + 1
	// Stable3 is the 3-stable algorithm for reliable links (§5, Fig. 2).
	Stable3
	// Stable6 is the 6-stable algorithm for lossy expiring links (§6.3,
	// Fig. 4).
	Stable6
	// ConstantTime is Fig. 4 with its line 20 replaced by Fig. 5 (§7):
	// 6-stable, election time 9δ in good periods (Theorem 5).
	ConstantTime
)

func (v Variant) String() string {
	switch v {
	case Fig1:
		return "omega-fig1"
	case Stable3:
		return "omega-stable3"
	case Stable6:
		return "omega-stable6"
	case ConstantTime:
		return "omega-constant"
	}
	return fmt.Sprintf("omega-variant(%d)", uint8(v))
}

// Stability is the k of the variant's k-stability (§3.3): 3 for Fig. 2
// (Theorem 2), 6 for Figs. 4 and 4+5 (Theorems 4, 5); 0 for Fig. 1, which
// the paper proves no k for (§5, problem scenarios 1 and 2).
func (v Variant) Stability() int {
	switch v {
	case Stable3:
		return 3
	case Stable6, ConstantTime:
		return 6
	}
	return 0
}

// Config configures one process's instance.
type Config struct {
	// ID is this process; it must be one of Members.
	ID edict.ProcessID
	// Members is the group Π. The paper numbers processes 0..n−1 and makes
	// k mod n the leader of round k; here the leader of round k is the
	// (k mod n)-th member in increasing id order, so round 0 belongs to the
	// lowest id.
	Members []edict.ProcessID
	// Incarnation counts this process's starts, from 1 (0 is taken as 1).
	// It is the incarnation of the clock readings the instance is given;
	// the instance asks for its first Tick at {Incarnation, 0}.
	Incarnation uint64
	// Delta is δ (§2): the bound on a message's delay once links are good.
	// Required. Links are assumed to be expiring (§6.1) with this δ: see
	// the package comment.
	Delta time.Duration
	// Eta is η, the period of the round leader's OK (task 0). The figures
	// use η = δ (footnote 7); default Delta.
	Eta time.Duration
	// Timeout is how long a process waits for the round leader's OK before
	// it gives up on the round ("timer > 2δ", Fig. 1 line 15, Fig. 2
	// line 18, Fig. 4 line 19). Default Eta+Delta, footnote 1's Δ = δ+η,
	// which is the figures' 2δ for η = δ. Raise it to absorb clock drift.
	Timeout time.Duration
	// AlertWindow is how long an ALERT from a higher round keeps a process
	// from electing (Fig. 4 line 16, "within 6δ"). Default 6·Delta.
	AlertWindow time.Duration
	// PingWait is how long a process collects PONGs before skipping the
	// rounds of silent processes (Fig. 5 line 20.2, "2δ"). Default
	// 2·Delta.
	PingWait time.Duration
}

// withDefaults validates c and fills in its defaults.
func (c Config) withDefaults() (Config, error) {
	if c.Delta <= 0 {
		return c, errors.New("omega: Config.Delta must be positive")
	}
	if c.Eta < 0 || c.Timeout < 0 || c.AlertWindow < 0 || c.PingWait < 0 {
		return c, errors.New("omega: negative duration in Config")
	}
	if c.Eta == 0 {
		c.Eta = c.Delta
	}
	if c.Timeout == 0 {
		c.Timeout = c.Eta + c.Delta
	}
	if c.AlertWindow == 0 {
		c.AlertWindow = 6 * c.Delta
	}
	if c.PingWait == 0 {
		c.PingWait = 2 * c.Delta
	}
	if c.Incarnation == 0 {
		c.Incarnation = 1
	}
	ms := slices.Clone(c.Members)
	slices.Sort(ms)
	if len(ms) == 0 {
		return c, errors.New("omega: no members")
	}
	for i, m := range ms {
		if m == edict.None {
			return c, errors.New("omega: member id 0 is not a process")
		}
		if i > 0 && ms[i-1] == m {
			return c, fmt.Errorf("omega: member %v listed twice", m)
		}
	}
	if !slices.Contains(ms, c.ID) {
		return c, fmt.Errorf("omega: %v is not a member", c.ID)
	}
	c.Members = ms
	return c, nil
}
