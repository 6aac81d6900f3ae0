package client

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/edict"
)

// Endpoint is one member of the cluster as the client reaches it, with
// edictlog.Node's contract for both calls (errors included): a *edictlog.Node
// satisfies it, and so does an embedder's RPC stub that carries the calls
// to a remote member and its errors back. A stub that could not deliver a
// call (no connection, a refused dial) returns an error wrapping
// ErrNotSent, or a *edictlog.NotLeaderError, so that the client tries another
// member; any other failure after the call may have reached the member is
// final for a write.
type Endpoint interface {
	Apply(ctx context.Context, cmd []byte) (edictlog.ApplyResult, error)
	Read(ctx context.Context, level edictlog.ReadLevel, query []byte) (edictlog.ReadResult, error)
}

// ErrNotSent is what an Endpoint wraps when it did not deliver a call:
// nothing reached the member, so the client sends it elsewhere.
var ErrNotSent = errors.New("client: the call was not sent to the member")

// Config configures a Client.
type Config struct {
	// Endpoints are the members, by process id: at least one.
	Endpoints map[edict.ProcessID]Endpoint
	// MinBackoff and MaxBackoff bound the wait after every endpoint
	// refused in a row (defaults 10ms and 500ms): it starts at MinBackoff
	// and doubles up to MaxBackoff, each wait drawn at random between
	// half of it and all of it.
	MinBackoff, MaxBackoff time.Duration
	// AttemptTimeout bounds each attempt at one endpoint; 0 (the
	// default) leaves the caller's context alone to bound it. A
	// *edictlog.Node endpoint waits within the attempt for a leader it knows,
	// so an endpoint cut off from the cluster holds a call until the
	// attempt ends: a bound lets the client try another. But an attempt
	// that ends after the member appended the write leaves its outcome
	// unknown, which ends the call: set it well above a commit's time.
	AttemptTimeout time.Duration
}

// Client routes writes and reads over a cluster's endpoints (see the
// package documentation). Its methods are safe for concurrent use.
type Client struct {
	cfg Config
	ids []edict.ProcessID // sorted: the order of rounds

	mu     sync.Mutex
	leader edict.ProcessID // the last endpoint that led, or None
	// next is where the next follower or stale read starts.
	next atomic.Uint64
}

// New returns a Client over cfg.Endpoints.
func New(cfg Config) (*Client, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("client: no endpoints")
	}
	for id, ep := range cfg.Endpoints {
		if id == edict.None || ep == nil {
			return nil, fmt.Errorf("client: endpoint %v: a process id and an endpoint are both needed", id)
		}
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = 10 * time.Millisecond
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		cfg.MaxBackoff = max(cfg.MinBackoff, 500*time.Millisecond)
	}
	cfg.Endpoints = maps.Clone(cfg.Endpoints)
	return &Client{cfg: cfg, ids: slices.Sorted(maps.Keys(cfg.Endpoints))}, nil
}

// Leader is the endpoint the client last found leading, or edict.None.
func (c *Client) Leader() edict.ProcessID {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leader
}

func (c *Client) setLeader(id edict.ProcessID) {
	c.mu.Lock()
	c.leader = id
	c.mu.Unlock()
}

// Apply sends cmd to the leader and returns once a member has applied it
// (edictlog.Node.Apply). It follows refusals and waits out elections within
// ctx, sending cmd again only after a refusal made before anything was
// written (see the package documentation): a write it acknowledges was
// applied once; a write whose outcome is unknown comes back wrapping
// edictlog.ErrOutcomeUnknown and was applied at most once.
func (c *Client) Apply(ctx context.Context, cmd []byte) (edictlog.ApplyResult, error) {
	var res edictlog.ApplyResult
	err := c.route(ctx, c.Leader(), true, func(actx context.Context, ep Endpoint) (err error) {
		res, err = ep.Apply(actx, cmd)
		return err
	})
	return res, err
}

