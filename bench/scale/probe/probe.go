// Command probe times a member of a cluster that serves etcd's v3 API (etcd
// or edictkv) for bench/scale/run.sh: when it becomes ready and when it has
// applied a given revision. It speaks the API's gRPC services directly
// (go.etcd.io/etcd/api/v3), so the same probe, with the same rules, times
// both systems.
//
//	probe rev  --endpoint HOST:PORT
//	probe wait --endpoint HOST:PORT [--readyz URL] [--rev N] [--since UNIXNANO] [--timeout D] [--interval D]
//
// rev prints the revision in the header of a linearizable Range at the
// endpoint (the revision the cluster has applied as of that read).
//
// wait polls every --interval until both of these have held once, and prints
// one line per condition, the seconds from --since (a wall-clock time in
// Unix nanoseconds, taken by the caller right before it started the member)
// to the first poll at which the condition held:
//
//	ready_s=1.234    --readyz (if given) answered 200, and a linearizable
//	                 Range at the endpoint succeeded
//	applied_s=2.345  (only with --rev) a serializable Range at revision N,
//	                 which the member answers from its own state, succeeded,
//	                 or was refused as compacted (the member is past N and
//	                 keeps no history back to it); "future revision" and any
//	                 failure to answer mean not yet
//
// A condition that has not held by --timeout makes wait exit 1, naming it and
// the last error it saw. The conditions are checked in turn within a poll, so
// their times are at most one poll (an interval plus the calls) apart from
// when they first became true.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
)

// probeKey is the key the probe reads. It need not exist: a Range of a
// missing key is answered like any other, with the header's revision.
const probeKey = "bench-scale-probe"

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
		os.Exit(1)
	}
}

func run(args []string, out io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: probe rev|wait --endpoint HOST:PORT [flags]")
	}
	fs := flag.NewFlagSet("probe "+args[0], flag.ContinueOnError)
	endpoint := fs.String("endpoint", "", "the member's gRPC address, host:port")
	timeout := fs.Duration("timeout", 10*time.Minute, "give up after this long")
	switch args[0] {
	case "rev":
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if *endpoint == "" {
			return errors.New("rev: --endpoint is required")
		}
		ctx, cancel := context.WithTimeout(context.Background(), *timeout)
		defer cancel()
		m, err := dial(*endpoint)
		if err != nil {
			return err
		}
		defer m.close()
		rev, err := m.linearizableRev(ctx)
		if err != nil {
			return fmt.Errorf("rev at %s: %w", *endpoint, err)
		}
		fmt.Fprintln(out, rev)
		return nil
	case "wait":
		readyz := fs.String("readyz", "", "a URL that answers 200 once the member is ready (etcd's and edictkv's /readyz)")
		rev := fs.Int64("rev", 0, "the revision the member must have applied (0: do not wait for one)")
		since := fs.Int64("since", 0, "when the clock starts, in Unix nanoseconds (0: now)")
		interval := fs.Duration("interval", 50*time.Millisecond, "time between polls")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		switch {
		case *endpoint == "":
			return errors.New("wait: --endpoint is required")
		case *rev < 0:
			return fmt.Errorf("wait: --rev %d is negative", *rev)
		case *interval <= 0:
			return fmt.Errorf("wait: --interval %v is not positive", *interval)
		}
		start := time.Now()
		if *since != 0 {
			start = time.Unix(0, *since)
		}
		ctx, cancel := context.WithTimeout(context.Background(), *timeout)
		defer cancel()
		m, err := dial(*endpoint)
		if err != nil {
			return err
		}
		defer m.close()
		res, err := m.wait(ctx, waitSpec{readyz: *readyz, rev: *rev, interval: *interval})
		if res.ready != nil {
			fmt.Fprintf(out, "ready_s=%.3f\n", res.ready.Sub(start).Seconds())
		}
		if res.applied != nil {
			fmt.Fprintf(out, "applied_s=%.3f\n", res.applied.Sub(start).Seconds())
		}
		if err != nil {
			return fmt.Errorf("wait at %s: %w", *endpoint, err)
		}
		return nil
	default:
		return fmt.Errorf("unknown command %q: want rev or wait", args[0])
	}
}

// member is a gRPC connection to one member and an HTTP client for its
// /readyz.
type member struct {
	conn *grpc.ClientConn
	kv   pb.KVClient
	http *http.Client
}

