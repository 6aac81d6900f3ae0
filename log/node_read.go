package log

import (
	"context"
	"errors"
	"time"

	"github.com/edictlog/edictlog/fsm"
)

// ReadResult is a read's answer and the guarantee it came with.
type ReadResult struct {
	Data []byte
	// Level is how the read was served: a follower read answered by the
	// leader itself is served as a lease read.
	Level ReadLevel
	// Index is the applied index the answer reflects at least.
	Index uint64
	// Staleness bounds, for a stale read, how old the answer may be: the
	// time since this process last heard from a leader (0 at the leader).
	// Negative when no leader has been heard from since the start.
	Staleness time.Duration
}

type readRequest struct {
	level ReadLevel
	query []byte
	done  chan struct{}
	res   ReadResult
	err   error
}

// finish is the Driver's answer, given once.
func (r *readRequest) finish(res ReadResult, err error) {
	r.res, r.err = res, err
	close(r.done)
}

// ErrNoQuerier: Read needs an FSM that implements fsm.Querier.
var ErrNoQuerier = errors.New("log: the FSM does not answer queries (fsm.Querier)")

// Read answers query from the state machine at the given consistency
// level (docs/protocol.md, "The replicated log"). The context's deadline covers the whole read.
func (n *Node) Read(ctx context.Context, level ReadLevel, query []byte) (ReadResult, error) {
	q, ok := n.cfg.FSM.(fsm.Querier)
	if !ok {
		return ReadResult{}, ErrNoQuerier
	}
	if err := n.alive(ctx); err != nil {
		return ReadResult{}, err
	}
	r := &readRequest{level: level, query: query, done: make(chan struct{})}
	select {
	case n.reads <- r:
	case <-n.done:
		return ReadResult{}, ErrShutdown
	case <-ctx.Done():
		return ReadResult{}, ctx.Err()
	}
	select {
	case <-r.done:
	case <-n.done:
		return ReadResult{}, ErrShutdown
	case <-ctx.Done():
		return ReadResult{}, ctx.Err()
	}
	if r.err != nil {
		return ReadResult{}, r.err
	}
	// The loop decided the read may be answered now; Query is safe to run
	// beside Apply and answers from a state at least at r.index.
	data, err := q.Query(query)
	if err != nil {
		return ReadResult{}, err
	}
	r.res.Data = data
	return r.res, nil
}

// startRead hands r to the Driver, which answers it once the state
// machine may (Driver.Read).
func (n *Node) startRead(r *readRequest) {
	n.d.Read(r.level, r.finish)
}
