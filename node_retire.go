package edictlog

import (
	"context"
	"time"

	"github.com/edictlog/edictlog/edict"
)

// retire is Shutdown's clean stop (replog.Core.Retire): it resigns,
// grants nothing more, and returns once the record that this life ended
// holding no live grant is durable, or with ctx's error, or ErrShutdown
// if the loop has stopped.
func (n *Node) retire(ctx context.Context) error {
	var at edict.Time
	if err := n.do(ctx, func() {
		n.d.Retire()
		at = n.core.RetiredAt()
		n.handleReady()
	}); err != nil {
		return err
	}
	for {
		var done bool
		if err := n.do(ctx, func() {
			// The loop ticks by NextTick, which names the lapse of the
			// last grant; a tick here only spares a turn.
			if done = n.core.Retired(); !done {
				n.d.Tick()
			}
		}); err != nil {
			return err
		}
		if done {
			return nil
		}
		if d, ok := at.Sub(n.clock.Now()); ok && d > 0 {
			// A clock other than the system's may not keep to real
			// time: look again every 50 ms at most.
			if err := n.sleep(ctx, min(d, 50*time.Millisecond)); err != nil {
				return err
			}
			continue
		}
		// The record is in a batch handed to the store, or is about to
		// be: wait for what was handed out to be durable.
		if err := n.waitDurable(ctx); err != nil {
			return err
		}
		if err := n.sleep(ctx, time.Millisecond); err != nil {
			return err
		}
	}
}

// sleep waits for d, unless ctx ends or the Node stops first.
func (n *Node) sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-n.done:
		return ErrShutdown
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Stop ends the Node without the clean stop's wait: a leader releases its
// lease and hands leadership over as in Shutdown, and the runtime stops
// at once. The leases this process granted may still stand, so nothing is
// recorded, and its next start sits out the restart quarantine of
// (1+ρ)·MaxLease, as after a crash. For teardowns where every process
// stops together, and tests; a process that is to serve again soon
// should use Shutdown. Like Shutdown, it closes neither the store nor the
// transport, and returns ctx's error if ctx ends before the runtime has
// stopped; once it has returned nil, as after Shutdown, nothing of this
// Node uses the stores or the state machine any more.
func (n *Node) Stop(ctx context.Context) error {
	_ = n.do(ctx, func() {
		n.core.Resign(n.d.Now())
		n.handleReady()
	})
	return n.stopRuntime(ctx, nil)
}
