package edictlog

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect"
	"github.com/edictlog/edictlog/fsm"
)

// Config configures a Node. The zero values of the optional fields are
// the defaults documented on each.
type Config struct {
	// ID is this process's id, non-zero and unique in the cluster.
	ID edict.ProcessID
	// Peers are the processes of the bootstrap epoch and their transport
	// addresses, this one included. The membership they give is used on
	// the first start only: later starts read it from the store. The
	// addresses are read on every start, and an address the log taught
	// later (stored under peers/) replaces the one given here: a member's
	// address changes through the log (Node.SetAddress, or the member's
	// own announcement when it starts on a new address, AddressAnnouncer),
	// and an address given here that the log has since changed is not
	// used.
	Peers map[edict.ProcessID]string
	// Join makes a first start join a running cluster instead of
	// bootstrapping one: the process counts itself in no epoch until the
	// log makes it a member — a learner once the leader adds it
	// (Node.AddLearner), a member once promoted (Node.Promote). Peers then
	// gives the addresses of the cluster's processes, and the bootstrap
	// epoch it records is theirs without this process (which Peers may
	// list, for its own address). The configurations that matter come
	// from the log. Without Join, a process listed in its own Peers would
	// take itself for a voting member of epoch 0 that no one else knows
	// of: it would campaign, and while it granted itself a lease it would
	// refuse the real leader's appends. Ignored on later starts.
	Join bool

	// Store holds the log and the stable records; Snapshots the FSM
	// snapshots; Transport carries messages; FSM is the state machine.
	// The Node uses them and closes none of them.
	Store     Store
	Snapshots SnapshotStore
	Transport Transport
	FSM       fsm.FSM

	// Clock is C_p. Default: edict.SystemClock (CLOCK_MONOTONIC_RAW,
	// suspend-aware) for the incarnation the Node bumps in Store.
	Clock edict.Clock
	// WrapClock, if set, is given the clock (Clock, or the default built
	// for the new incarnation) before the Node first reads it, and the
	// Node reads what it returns: a fault-injecting view of time for
	// whole-system tests. Node.Clock reports the wrapped clock.
	WrapClock func(edict.Clock) edict.Clock
	// Detector is the weak leader election; default elect.LowestLive.
	Detector elect.Detector
	// NewDetector, if set, builds the weak leader election instead of
	// Detector, once Start has bumped the incarnation durably and built
	// the clock: for an election that reads the Node's clock, or whose
	// identifiers must not repeat across restarts. It is given the new
	// incarnation and the clock the Node reads. If Start fails after
	// calling it, closing what it built is the caller's.
	NewDetector func(incarnation uint64, clock edict.Clock) (elect.Detector, error)

	// Rho is ρ, the drift bound every clock of the cluster must meet
	// (default 1e-3; see elect.Config.Rho for what it assumes).
	Rho float64
	// RoundTrip is d (default 10ms), RenewInterval is i (default 300ms),
	// MaxLease bounds δ and sets the restart quarantine (default
	// 2·(RoundTrip+RenewInterval)); see elect.Config.
	RoundTrip, RenewInterval, MaxLease time.Duration

	// SnapshotEvery takes an FSM snapshot after this many applied entries
	// (default 8192); TrailingEntries are kept in the log behind it
	// (default 1024), so a follower slightly behind catches up from the
	// log rather than a snapshot.
	SnapshotEvery, TrailingEntries uint64
	// SnapshotLogRatio holds an automatic snapshot of an FSM that keeps
	// its state in memory back, once SnapshotEvery entries have been
	// applied, until those entries' bytes add up to at least this
	// fraction of the newest snapshot's size (default 1; negative: not
	// held back). Writing out a large state every SnapshotEvery entries
	// costs the disk far more than the log does, and the log's writes,
	// the lease's records among them, queue behind it; with the default,
	// snapshots cost the disk at most about as many bytes as the log, and
	// the log keeps at most about the state's size beyond SnapshotEvery
	// entries. A state machine that keeps its own state (fsm.DiskFSM)
	// records snapshots that hold no copy of it, and is never held back.
	SnapshotLogRatio float64
	// MaxBatch bounds the proposals taken into one batch (default 1024).
	MaxBatch int
	// MaxUnsyncedEntries and MaxUnsyncedBytes bound the log entries (and
	// their payload bytes) handed to the store and not yet durable
	// (defaults 16384 and 64 MiB). Past either bound a leader takes no
	// new proposals (Apply waits, up to its context) and a follower
	// drops appends that carry entries (its leader sends them again), so
	// a disk slower than the clients costs bounded memory; lease traffic
	// is never held back.
	MaxUnsyncedEntries, MaxUnsyncedBytes int
	// MaxLeaderWait bounds how long a call (Apply, Read, a membership
	// change, ...) waits for a leader once refused for want of one:
	// then it returns the *NotLeaderError it would return when its
	// context ends, wrapping ErrLeaderWait. It is measured from the
	// first refusal, and its timer starts only then, so a call that
	// finds a leader costs nothing for it, where a context deadline costs
	// every call a timer. Zero (the default): only the context bounds
	// the wait.
	MaxLeaderWait time.Duration
	// Logger receives the Node's logs (default slog.Default()).
	Logger *slog.Logger
	// Seed seeds back-off jitter (default: from the incarnation).
	Seed uint64
}

