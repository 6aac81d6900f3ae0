// Package workload runs the clients of a Jepsen-style test against
// edictkv's HTTP API and records every operation in a history.
//
// Each client runs one operation at a time. An operation's completion
// says only what the answer proves: OK, Fail when edictkv's answer says it
// was not applied (no leader, compare failed, refused), and Info whenever
// the outcome is unknown (a timeout, a broken connection, 504/502
// outcome_unknown). A client whose operation ended Info takes a fresh
// process id, as in Jepsen: the unknown operation may still be in flight,
// and one process never has two.
package workload

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/edictlog/edictlog/cmd/edictkv/kvjson"
	"github.com/edictlog/edictlog/jepsen/history"
)

// outcome is what one HTTP request proved.
type outcome struct {
	typ   history.Type
	value *int64 // a read's value (nil: missing)
	err   string
	// unreachable: the node could not be connected to (it is down);
	// the client waits a moment before trying it again.
	unreachable bool
}

// api calls one edictkv node's HTTP API.
type api struct {
	http    *http.Client
	timeout time.Duration
}

func newAPI(timeout time.Duration) *api {
	return &api{timeout: timeout, http: &http.Client{Transport: &http.Transport{
		MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second, DisableCompression: true,
	}}}
}

func (a *api) do(ctx context.Context, method, addr, path string, q url.Values, body string) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	u := "http://" + addr + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	resp, err := a.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, b, err
}

func kvPath(key string) string { return "/v1/kv/" + url.PathEscape(key) }

// read reads key at level. A read changes nothing, so anything but an
// answer is a Fail.
func (a *api) read(ctx context.Context, addr, key, level string) outcome {
	code, b, err := a.do(ctx, http.MethodGet, addr, kvPath(key), url.Values{"consistency": {level}}, "")
	switch {
	case err != nil:
		return outcome{typ: history.Fail, err: err.Error(), unreachable: isDialError(err)}
	case code == http.StatusNotFound:
		return outcome{typ: history.OK}
	case code != http.StatusOK:
		return outcome{typ: history.Fail, err: errorText(code, b)}
	}
	var g kvjson.GetResponse
	if err := json.Unmarshal(b, &g); err != nil || g.Value == nil {
		return outcome{typ: history.Fail, err: fmt.Sprintf("unreadable answer %q: %v", b, err)}
	}
	v, err := strconv.ParseInt(*g.Value, 10, 64)
	if err != nil {
		return outcome{typ: history.Fail, err: fmt.Sprintf("value %q is not a number", *g.Value)}
	}
	return outcome{typ: history.OK, value: &v}
}

// write puts value at key; with prev, only if key holds prev (CAS).
func (a *api) write(ctx context.Context, addr, key string, value int64, prev *int64) outcome {
	var q url.Values
	if prev != nil {
		q = url.Values{"prev": {strconv.FormatInt(*prev, 10)}}
	}
	code, b, err := a.do(ctx, http.MethodPut, addr, kvPath(key), q, strconv.FormatInt(value, 10))
	return writeOutcome(code, b, err)
}

// writeOutcome classifies a write's answer. Only answers that say nothing
// was applied are Fails.
func writeOutcome(code int, body []byte, err error) outcome {
	if err != nil {
		// Sent or not, we cannot tell: a dial error is the one case
		// that certainly sent nothing.
		if isDialError(err) {
			return outcome{typ: history.Fail, err: err.Error(), unreachable: true}
		}
		return outcome{typ: history.Info, err: err.Error()}
	}
	switch code {
	case http.StatusOK:
		return outcome{typ: history.OK}
	case http.StatusConflict, http.StatusBadRequest, http.StatusNotFound:
		return outcome{typ: history.Fail, err: errorText(code, body)}
	case http.StatusServiceUnavailable:
		// no_leader and shutting_down: refused before anything was
		// appended; not_committed: appended, then another edict
		// committed at its index, so it never takes effect.
		return outcome{typ: history.Fail, err: errorText(code, body)}
	}
	return outcome{typ: history.Info, err: errorText(code, body)}
}

func isDialError(err error) bool {
	var ue *url.Error
	if !errors.As(err, &ue) {
		return false
	}
	return strings.Contains(ue.Err.Error(), "dial tcp") || strings.Contains(ue.Err.Error(), "connection refused")
}

func errorText(code int, body []byte) string {
	var e kvjson.ErrorJSON
	if json.Unmarshal(body, &e) == nil && e.Code != "" {
		return fmt.Sprintf("%d %s: %s", code, e.Code, e.Error)
	}
	return fmt.Sprintf("%d %s", code, strings.TrimSpace(string(body)))
}
