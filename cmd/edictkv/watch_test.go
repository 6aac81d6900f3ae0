package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// scripted serves watch streams from a script: each request takes the
// next step, which must be for the from it asks, and writes its lines
// (or answers status with a body).
type scripted struct {
	t     *testing.T
	mu    sync.Mutex
	steps []step
	asked []string // "<server> from=<from>"
}

type step struct {
	server int
	from   string // the from the request must carry ("" none)
	status int
	body   string
	hang   bool // after the body, hold the stream open without a line
}

func (s *scripted) handler(server int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.asked = append(s.asked, fmt.Sprintf("%d from=%s", server, r.URL.Query().Get("from")))
		if len(s.steps) == 0 {
			s.mu.Unlock()
			http.Error(w, "script done", http.StatusServiceUnavailable)
			return
		}
		st := s.steps[0]
		s.steps = s.steps[1:]
		s.mu.Unlock()
		assert.Equal(s.t, st.server, server, "request %s", r.URL)
		assert.Equal(s.t, st.from, r.URL.Query().Get("from"), "request %s", r.URL)
		assert.Equal(s.t, "/v1/watch/a%2Fb", r.URL.EscapedPath())
		assert.Equal(s.t, "true", r.URL.Query().Get("prefix"))
		if st.status != 0 {
			w.WriteHeader(st.status)
			fmt.Fprint(w, st.body)
			return
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		fmt.Fprint(w, st.body)
		w.(http.Flusher).Flush()
		if st.hang {
			<-r.Context().Done()
		}
	})
}

func put(rev int, k, v string) string {
	return fmt.Sprintf(`{"revision":%d,"events":[{"type":"put","kv":{"key":%q,"value":%q,"create_index":2,"mod_index":%d,"version":1}}]}`+"\n", rev, k, v, rev)
}

func watchScript(t *testing.T, idle time.Duration, steps ...step) (stdout, stderr string, err error, asked []string) {
	s := &scripted{t: t, steps: steps}
	var eps []string
	for i := range 2 {
		srv := httptest.NewServer(s.handler(i))
		t.Cleanup(srv.Close)
		eps = append(eps, srv.URL)
	}
	var out, errOut bytes.Buffer
	w := &watcher{endpoints: eps, key: "a/b", prefix: true, idle: idle, stdout: &out, stderr: &errOut,
		client: &http.Client{}, backoff: time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = w.run(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	assert.Empty(t, s.steps, "the script is not done")
	return out.String(), errOut.String(), err, s.asked
}

// edictkv watch takes a broken stream up again through the next address
// from the revision after the last it printed: after a clean end, a line
// cut short, a silent stream, a process shutting down, a 503; it stops
// for good at a compaction or a refused request.
func TestWatchResumes(t *testing.T) {
	out, errOut, err, asked := watchScript(t, 200*time.Millisecond,
		step{server: 0, body: `{"revision":5,"progress":true}` + "\n" + put(6, "a/b", "1") + put(7, "a/bc", "2")},
		step{server: 1, from: "8", body: `{"revision":8,"events":[{"type":"delete","kv":{"key":"a/b","mod_index":8}}]}` + "\n" + `{"revision":9,"eve`},
		step{server: 0, from: "9", body: `{"revision":9,"progress":true}` + "\n", hang: true},
		step{server: 1, from: "10", status: 503, body: `{"error":"no leader","code":"no_leader"}`},
		step{server: 0, from: "10", body: put(10, "a/b", "3") + `{"revision":10,"error":{"error":"process 1 is shutting down","code":"shutting_down"}}` + "\n"},
		step{server: 1, from: "11", body: put(12, "a/b", "4") + `{"revision":12,"error":{"error":"compacted","code":"compacted","compact_revision":20}}` + "\n"},
	)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "watch from revision 13: compacted")
	assert.Contains(t, err.Error(), "from revision 20 on")
	assert.Equal(t, "PUT\na/b\n1\nPUT\na/bc\n2\nDELETE\na/b\n\nPUT\na/b\n3\nPUT\na/b\n4\n", out)
	assert.Equal(t, []string{"0 from=", "1 from=8", "0 from=9", "1 from=10", "0 from=10", "1 from=11"}, asked)
	for _, want := range []string{"resuming through", "unexpected EOF", "no line for 200ms", "503 no_leader", "shutting_down"} {
		assert.Contains(t, errOut, want)
	}

	_, _, err, asked = watchScript(t, time.Minute,
		step{server: 0, status: 400, body: `{"error":"from=0","code":"bad_parameter"}`})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "400 bad_parameter")
	assert.Len(t, asked, 1, "a refused request is not retried")

	// A stream that repeats a revision before the one asked is refused.
	_, _, err, _ = watchScript(t, time.Minute,
		step{server: 0, body: put(3, "a/b", "1") + `{"revision":3,"error":{"error":"x","code":"shutting_down"}}` + "\n"},
		step{server: 1, from: "4", body: put(3, "a/b", "1")})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "revision 3, before 4")
}

// --json prints the lines themselves, progress included.
func TestWatchJSON(t *testing.T) {
	s := &scripted{t: t, steps: []step{{server: 0, body: `{"revision":5,"progress":true}` + "\n" + put(6, "a/b", "1") +
		`{"revision":6,"error":{"error":"gone","code":"compacted","compact_revision":7}}` + "\n"}}}
	srv := httptest.NewServer(s.handler(0))
	defer srv.Close()
	var out, errOut bytes.Buffer
	w := &watcher{endpoints: []string{srv.URL}, key: "a/b", prefix: true, asJSON: true, idle: time.Minute,
		stdout: &out, stderr: &errOut, client: &http.Client{}}
	require.Error(t, w.run(context.Background()))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 2)
	assert.Equal(t, `{"revision":5,"progress":true}`, lines[0])
	assert.Equal(t, strings.TrimSpace(put(6, "a/b", "1")), strings.ReplaceAll(lines[1], `,"stamp":{"epoch":0,"qt":null,"counter":0,"token":""}`, ""))
}
