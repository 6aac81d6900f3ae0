package process

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edictlog/edictlog/cmd/edictkv/internal/httpapi"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/kvservice"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/route"
	"github.com/edictlog/edictlog/cmd/edictkv/kvjson"
	"github.com/edictlog/edictlog/edict"
)

// fuzzNode is one single-member process and a Server over its Node with
// short timeouts: built once per fuzz worker, not once per input, since a
// real Node costs a bbolt file, a transport and an election.
type fuzzNode struct {
	dir    string
	n      int
	proc   *Process
	srv    *httpapi.Server
	router *route.Router
}

func newFuzzNode(f *testing.F) *fuzzNode {
	fx := &fuzzNode{dir: f.TempDir()}
	if err := fx.start(); err != nil {
		f.Fatal(err)
	}
	f.Cleanup(fx.close)
	return fx
}

// start starts a fresh node; it returns errors rather than failing, as it
// runs both in the fuzz target's setup and inside the fuzz function.
func (fx *fuzzNode) start() error {
	fx.n++
	cfg := Config{ID: 1, DataDir: filepath.Join(fx.dir, strconv.Itoa(fx.n)), RaftAddr: "127.0.0.1:0",
		HTTPAddr: "127.0.0.1:0", ClusterID: "fuzz", Logger: quietLogger()}
	p, err := Listen(cfg)
	if err != nil {
		return err
	}
	if err := p.Start(map[edict.ProcessID]Peer{1: {RaftAddr: p.RaftAddr(), HTTPAddr: p.HTTPAddr()}}); err != nil {
		return err
	}
	// The handler under test is a Server of its own over the process's
	// Node, with the limits of badinput_test.go and short waits: an input
	// that makes the cluster lose its leader (promoting a learner that does
	// not exist) then costs about a second, not the default 3s+10s.
	kv, err := kvservice.New(kvservice.Config{Log: p.Node, State: p.State, Limits: kvservice.Limits{MaxKeyBytes: 16, MaxValueBytes: 32},
		Timeout: time.Second})
	if err != nil {
		_ = p.Close()
		return err
	}
	router := route.New(p.Node, 200*time.Millisecond)
	srv, err := httpapi.New(httpapi.Config{ID: 1, Node: p.Node, KV: kv, Router: router, Directory: p.dir,
		MaxBodyBytes: 256, Timeout: time.Second, Logger: quietLogger(), Client: &http.Client{Timeout: time.Second}})
	if err != nil {
		router.Close()
		_ = p.Close()
		return err
	}
	fx.router = router
	fx.proc, fx.srv = p, srv
	return fx.waitLeader()
}

func (fx *fuzzNode) close() {
	fx.router.Close()
	_ = fx.proc.Close()
}