// dial connects lazily: the member may not listen yet. The reconnection
// backoff is short and flat, as gRPC's default (1 s, growing to 2 min) would
// otherwise be part of what is timed.
func dial(endpoint string) (*member, error) {
	conn, err := grpc.NewClient(endpoint,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 20 * time.Millisecond, Multiplier: 1, MaxDelay: 20 * time.Millisecond},
			MinConnectTimeout: time.Second,
		}),
		// Snapshots and bulk answers are not read here, but a Range of one
		// key must never fail for its size.
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(16<<20)))
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", endpoint, err)
	}
	return &member{conn: conn, kv: pb.NewKVClient(conn), http: &http.Client{Timeout: time.Second}}, nil
}

func (m *member) close() { m.conn.Close() }

// callTimeout bounds each call of a poll, so that a member that accepts a
// connection but does not answer is polled again rather than waited on.
const callTimeout = 2 * time.Second

func (m *member) linearizableRev(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	resp, err := m.kv.Range(ctx, &pb.RangeRequest{Key: []byte(probeKey)})
	if err != nil {
		return 0, err
	}
	return resp.GetHeader().GetRevision(), nil
}

// ready: /readyz (if given) answers 200 and a linearizable Range succeeds.
func (m *member) ready(ctx context.Context, readyz string) error {
	if readyz != "" {
		ctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, readyz, nil)
		if err != nil {
			return fmt.Errorf("readyz URL %q: %w", readyz, err)
		}
		resp, err := m.http.Do(req)
		if err != nil {
			return fmt.Errorf("readyz: %w", err)
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("readyz: %s: %s", resp.Status, strings.TrimSpace(string(body)))
		}
	}
	if _, err := m.linearizableRev(ctx); err != nil {
		return fmt.Errorf("linearizable range: %w", err)
	}
	return nil
}

// errNotYet: the member answered that rev is a future revision for it.
var errNotYet = errors.New("not applied yet")

// applied: a serializable Range at rev is answered (or refused as compacted).
func (m *member) applied(ctx context.Context, rev int64) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	_, err := m.kv.Range(ctx, &pb.RangeRequest{Key: []byte(probeKey), Revision: rev, Serializable: true})
	return appliedErr(err)
}

// appliedErr reads a serializable Range's outcome at a revision: nil when the
// member has applied it.
func appliedErr(err error) error {
	switch {
	case err == nil:
		return nil
	case rpctypes.ErrorDesc(err) == rpctypes.ErrorDesc(rpctypes.ErrGRPCCompacted):
		return nil
	case rpctypes.ErrorDesc(err) == rpctypes.ErrorDesc(rpctypes.ErrGRPCFutureRev):
		return fmt.Errorf("%w: %w", errNotYet, err)
	default:
		return fmt.Errorf("serializable range: %w", err)
	}
}

// cutShort says whether ctx has ended: a call that failed then was cut short
// by it. gRPC fails a call at the deadline by its own timer, which may fire
// before the context's, hence the clock.
func cutShort(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}

type waitSpec struct {
	readyz   string
	rev      int64
	interval time.Duration
}

// waitResult holds when each condition first held (nil: not yet).
type waitResult struct {
	ready, applied *time.Time
}

// wait polls until both conditions have held once, or ctx ends. The result
// holds the times of those that did, also when it returns an error.
func (m *member) wait(ctx context.Context, s waitSpec) (waitResult, error) {
	var res waitResult
	var lastReady, lastApplied error // the last answers before ctx ended
	tick := time.NewTicker(s.interval)
	defer tick.Stop()
	for {
		if res.ready == nil {
			if err := m.ready(ctx, s.readyz); err == nil {
				now := time.Now()
				res.ready = &now
			} else if !cutShort(ctx) {
				lastReady = err
			}
		}
		if s.rev > 0 && res.applied == nil {
			if err := m.applied(ctx, s.rev); err == nil {
				now := time.Now()
				res.applied = &now
			} else if !cutShort(ctx) {
				lastApplied = err
			}
		}
		if res.ready != nil && (s.rev == 0 || res.applied != nil) {
			return res, nil
		}
		select {
		case <-ctx.Done():
			// The member's own answers, not the calls cut short by the
			// deadline, say why a condition did not hold.
			if lastReady == nil {
				lastReady = ctx.Err()
			}
			if lastApplied == nil {
				lastApplied = ctx.Err()
			}
			var errs []error
			if res.ready == nil {
				errs = append(errs, fmt.Errorf("not ready (last: %w)", lastReady))
			}
			if s.rev > 0 && res.applied == nil {
				errs = append(errs, fmt.Errorf("revision %d not applied (last: %w)", s.rev, lastApplied))
			}
			return res, fmt.Errorf("%w: %w", ctx.Err(), errors.Join(errs...))
		case <-tick.C:
		}
	}
}
