package route

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/cmd/edictkv/kvjson"
	"github.com/edictlog/edictlog/edict"
)

// HTTPForwarder sends HTTP calls on to the leader's HTTP API and relays
// its answers. The process it reaches sees the X-Edictkv-Forwarded-By
// header and, unless it leads, answers 421 Misdirected Request rather than
// forwarding again.
type HTTPForwarder struct {
	// Self marks forwarded calls.
	Self edict.ProcessID
	// Client sends them (default: http.DefaultClient).
	Client *http.Client
	// Timeout bounds one forwarded call, its answer included (default
	// 11s: a write's commit, 10s, and a second to relay it).
	Timeout time.Duration
	// Applied, if set, is given the revision a forwarded write reports
	// (X-Edictkv-Index) when the leader answered it 200, before the
	// answer is relayed, and returns once this process has applied that
	// revision or given up waiting: the answer then tells the client of a
	// write a stale read here already shows, as a member answers a
	// forwarded gRPC write (and etcd's members do).
	Applied func(ctx context.Context, revision int64)
}

// ForwardedHTTP reports whether another process forwarded r here.
func ForwardedHTTP(r *http.Request) bool { return r.Header.Get(kvjson.HeaderForwardedBy) != "" }

// ForwarderHTTP is the process that forwarded r here, or edict.None.
func ForwarderHTTP(r *http.Request) edict.ProcessID {
	id, err := strconv.ParseUint(r.Header.Get(kvjson.HeaderForwardedBy), 10, 64)
	if err != nil {
		return edict.None
	}
	return edict.ProcessID(id)
}

// Forward sends r, whose body was already read into body, to leader at
// addr, and copies the answer to w. It returns nil once the answer was
// relayed. It writes nothing to w and returns:
//
//   - a *edictlog.NotLeaderError naming leader when the call is worth another
//     look: leader refused it (421: it no longer leads), could not be
//     connected to, or, for a read (write false), failed in any way;
//   - an error wrapping edictlog.ErrOutcomeUnknown for a write whose
//     connection failed after it was sent: it may have been applied, and
//     is not sent again;
//   - the context's error when r's context ended (the client left).
func (f *HTTPForwarder) Forward(w http.ResponseWriter, r *http.Request, leader edict.ProcessID, addr string, body []byte, write bool) error {
	timeout := f.Timeout
	if timeout <= 0 {
		timeout = 11 * time.Second
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, r.Method, "http://"+addr+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		// The leader's address does not make a URL: another look may
		// find a better one.
		return &edictlog.NotLeaderError{Leader: leader, Err: fmt.Errorf("route: forward to %q: %w", addr, err)}
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	req.Header.Set(kvjson.HeaderForwardedBy, strconv.FormatUint(uint64(f.Self), 10))
	client := f.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		var op *net.OpError
		switch {
		case r.Context().Err() != nil:
			return r.Context().Err()
		case !write || (errors.As(err, &op) && op.Op == "dial"):
			// Nothing sent, or a read: look again.
			return &edictlog.NotLeaderError{Leader: leader, Err: fmt.Errorf("%w: %w", ErrUnreachable, err)}
		}
		return fmt.Errorf("%w: the leader (process %d at %s) did not answer a forwarded write: %w", edictlog.ErrOutcomeUnknown, leader, addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusMisdirectedRequest {
		return &edictlog.NotLeaderError{Leader: leader, Err: ErrMoved}
	}
	if write && resp.StatusCode == http.StatusOK && f.Applied != nil {
		if rev, err := strconv.ParseInt(resp.Header.Get(kvjson.HeaderIndex), 10, 64); err == nil && rev > 0 {
			f.Applied(ctx, rev)
		}
	}
	for k, vs := range resp.Header {
		if strings.HasPrefix(k, "X-Edictkv-") || k == "Content-Type" || k == "Retry-After" || k == "Location" {
			w.Header()[k] = vs
		}
	}
	w.WriteHeader(resp.StatusCode)
	// The status is sent: a failure to copy the body is the client's to
	// notice, as with any answer cut short.
	_, _ = io.Copy(w, resp.Body)
	return nil
}

// The reasons a forwarded call is routed again.
var (
	// ErrUnreachable: the leader could not be reached.
	ErrUnreachable = errors.New("route: the leader could not be reached")
	// ErrMoved: the process forwarded to no longer leads.
	ErrMoved = errors.New("route: the process forwarded to no longer leads")
	// ErrNoAddress: the leader's address for this API is not known.
	ErrNoAddress = errors.New("route: the leader's address is not known")
)