func (fx *fuzzNode) waitLeader() error {
	deadline := time.Now().Add(20 * time.Second)
	for !fx.proc.Node.Status().IsLeader {
		if time.Now().After(deadline) {
			return errors.New("the fuzz node did not lead within 20s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}

// healthy reports whether the node still leads a cluster of itself alone.
// An input may legitimately change that (add a learner, promote it, hand
// leadership away); the next input then gets a fresh node, so that what
// one input does cannot turn every later one into a 503.
func (fx *fuzzNode) healthy() bool {
	st := fx.proc.Node.Status()
	return st.IsLeader && len(st.Learners) == 0 && slices.Equal(st.Members, []edict.ProcessID{1})
}

// serve parses raw the way net/http's server does, hands it to the
// handler and returns the answer; ok is false for a request the server
// would have refused before any handler ran.
func (fx *fuzzNode) serve(method, target, headers string, body []byte) (rec *httptest.ResponseRecorder, ok bool) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: fuzz\r\n", method, target)
	for _, line := range strings.Split(headers, "\n") {
		// One header per line; the framing headers are the fuzzer's to
		// get wrong only through the body's length, which is set below.
		line = strings.TrimRight(line, "\r")
		name, _, _ := strings.Cut(line, ":")
		if line == "" || strings.EqualFold(name, "Content-Length") || strings.EqualFold(name, "Transfer-Encoding") {
			continue
		}
		b.WriteString(line + "\r\n")
	}
	fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n", len(body))
	b.Write(body)
	req, err := http.ReadRequest(bufio.NewReader(&b))
	if err != nil {
		return nil, false
	}
	req.RemoteAddr = "127.0.0.1:1"
	rec = httptest.NewRecorder()
	fx.srv.ServeHTTP(rec, req)
	return rec, true
}

// checkAnswer holds every answer to the properties of docs/protocol.md, "The simulator": a valid
// status, and a 4xx is a JSON {"error","code"} that changed nothing.
// lastBefore and keysBefore are the log's last index and the key count
// before the request.
func (fx *fuzzNode) checkAnswer(t *testing.T, what string, rec *httptest.ResponseRecorder, lastBefore uint64, keysBefore int) {
	t.Helper()
	if rec.Code < 200 || rec.Code > 599 {
		t.Fatalf("%s: status %d", what, rec.Code)
	}
	if rec.Code < 400 || rec.Code > 499 {
		return
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("%s: %d with Content-Type %q: %q", what, rec.Code, ct, rec.Body.Bytes())
	}
	var e kvjson.ErrorJSON
	dec := json.NewDecoder(bytes.NewReader(rec.Body.Bytes()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil || e.Error == "" || e.Code == "" {
		t.Fatalf("%s: %d body %q is not an kvjson.ErrorJSON with error and code (%v)", what, rec.Code, rec.Body.Bytes(), err)
	}
	st := fx.proc.Node.Status()
	if n := keyCount(fx.proc); n != keysBefore {
		t.Fatalf("%s: %d %s changed the key count from %d to %d", what, rec.Code, e.Code, keysBefore, n)
	}
	// A 404 on DELETE and a failed compare-and-swap are outcomes of a
	// committed command, evaluated by the state machine: they take a log
	// index (and say which) but change no key. Every other 4xx is refused
	// before anything reaches the log.
	committed := (e.Code == kvjson.CodeNotFound && e.Index != 0) || e.Code == kvjson.CodeCASFailed
	if !committed && st.LastIndex != lastBefore {
		t.Fatalf("%s: %d %s, but the log grew from %d to %d", what, rec.Code, e.Code, lastBefore, st.LastIndex)
	}
}

// validMethod is what net/http's server accepts as a method: a token.
func validMethod(m string) bool {
	if m == "" {
		return false
	}
	for _, c := range m {
		if c <= ' ' || c >= 0x7f || strings.ContainsRune(`()<>@,;:\"/[]?={}`, c) {
			return false
		}
	}
	return true
}

// badInputSeeds are the cases of TestBadInputChangesNothing, as
// (method, path with query, body).
var badInputSeeds = [][3]string{
	{"PUT", "/v1/kv/a%01b", "x"},
	{"PUT", "/v1/kv/%00edictkv/http/1", "x"},
	{"PUT", "/v1/kv/%ff", "x"},
	{"PUT", "/v1/kv/", "x"},
	{"PUT", "/v1/kv/" + strings.Repeat("k", 17), "x"},
	{"PUT", "/v1/kv/k", strings.Repeat("v", 33)},
	{"PUT", "/v1/kv/k?ttl=5", "x"},
	{"DELETE", "/v1/kv/k?cas=1", ""},
	{"GET", "/v1/kv/k?consistency=strong", ""},
	{"PUT", "/v1/kv/k?cas=abc", "x"},
	{"PUT", "/v1/kv/k?cas=1&prev=original", "x"},
	{"PUT", "/v1/kv/k?cas=1&cas=2", "x"},
	{"PUT", "/v1/kv/k?redirect=maybe", "x"},
	{"PATCH", "/v1/kv/k", "x"},
	{"POST", "/v1/cluster/learners", `{"id": 4,`},
	{"POST", "/v1/cluster/promote", `{"id": "four"}`},
	{"POST", "/v1/cluster/remove", `{"id": 3, "force": true}`},
	{"POST", "/v1/cluster/transfer", `{"id": 2} {"id": 3}`},
	{"POST", "/v1/cluster/transfer", `{"id": 2` + strings.Repeat(" ", 300) + `}`},
	{"POST", "/v1/cluster/learners", `{"id": 4}`},
	{"POST", "/v1/cluster/remove", `{"id": 0}`},
	{"POST", "/v1/cluster/recover", `{"survivors": [1]}`},
}

// FuzzKV drives /v1/kv/<key>: any method, key, query, body and headers.
func FuzzKV(f *testing.F) {
	for _, s := range badInputSeeds {
		if rest, ok := strings.CutPrefix(s[1], "/v1/kv/"); ok {
			key, query, _ := strings.Cut(rest, "?")
			f.Add(s[0], key, query, []byte(s[2]), "")
		}
	}
	// Good requests too, so that mutations start from what succeeds.
	f.Add("PUT", "k", "cas=0", []byte("v"), "Content-Type: text/plain")
	f.Add("PUT", "k", "prev=v", []byte("w"), "")
	f.Add("GET", "k", "consistency=stale", []byte(nil), "")
	f.Add("GET", "k", "revision=1&consistency=follower", []byte(nil), "")
	f.Add("GET", "k", "revision=-3", []byte(nil), "")
	f.Add("GET", "k", "consistency=follower&redirect=false", []byte(nil), "X-Edictkv-Forwarded-By: 2")
	f.Add("DELETE", "a%2Fb", "redirect", []byte(nil), "")
	fx := newFuzzNode(f)
	f.Fuzz(func(t *testing.T, method, key, query string, body []byte, headers string) {
		if !validMethod(method) {
			return
		}
		target := "/v1/kv/" + key
		if query != "" {
			target += "?" + query
		}
		fx.check(t, method, target, headers, body)
	})
}

// FuzzHandler drives the whole API, cluster and admin endpoints included:
// any method, path, query, body and headers.
func FuzzHandler(f *testing.F) {
	for _, s := range badInputSeeds {
		path, query, _ := strings.Cut(s[1], "?")
		f.Add(s[0], path, query, []byte(s[2]), "")
	}
	f.Add("POST", "/v1/cluster/learners", "", []byte(`{"id":2,"raft_addr":"127.0.0.1:1","http_addr":"127.0.0.1:2"}`), "Content-Type: application/json")
	f.Add("POST", "/v1/cluster/promote", "", []byte(`{"id":2}`), "")
	f.Add("POST", "/v1/cluster/transfer", "", []byte(`{"id":0}`), "")
	f.Add("POST", "/v1/cluster/recover", "", []byte(`{"survivors":[1],"confirm":"yes"}`), "")
	f.Add("GET", "/v1/cluster", "", []byte(nil), "")
	f.Add("GET", "/v1/status", "", []byte(nil), "")
	f.Add("GET", "/readyz", "", []byte(nil), "")
	f.Add("GET", "/livez", "x=1", []byte(nil), "")
	f.Add("GET", "/metrics", "", []byte(nil), "Accept: application/openmetrics-text")
	f.Add("DELETE", "/v1/cluster", "", []byte(nil), "")
	f.Add("GET", "/v1/nothing", "", []byte(nil), "")
	f.Add("PUT", "/v1/kv", "", []byte("x"), "")
	fx := newFuzzNode(f)
	f.Fuzz(func(t *testing.T, method, path, query string, body []byte, headers string) {
		if !validMethod(method) {
			return
		}
		target := path
		if query != "" {
			target += "?" + query
		}
		fx.check(t, method, target, headers, body)
	})
}

// check serves one request and holds its answer to the properties, then
// gives the next input a fresh node if this one changed the membership.
func (fx *fuzzNode) check(t *testing.T, method, target, headers string, body []byte) {
	t.Helper()
	last, keys := fx.proc.Node.Status().LastIndex, keyCount(fx.proc)
	rec, ok := fx.serve(method, target, headers, body)
	if !ok {
		return
	}
	fx.checkAnswer(t, fmt.Sprintf("%s %q", method, target), rec, last, keys)
	if !fx.healthy() {
		fx.close()
		if err := fx.start(); err != nil {
			t.Fatal(err)
		}
	}
}
