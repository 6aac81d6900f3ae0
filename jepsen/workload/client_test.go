package workload

import (
	"errors"
	"net/http"
	"net/url"
	"testing"

	"github.com/edictlog/edictlog/jepsen/history"
)

// A write is a Fail only when edictkv's answer proves it had no effect;
// everything else that is not OK is unknown (Info).
func TestWriteOutcome(t *testing.T) {
	body := func(code string) []byte { return []byte(`{"code":"` + code + `","message":"m"}`) }
	for _, c := range []struct {
		name string
		code int
		body []byte
		err  error
		want history.Type
	}{
		{"ok", http.StatusOK, nil, nil, history.OK},
		{"compare failed", http.StatusConflict, body("cas_failed"), nil, history.Fail},
		{"no leader", http.StatusServiceUnavailable, body("no_leader"), nil, history.Fail},
		{"not committed: replaced by a new reign's edict", http.StatusServiceUnavailable, body("not_committed"), nil, history.Fail},
		{"outcome unknown", http.StatusGatewayTimeout, body("outcome_unknown"), nil, history.Info},
		{"forward broke", http.StatusBadGateway, body("outcome_unknown"), nil, history.Info},
		{"internal", http.StatusInternalServerError, body("internal"), nil, history.Info},
		{"refused connection", 0, nil, &url.Error{Op: "Put", URL: "http://x", Err: errors.New("dial tcp: connection refused")}, history.Fail},
		{"broken connection", 0, nil, &url.Error{Op: "Put", URL: "http://x", Err: errors.New("EOF")}, history.Info},
	} {
		if got := writeOutcome(c.code, c.body, c.err).typ; got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
