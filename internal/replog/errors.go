package replog

import (
	"errors"
	"fmt"
	"time"

	"github.com/edictlog/edictlog/edict"
)

// The Driver's answers. Package edictlog re-exports the sentinels (so
// errors.Is works across the boundary) and turns a *NotLeaderError into
// its own, whose doc says what each refusal promises a caller.

var (
	// ErrOutcomeUnknown: the write may or may not commit.
	ErrOutcomeUnknown = errors.New("edictlog: outcome unknown")
	// ErrNotCommitted: another edict committed at the write's index.
	ErrNotCommitted = errors.New("edictlog: write not committed: a new reign's edict took its index")
	// ErrShutdown: the Driver, or the Node around it, has stopped.
	ErrShutdown = errors.New("edictlog: node shut down")
)

// NotLeaderError is a refusal made before anything was written, naming
// where to retry: the leader this process knows of, a transfer's target,
// or None (edictlog.NotLeaderError documents each case).
type NotLeaderError struct {
	Leader edict.ProcessID
	Err    error
}

func (e *NotLeaderError) Error() string {
	if e.Leader == edict.None {
		return e.Err.Error() + " (no leader known)"
	}
	return fmt.Sprintf("%v (leader is %v)", e.Err, e.Leader)
}

func (e *NotLeaderError) Unwrap() error { return e.Err }

// notLeader turns the Core's refusals into a *NotLeaderError naming where
// to retry; other errors are returned as they are.
func notLeader(c *Core, err error) error {
	switch {
	case errors.Is(err, ErrNotLeader), errors.Is(err, ErrNotReady):
		return &NotLeaderError{Leader: c.leaderHint, Err: err}
	case errors.Is(err, ErrTransferring):
		target := c.leaderHint
		if c.lead != nil && c.lead.transfer != edict.None {
			target = c.lead.transfer
		}
		return &NotLeaderError{Leader: target, Err: err}
	case errors.Is(err, ErrStopped):
		return &NotLeaderError{Leader: edict.None, Err: err}
	}
	return err
}

// ApplyResult is a write's outcome: its index and stamp, and the state
// machine's answer.
type ApplyResult struct {
	Index    uint64
	Stamp    edict.Stamp
	Response any
}

// ReadResult says how a read may be answered: at least at Index, at
// Level, and, for a stale read, how stale (edictlog.ReadResult).
type ReadResult struct {
	Level     ReadLevel
	Index     uint64
	Staleness time.Duration
}