func (c *Config) validate() error {
	switch {
	case c.ID == edict.None:
		return errors.New("edictlog: Config.ID must be non-zero")
	case c.Store == nil:
		return errors.New("edictlog: Config.Store is required")
	case c.Snapshots == nil:
		return errors.New("edictlog: Config.Snapshots is required")
	case c.Transport == nil:
		return errors.New("edictlog: Config.Transport is required")
	case c.FSM == nil:
		return errors.New("edictlog: Config.FSM is required")
	case c.Transport.ID() != c.ID:
		return fmt.Errorf("edictlog: Config.Transport is for %v, not Config.ID %v", c.Transport.ID(), c.ID)
	case c.Rho < 0 || c.Rho >= 0.5:
		return fmt.Errorf("edictlog: Config.Rho %g outside [0, 0.5)", c.Rho)
	case c.RoundTrip < 0 || c.RenewInterval < 0 || c.MaxLease < 0:
		return errors.New("edictlog: Config.RoundTrip, RenewInterval and MaxLease must not be negative")
	case c.MaxLeaderWait < 0:
		return errors.New("edictlog: Config.MaxLeaderWait must not be negative")
	case c.MaxBatch < 0 || c.MaxUnsyncedEntries < 0 || c.MaxUnsyncedBytes < 0:
		return errors.New("edictlog: Config.MaxBatch, MaxUnsyncedEntries and MaxUnsyncedBytes must not be negative")
	case c.Detector != nil && c.NewDetector != nil:
		return errors.New("edictlog: set Config.Detector or Config.NewDetector, not both")
	}
	others := 0
	for id := range c.Peers {
		if id == edict.None {
			return errors.New("edictlog: Config.Peers names process 0")
		}
		if id != c.ID {
			others++
		}
	}
	if c.Join && others == 0 {
		return errors.New("edictlog: Config.Join needs Config.Peers to name the cluster's processes")
	}
	return nil
}

func (c *Config) setDefaults() {
	ec := elect.Config{Rho: c.Rho, RoundTrip: c.RoundTrip, RenewInterval: c.RenewInterval, MaxLease: c.MaxLease}
	ec.ApplyDefaults()
	c.Rho, c.RoundTrip, c.RenewInterval, c.MaxLease = ec.Rho, ec.RoundTrip, ec.RenewInterval, ec.MaxLease
	if c.SnapshotEvery == 0 {
		c.SnapshotEvery = 8192
	}
	if c.TrailingEntries == 0 {
		c.TrailingEntries = 1024
	}
	if c.SnapshotLogRatio == 0 {
		c.SnapshotLogRatio = 1
	}
	if c.MaxBatch == 0 {
		c.MaxBatch = 1024
	}
	if c.MaxUnsyncedEntries == 0 {
		c.MaxUnsyncedEntries = 16384
	}
	if c.MaxUnsyncedBytes == 0 {
		c.MaxUnsyncedBytes = 64 << 20
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}
