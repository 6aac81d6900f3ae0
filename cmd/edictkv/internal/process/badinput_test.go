package process

import (
	"net/http"
	"strings"
	"testing"

	"github.com/edictlog/edictlog/cmd/edictkv/internal/kvservice"
	"github.com/edictlog/edictlog/cmd/edictkv/kvjson"
	"github.com/edictlog/edictlog/edict"
)

// Every bad input is a 4xx whose JSON says what was wrong, and changes
// nothing: the key keeps its value and the log does not grow.
func TestBadInputChangesNothing(t *testing.T) {
	c := startCluster(t, 3, func(cfg *Config) {
		cfg.Limits, cfg.MaxBodyBytes = kvservice.Limits{MaxKeyBytes: 16, MaxValueBytes: 32}, 256
	})
	leader := c.leader()
	f := c.follower(leader)
	mustStatus(t, do(t, http.MethodPut, c.url(f, "/v1/kv/k"), "original"), http.StatusOK)
	cases := []struct {
		name, method, path, body string
		status                   int
		code, text               string
	}{
		{"control character in key", "PUT", "/v1/kv/a%01b", "x", 400, kvjson.CodeInvalidKey, "control character U+0001 at byte 1"},
		{"NUL in key", "PUT", "/v1/kv/%00edictkv/http/1", "x", 400, kvjson.CodeInvalidKey, "control character U+0000"},
		{"key not UTF-8", "PUT", "/v1/kv/%ff", "x", 400, kvjson.CodeInvalidKey, "not valid UTF-8"},
		{"empty key", "PUT", "/v1/kv/", "x", 400, kvjson.CodeInvalidKey, "empty key"},
		{"oversized key", "PUT", "/v1/kv/" + strings.Repeat("k", 17), "x", 414, kvjson.CodeKeyTooLarge, "key of 17 bytes exceeds the limit of 16"},
		{"oversized value", "PUT", "/v1/kv/k", strings.Repeat("v", 33), 413, kvjson.CodeValueTooLarge, "value exceeds the limit of 32 bytes"},
		{"unknown parameter", "PUT", "/v1/kv/k?ttl=5", "x", 400, kvjson.CodeUnknownParameter, `unknown parameter "ttl" for PUT`},
		{"parameter of another method", "DELETE", "/v1/kv/k?cas=1", "", 400, kvjson.CodeUnknownParameter, `unknown parameter "cas" for DELETE`},
		{"unknown consistency", "GET", "/v1/kv/k?consistency=strong", "", 400, kvjson.CodeBadParameter, `consistency="strong": want lease, follower or stale`},
		{"cas not a number", "PUT", "/v1/kv/k?cas=abc", "x", 400, kvjson.CodeBadParameter, `cas="abc": want a log index`},
		{"cas and prev", "PUT", "/v1/kv/k?cas=1&prev=original", "x", 400, kvjson.CodeBadParameter, "cas and prev are exclusive"},
		{"repeated parameter", "PUT", "/v1/kv/k?cas=1&cas=2", "x", 400, kvjson.CodeBadParameter, `parameter "cas" given 2 times`},
		{"bad redirect value", "PUT", "/v1/kv/k?redirect=maybe", "x", 400, kvjson.CodeBadParameter, `redirect="maybe"`},
		{"method", "PATCH", "/v1/kv/k", "x", 405, kvjson.CodeMethod, "method PATCH not allowed"},
		{"malformed JSON", "POST", "/v1/cluster/learners", `{"id": 4,`, 400, kvjson.CodeMalformedJSON, "malformed JSON body: unexpected EOF"},
		{"JSON of the wrong type", "POST", "/v1/cluster/promote", `{"id": "four"}`, 400, kvjson.CodeMalformedJSON, "cannot unmarshal string"},
		{"unknown JSON field", "POST", "/v1/cluster/remove", `{"id": 3, "force": true}`, 400, kvjson.CodeMalformedJSON, `unknown field "force"`},
		{"trailing JSON", "POST", "/v1/cluster/transfer", `{"id": 2} {"id": 3}`, 400, kvjson.CodeMalformedJSON, "data after the JSON value"},
		{"oversized JSON body", "POST", "/v1/cluster/transfer", `{"id": 2` + strings.Repeat(" ", 300) + `}`, 413, kvjson.CodeValueTooLarge, "body exceeds the limit of 256 bytes"},
		{"learner without addresses", "POST", "/v1/cluster/learners", `{"id": 4}`, 400, kvjson.CodeInvalidRequest, "raft_addr and http_addr are required"},
		{"process id 0", "POST", "/v1/cluster/remove", `{"id": 0}`, 400, kvjson.CodeInvalidRequest, "positive process id"},
		// Refused before the registry write, which would have replaced
		// process 2's HTTP address.
		{"learner already a member", "POST", "/v1/cluster/learners", `{"id": 2, "raft_addr": "127.0.0.1:1", "http_addr": "127.0.0.1:2"}`, 409, kvjson.CodeInvalidRequest, "already in epoch"},
		{"recover without confirmation", "POST", "/v1/cluster/recover", `{"survivors": [1]}`, 400, kvjson.CodeInvalidRequest, "can lose acknowledged writes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Through the leader and through a follower: a follower must
			// refuse bad input itself, not forward it.
			for _, via := range []edict.ProcessID{leader, f} {
				before := c.procs[leader].Node.Status().LastIndex
				a := do(t, tc.method, c.url(via, tc.path), tc.body)
				if a.status != tc.status {
					t.Fatalf("via %d: status %d, want %d; body %s", via, a.status, tc.status, a.body)
				}
				e := a.errorBody(t)
				if e.Code != tc.code || !strings.Contains(e.Error, tc.text) {
					t.Fatalf("via %d: error %+v, want code %s and text %q", via, e, tc.code, tc.text)
				}
				if after := c.procs[leader].Node.Status().LastIndex; after != before {
					t.Fatalf("via %d: the log grew from %d to %d", via, before, after)
				}
				g := do(t, http.MethodGet, c.url(leader, "/v1/kv/k"), "")
				mustStatus(t, g, http.StatusOK)
				var kv kvjson.GetResponse
				g.json(t, &kv)
				if *kv.Value != "original" || kv.Version != 1 {
					t.Fatalf("via %d: key k is now %+v", via, kv)
				}
				if n := keyCount(c.procs[leader]); n != 1 {
					t.Fatalf("via %d: %d keys, want 1", via, n)
				}
			}
		})
	}
}
