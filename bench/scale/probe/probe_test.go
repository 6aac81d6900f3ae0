package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// fakeMember answers Range as an etcd member does: linearizable reads only
// once it is ready, serializable reads at a revision from its own applied
// revision (future above it, compacted below its oldest kept one).
type fakeMember struct {
	pb.UnimplementedKVServer
	mu        sync.Mutex
	isReady   bool
	rev       int64 // applied
	oldest    int64 // oldest revision kept
	readyAt   time.Time
	appliedAt time.Time
}

func (f *fakeMember) Range(_ context.Context, r *pb.RangeRequest) (*pb.RangeResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !r.Serializable && !f.isReady {
		return nil, rpctypes.ErrGRPCNoLeader
	}
	switch {
	case r.Revision > f.rev:
		return nil, rpctypes.ErrGRPCFutureRev
	case r.Revision != 0 && r.Revision < f.oldest:
		return nil, rpctypes.ErrGRPCCompacted
	}
	return &pb.RangeResponse{Header: &pb.ResponseHeader{Revision: f.rev}}, nil
}

func (f *fakeMember) setReady() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.isReady, f.readyAt = true, time.Now()
}

// apply moves the member to rev; with noHistory it keeps only rev, as a
// state without history does.
func (f *fakeMember) apply(rev int64, noHistory bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rev, f.appliedAt = rev, time.Now()
	if noHistory {
		f.oldest = rev
	}
}

func (f *fakeMember) readyz(w http.ResponseWriter, _ *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.isReady {
		http.Error(w, "not ready", http.StatusServiceUnavailable)
	}
}

// serve starts f on a loopback port; the returned address is its endpoint.
func serve(t *testing.T, f *fakeMember) (endpoint, readyz string) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	pb.RegisterKVServer(s, f)
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	h := httptest.NewServer(http.HandlerFunc(f.readyz))
	t.Cleanup(h.Close)
	return lis.Addr().String(), h.URL + "/readyz"
}

func TestAppliedErr(t *testing.T) {
	for _, c := range []struct {
		err     error
		applied bool
		notYet  bool
	}{
		{nil, true, false},
		{rpctypes.ErrGRPCCompacted, true, false},
		{rpctypes.ErrGRPCFutureRev, false, true},
		{rpctypes.ErrGRPCNoLeader, false, false},
		{status.Error(codes.Unavailable, "connection refused"), false, false},
	} {
		got := appliedErr(c.err)
		if (got == nil) != c.applied || errors.Is(got, errNotYet) != c.notYet {
			t.Errorf("appliedErr(%v) = %v; want applied %v, not yet %v", c.err, got, c.applied, c.notYet)
		}
	}
}

// TestWait: wait reports each condition no earlier than the member made it
// true, for a member with history and for one that keeps none (whose answer
// at an older revision is "compacted").
func TestWait(t *testing.T) {
	for _, noHistory := range []bool{false, true} {
		t.Run(fmt.Sprintf("noHistory=%v", noHistory), func(t *testing.T) {
			f := &fakeMember{rev: 1}
			endpoint, readyz := serve(t, f)
			since := time.Now()
			go func() {
				time.Sleep(30 * time.Millisecond)
				f.apply(50, noHistory)
				time.Sleep(30 * time.Millisecond)
				f.setReady()
				time.Sleep(30 * time.Millisecond)
				// past the revision waited for: still applied
				f.apply(60, noHistory)
			}()
			var out bytes.Buffer
			err := run([]string{"wait", "--endpoint", endpoint, "--readyz", readyz, "--rev", "55",
				"--since", strconv.FormatInt(since.UnixNano(), 10), "--interval", "5ms", "--timeout", "30s"}, &out)
			if err != nil {
				t.Fatalf("wait: %v (output %q)", err, out.String())
			}
			got := parse(t, out.String())
			f.mu.Lock()
			defer f.mu.Unlock()
			if min := f.readyAt.Sub(since).Seconds(); got["ready_s"] < min-0.001 {
				t.Errorf("ready_s=%.3f, before the member became ready (%.3f)", got["ready_s"], min)
			}
			if min := f.appliedAt.Sub(since).Seconds(); got["applied_s"] < min-0.001 {
				t.Errorf("applied_s=%.3f, before the member applied revision 60 (%.3f)", got["applied_s"], min)
			}
		})
	}
}

// TestWaitTimeout: a condition that never holds fails wait, naming it and
// the member's last answer, and the one that held is still reported.
func TestWaitTimeout(t *testing.T) {
	f := &fakeMember{rev: 10, isReady: true}
	endpoint, readyz := serve(t, f)
	var out bytes.Buffer
	err := run([]string{"wait", "--endpoint", endpoint, "--readyz", readyz, "--rev", "11",
		"--interval", "5ms", "--timeout", "200ms"}, &out)
	if err == nil {
		t.Fatalf("wait for a revision never applied succeeded: %q", out.String())
	}
	for _, want := range []string{"revision 11 not applied", "future revision"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if got := parse(t, out.String()); len(got) != 1 || got["ready_s"] < 0 {
		t.Errorf("output %q: want only ready_s", out.String())
	}
}

func TestRev(t *testing.T) {
	f := &fakeMember{rev: 42, isReady: true}
	endpoint, _ := serve(t, f)
	var out bytes.Buffer
	if err := run([]string{"rev", "--endpoint", endpoint, "--timeout", "10s"}, &out); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(out.String()); got != "42" {
		t.Errorf("rev printed %q, want 42", got)
	}
}

func TestBadArgs(t *testing.T) {
	for _, args := range [][]string{
		nil,
		{"nope"},
		{"rev"},
		{"wait"},
		{"wait", "--endpoint", "127.0.0.1:1", "--rev", "-1"},
		{"wait", "--endpoint", "127.0.0.1:1", "--interval", "0s"},
	} {
		if err := run(args, &bytes.Buffer{}); err == nil {
			t.Errorf("run(%q) succeeded", args)
		}
	}
}

// parse reads wait's key=seconds lines.
func parse(t *testing.T, s string) map[string]float64 {
	t.Helper()
	m := map[string]float64{}
	for _, line := range strings.Fields(s) {
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("line %q is not key=value", line)
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		m[k] = f
	}
	return m
}
