package log

import (
	"context"
	"errors"
	"time"

	"github.com/edictlog/edictlog/edict"
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
	id    uint64
	index uint64
	lease bool // served under this process's lease: check it on answering
	done  chan struct{}
	res   ReadResult
	err   error
}

func (r *readRequest) finish(res ReadResult, err error) {
	select {
	case <-r.done:
		return
	default:
	}
	r.res, r.err = res, err
	close(r.done)
}

// ErrNoQuerier: Read needs an FSM that implements fsm.Querier.
var ErrNoQuerier = errors.New("log: the FSM does not answer queries (fsm.Querier)")

// Read answers query from the state machine at the given consistency
// level (DESIGN §6). The context's deadline covers the whole read.
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

func (n *Node) startRead(r *readRequest) {
	n.nextReadID++
	r.id = n.nextReadID
	n.readsByID[r.id] = r
	n.core.Read(n.now(), r.id, r.level)
}

func (n *Node) onReadState(rs ReadState) {
	r := n.readsByID[rs.ID]
	if r == nil {
		return
	}
	if rs.Err != nil {
		delete(n.readsByID, rs.ID)
		r.finish(ReadResult{}, &NotLeaderError{Leader: rs.Leader, Err: rs.Err})
		return
	}
	r.index = rs.Index
	r.lease = rs.Leader == n.cfg.ID && r.level != ReadStale
	r.res.Level = r.level
	if r.lease {
		r.res.Level = ReadLease
	}
	n.readWaits = append(n.readWaits, r)
	n.serveReads()
}

// serveReads lets go the reads whose index is applied. A lease read is
// let go only if C_p < E_p at this moment and no suspend happened since
// the reign began (DESIGN §3, §6; n.now checks the suspend).
func (n *Node) serveReads() {
	now := n.now()
	keep := n.readWaits[:0]
	for _, r := range n.readWaits {
		if r.index > n.appliedIdx {
			keep = append(keep, r)
			continue
		}
		delete(n.readsByID, r.id)
		if r.lease && !n.core.CanServeLease(now) {
			r.finish(ReadResult{}, &NotLeaderError{Leader: n.core.leaderHint, Err: ErrNotLeader})
			continue
		}
		r.res.Index = n.appliedIdx
		if r.level == ReadStale {
			r.res.Staleness = n.staleness(now)
		}
		r.finish(r.res, nil)
	}
	n.readWaits = keep
}

func (n *Node) staleness(now edict.Time) time.Duration {
	if n.core.CanServeLease(now) {
		return 0
	}
	if n.core.lastContact.IsZero() {
		return -1
	}
	d, ok := now.Sub(n.core.lastContact)
	if !ok {
		return -1
	}
	return d
}
