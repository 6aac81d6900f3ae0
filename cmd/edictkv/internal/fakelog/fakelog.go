// Package fakelog stands in for edictlog.Node in the tests of edictkv's
// services and adapters: Log applies each command to a kvstate.State (on
// a memory backend) at once, at the next index, with a stamp of its own,
// and answers the read barrier from it.
// It can be told to lead or follow and to fail the way the log fails, so
// that a test reaches every outcome deterministically and without a
// cluster. The end-to-end tests (internal/process, cmd/edictkv) run the
// real log.
package fakelog

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/kvstate"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/mvcc"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/mvcc/backend"
	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/fsm"
)

// Log is a log of one process over a kvstate.State. The zero value is not
// usable: call New.
type Log struct {
	State *kvstate.State

	mu       sync.Mutex
	index    uint64
	self     edict.ProcessID
	leader   edict.ProcessID
	stale    time.Duration
	applyErr error
	readErr  error
	applied  []Applied
	// forwarders are the processes ApplyForwarded named, in order.
	forwarders []edict.ProcessID
}

// Applied is one command Apply took, with its index.
type Applied struct {
	Index uint64
	Req   *kvstate.Request
}

// New returns a Log of process 1 that leads, over an empty state on a
// memory backend whose compactions are performed at once, so that a
// physical compaction is answered.
func New() *Log {
	st, err := kvstate.Open(backend.NewMemory(), kvstate.Options{Store: mvcc.Options{Background: true}})
	if err != nil {
		// An empty memory backend always opens.
		panic(err)
	}
	return &Log{State: st, self: 1, leader: 1}
}

// Close closes the state.
func (l *Log) Close() error { return l.State.Close() }

// StampAt is the stamp Log gives the entry at index i: well formed, and
// distinct for every index.
func StampAt(i uint64) edict.Stamp {
	return edict.Stamp{Epoch: 1, Counter: i,
		QT: edict.QT{{Process: 1, T: edict.Time{Incarnation: 1, Nanos: int64(i)}}, {Process: 2, T: edict.Time{Incarnation: 1, Nanos: int64(i) + 1}}}}
}

// Follow makes the process follow leader (None: no leader known).
func (l *Log) Follow(leader edict.ProcessID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.leader = leader
}

// SetStaleness sets what a stale read reports as its staleness.
func (l *Log) SetStaleness(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stale = d
}

// FailApply makes every Apply return err, having appended nothing (nil:
// apply again).
func (l *Log) FailApply(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.applyErr = err
}

// FailRead makes every Read return err (nil: answer again).
func (l *Log) FailRead(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.readErr = err
}

// Skip applies n of the log's own entries (reign starts, configurations):
// revisions then have a gap, as in the real log.
func (l *Log) Skip(n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for range n {
		l.index++
		l.State.Apply(fsm.Entry{Index: l.index, Stamp: StampAt(l.index)})
	}
}

// Applied returns the commands applied so far through Apply.
func (l *Log) Applied() []Applied {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Applied(nil), l.applied...)
}

// Apply implements edictlog.Node.Apply's contract: a follower refuses with a
// *edictlog.NotLeaderError; a leader applies cmd at the next index and answers
// with the state machine's response.
func (l *Log) Apply(ctx context.Context, cmd []byte) (edictlog.ApplyResult, error) {
	if err := ctx.Err(); err != nil {
		return edictlog.ApplyResult{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.applyErr != nil {
		return edictlog.ApplyResult{}, l.applyErr
	}
	if l.leader != l.self {
		return edictlog.ApplyResult{}, &edictlog.NotLeaderError{Leader: l.leader, Err: edictlog.ErrNotLeader}
	}
	l.index++
	st := StampAt(l.index)
	res := l.State.Apply(fsm.Entry{Index: l.index, Stamp: st, Data: cmd})
	if r, err := kvstate.DecodeRequest(cmd); err == nil {
		l.applied = append(l.applied, Applied{Index: l.index, Req: r})
	}
	return edictlog.ApplyResult{Index: l.index, Stamp: st, Response: res}, nil
}

// Read implements edictlog.Node.Read's contract: a lease read needs this
// process to lead, a follower read a leader known; a stale read is always
// answered, from whatever is applied. The query goes to the state's

// ApplyForwarded applies as Apply does, and records from (Forwarders).
func (l *Log) ApplyForwarded(ctx context.Context, cmd []byte, from edict.ProcessID) (edictlog.ApplyResult, error) {
	l.mu.Lock()
	l.forwarders = append(l.forwarders, from)
	l.mu.Unlock()
	return l.Apply(ctx, cmd)
}

// Forwarders are the processes ApplyForwarded was told forwarded its
// writes, in order.
func (l *Log) Forwarders() []edict.ProcessID {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]edict.ProcessID(nil), l.forwarders...)
}

// Query (the empty one is the read barrier).
func (l *Log) Read(ctx context.Context, level edictlog.ReadLevel, query []byte) (edictlog.ReadResult, error) {
	if err := ctx.Err(); err != nil {
		return edictlog.ReadResult{}, err
	}
	l.mu.Lock()
	leader, stale, index, rerr := l.leader, l.stale, l.index, l.readErr
	l.mu.Unlock()
	if rerr != nil {
		return edictlog.ReadResult{}, rerr
	}
	served := level
	switch level {
	case edictlog.ReadLease:
		if leader != l.self {
			return edictlog.ReadResult{}, &edictlog.NotLeaderError{Leader: leader, Err: edictlog.ErrNotLeader}
		}
	case edictlog.ReadFollower:
		if leader == edict.None {
			return edictlog.ReadResult{}, &edictlog.NotLeaderError{Err: edictlog.ErrNoLeader}
		}
		if leader == l.self {
			served = edictlog.ReadLease
		}
	case edictlog.ReadStale:
	default:
		return edictlog.ReadResult{}, errors.New("fakelog: unknown read level")
	}
	data, err := l.State.Query(query)
	if err != nil {
		return edictlog.ReadResult{}, err
	}
	out := edictlog.ReadResult{Data: data, Level: served, Index: index}
	if served == edictlog.ReadStale {
		out.Staleness = stale
	}
	return out, nil
}
