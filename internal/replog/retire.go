package replog

import (
	"errors"
	"fmt"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
)

// A clean stop (docs/protocol.md, "A clean stop ends the quarantine").
// The restart quarantine stands in for grants a crash made the process
// forget. A process that ends its life on purpose can forget none: it
// stops granting, waits until every grant it made has lapsed by its own
// clock, and records so durably, naming its incarnation. The next life,
// and only that one, starts without the quarantine; a crash before the
// record is durable leaves none, and the next life is quarantined as
// before.

// Retire begins this life's clean end: a leader resigns first (Resign:
// its lease released, leadership handed to the most up-to-date member),
// and the lease core grants nothing more (elect.Core.Retire). Once every
// grant has lapsed the clean-stop record joins the next Ready's batch;
// Retired reports when it is durable. The Core goes on following the log
// meanwhile. Retire cannot be undone.
func (c *Core) Retire(now edict.Time) {
	c.advanceClock(now)
	if c.el.Retiring() {
		return
	}
	c.Resign(now)
	c.el.Retire(now)
	c.drainElect(now)
	c.afterStep(now)
}

// Retiring reports whether Retire was called.
func (c *Core) Retiring() bool { return c.el.Retiring() }

// Retired reports whether the clean-stop record is durable: the process
// may stop, and its next start skips the restart quarantine.
func (c *Core) Retired() bool { return c.retireSeq != 0 && c.syncedTo >= c.retireSeq }

// RetiredAt is the reading at which the last grant of a retiring process
// lapses (elect.Core.RetiredAt): how long a clean stop waits.
func (c *Core) RetiredAt() edict.Time { return c.el.RetiredAt() }

// onRetired puts the clean-stop record in the Ready being built: its
// batch is the next Ready's, whose Sync is one above the last handed out.
func (c *Core) onRetired(now edict.Time) {
	c.setStable(wire.KeyCleanStop, wire.EncodeUint64(now.Incarnation))
	c.retireSeq = c.syncSeq + 1
}

// cleanStopBefore reports whether the clean-stop record names the life
// right before incarnation inc, the one Recover just began.
func cleanStopBefore(s interface{ Get(string) ([]byte, error) }, inc uint64) (bool, error) {
	b, err := s.Get(wire.KeyCleanStop)
	if errors.Is(err, wire.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("edictlog: read the clean-stop record: %w", err)
	}
	stopped, err := wire.DecodeUint64(wire.KeyCleanStop, b)
	if err != nil {
		return false, fmt.Errorf("edictlog: %w", err)
	}
	if mutated(RuleCleanRecordCleared) {
		return stopped < inc, nil
	}
	return stopped+1 == inc, nil
}

// Retire is Core.Retire at a fresh reading.
func (d *Driver) Retire() { d.core.Retire(d.Now()) }