// Read answers query at level (edictlog.Node.Read): a lease read at the
// leader, a follower or stale read at any endpoint, each spread over the
// endpoints in turn. It is retried on the refusals Apply retries, and
// returns the state machine's own error (*edictlog.QueryError) as it is.
func (c *Client) Read(ctx context.Context, level edictlog.ReadLevel, query []byte) (edictlog.ReadResult, error) {
	first, lease := c.Leader(), true
	if level != edictlog.ReadLease {
		first, lease = c.ids[int(c.next.Add(1)-1)%len(c.ids)], false
	}
	var res edictlog.ReadResult
	err := c.route(ctx, first, lease, func(actx context.Context, ep Endpoint) (err error) {
		res, err = ep.Read(actx, level, query)
		return err
	})
	return res, err
}

// route runs call at first (or the first endpoint), and again after each
// refusal at the endpoint the refusal names, or the next one; after a
// round of refusals it backs off. A success at an endpoint makes it the
// leader when lead says the call needs one.
func (c *Client) route(ctx context.Context, first edict.ProcessID, lead bool, call func(context.Context, Endpoint) error) error {
	id := first
	if _, ok := c.cfg.Endpoints[id]; !ok {
		id = c.ids[0]
	}
	backoff := c.cfg.MinBackoff
	refused := 0 // refusals since the last back-off
	for {
		err := c.attempt(ctx, id, call)
		if err == nil {
			if lead {
				c.setLeader(id)
			}
			return nil
		}
		if !retryable(err) {
			return err
		}
		if ctx.Err() != nil {
			return gaveUp(err, ctx)
		}
		next, hinted := c.after(id, err)
		if c.Leader() == id && next != id {
			c.setLeader(edict.None)
		}
		if hinted && lead {
			c.setLeader(next)
		}
		refused++
		if refused >= len(c.ids) {
			// Every endpoint refused in a row, or the hints went round:
			// an election, or a leader not among the endpoints.
			if sleep(ctx, jitter(backoff)) != nil {
				return gaveUp(err, ctx)
			}
			backoff = min(2*backoff, c.cfg.MaxBackoff)
			refused = 0
		}
		id = next
	}
}

// attempt runs call at endpoint id within the attempt's bound.
func (c *Client) attempt(ctx context.Context, id edict.ProcessID, call func(context.Context, Endpoint) error) error {
	if c.cfg.AttemptTimeout <= 0 {
		return call(ctx, c.cfg.Endpoints[id])
	}
	actx, cancel := context.WithTimeout(ctx, c.cfg.AttemptTimeout)
	defer cancel()
	return call(actx, c.cfg.Endpoints[id])
}

// after says where to go after a refusal at id: the leader it names, if
// that is another endpoint (hinted), else the same endpoint for a write
// replaced by a new reign (it knows the new leader now), else the next
// endpoint in order.
func (c *Client) after(id edict.ProcessID, err error) (next edict.ProcessID, hinted bool) {
	var nl *edictlog.NotLeaderError
	if errors.As(err, &nl) && nl.Leader != edict.None && nl.Leader != id {
		if _, ok := c.cfg.Endpoints[nl.Leader]; ok {
			return nl.Leader, true
		}
	}
	if errors.Is(err, edictlog.ErrNotCommitted) {
		return id, false
	}
	i, _ := slices.BinarySearch(c.ids, id)
	return c.ids[(i+1)%len(c.ids)], false
}

// retryable reports whether a call's error says nothing was written: the
// refusals of the package documentation. An unknown outcome never is,
// whatever it wraps.
func retryable(err error) bool {
	if errors.Is(err, edictlog.ErrOutcomeUnknown) {
		return false
	}
	var nl *edictlog.NotLeaderError
	return errors.As(err, &nl) || errors.Is(err, edictlog.ErrShutdown) || errors.Is(err, edictlog.ErrNotCommitted) || errors.Is(err, ErrNotSent)
}

// gaveUp is the error of a call whose context ended between refusals:
// the last refusal, which still says nothing was written, and why the
// client stopped.
func gaveUp(last error, ctx context.Context) error {
	if errors.Is(last, ctx.Err()) {
		return last
	}
	return fmt.Errorf("%w; client gave up: %w", last, ctx.Err())
}

func jitter(d time.Duration) time.Duration {
	return d/2 + rand.N(d/2+1)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
