package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edictlog/edictlog/cmd/edictkv/kvjson"
)

// seenEvent is a change a watcher printed.
type seenEvent struct {
	rev        uint64
	key, value string
}

// attempt is one PUT the writer sent: acked with its revision, or of
// unknown outcome (rev 0).
type attempt struct {
	key  string
	rev  uint64
	done bool
}

// HTTP API watches across the loss of the process serving them: a watch
// of a prefix on process 1, and `edictkv watch` given the three
// processes, while a writer puts through processes 2 and 3; process 1 is
// killed mid-stream, the test's watch resumes on process 2 from the last
// revision it saw + 1, `edictkv watch` through the next address by
// itself. Each sees every revision from its start to the end exactly
// once, in order: every acknowledged write at its revision, nothing that
// was not written, no revision missing (only the writer writes).
func TestHTTPWatchAcrossMembers(t *testing.T) {
	c := newCluster(t, 3)
	for _, p := range c.procs {
		c.ready(p)
	}
	m1, m2, m3 := c.procs[0], c.procs[1], c.procs[2]
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// The test's watch, from now: its first line says where it starts.
	lines := make(chan kvjson.WatchLine, 4096)
	ended := make(chan error, 1)
	open := func(p *proc, from uint64) {
		url := "http://" + p.api + "/v1/watch/w%2F?prefix"
		if from > 0 {
			url += fmt.Sprintf("&from=%d", from)
		}
		req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		require.Equal(t, 200, resp.StatusCode)
		go func() {
			defer resp.Body.Close()
			d := kvjson.NewWatchDecoder(resp.Body, 0)
			for {
				l, err := d.Next()
				if err != nil {
					ended <- err
					return
				}
				lines <- l
			}
		}()
	}
	open(m1, 0)
	first := <-lines
	require.True(t, first.Progress, "%+v", first)
	start := first.Revision + 1

	// edictkv watch through the three processes, process 1 first.
	cmd := exec.Command(binary, "watch", "--addr", strings.Join([]string{m1.api, m2.api, m3.api}, ","),
		"--prefix", "--json", "--rev", fmt.Sprint(start), "--idle-timeout", "20s", "w/")
	var cliErr bytes.Buffer
	cmd.Stderr = &cliErr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	dieWithTest(cmd)
	require.NoError(t, cmd.Start())
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()
	var cliMu sync.Mutex
	var cliSeen []seenEvent
	cliDone := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, kvjson.MaxWatchLineBytes)
		for sc.Scan() {
			l, err := kvjson.DecodeWatchLine(sc.Bytes())
			if err != nil {
				cliDone <- fmt.Errorf("edictkv watch printed %q: %w", sc.Text(), err)
				return
			}
			cliMu.Lock()
			cliSeen = append(cliSeen, events(l)...)
			cliMu.Unlock()
		}
		cliDone <- sc.Err()
	}()

	// The writer: puts through processes 2 and 3, a new value each
	// attempt, until 150 are acknowledged; then a last write, whose
	// revision is past every other's.
	var mu sync.Mutex
	attempts := map[string]*attempt{} // by value
	write := func(i int, key string) (uint64, bool) {
		p := []*proc{m2, m3}[i%2]
		value := fmt.Sprintf("v%d", i)
		mu.Lock()
		attempts[value] = &attempt{key: key}
		mu.Unlock()
		code, b, err := call("PUT", "http://"+p.api+"/v1/kv/"+key, value)
		if err != nil || code != 200 {
			var e kvjson.ErrorJSON
			if err == nil && json.Unmarshal(b, &e) == nil && (e.Code == kvjson.CodeNoLeader || e.Code == kvjson.CodeNotCommitted) {
				mu.Lock()
				delete(attempts, value) // nothing was written
				mu.Unlock()
			}
			time.Sleep(50 * time.Millisecond)
			return 0, false
		}
		var w kvjson.WriteResponse
		if err := json.Unmarshal(b, &w); err != nil {
			t.Errorf("PUT %s: %s: %v", key, b, err)
		}
		mu.Lock()
		attempts[value].rev, attempts[value].done = w.Index, true
		mu.Unlock()
		return w.Index, true
	}
	writerDone := make(chan uint64, 1)
	go func() {
		acked := 0
		for i := 0; acked < 150 && ctx.Err() == nil; i++ {
			if _, ok := write(i, fmt.Sprintf("w/%d", i%5)); ok {
				acked++
			}
		}
		for i := 1000; ctx.Err() == nil; i++ {
			if rev, ok := write(i, "w/end"); ok {
				writerDone <- rev
				return
			}
		}
	}()

	// Read process 1's stream; kill process 1 after 40 revisions; resume
	// on process 2.
	var seen []seenEvent
	last := first.Revision
	killed := false
	var end uint64
	take := func(l kvjson.WatchLine) {
		if l.Error != nil {
			return // the process said it was going: its stream ends next
		}
		seen = append(seen, events(l)...)
		last = max(last, l.Revision)
	}
	for end == 0 || last < end {
		select {
		case l := <-lines:
			take(l)
			if !killed && len(seen) >= 40 {
				c.mustStop(m1, syscall.SIGKILL)
				killed = true
			}
		case err := <-ended:
			require.True(t, killed, "process 1's stream ended before it was killed: %v", err)
			// The stream's lines were all queued before its end.
			for drained := false; !drained; {
				select {
				case l := <-lines:
					take(l)
				default:
					drained = true
				}
			}
			open(m2, last+1)
		case end = <-writerDone:
		case <-ctx.Done():
			t.Fatalf("the watch is at revision %d, the writer at %d", last, end)
		}
	}
	require.True(t, killed)

	// edictkv watch reaches the last write too, then stops at SIGTERM.
	waitFor(t, "edictkv watch to print the last write", 2*time.Minute, func() error {
		cliMu.Lock()
		defer cliMu.Unlock()
		if n := len(cliSeen); n == 0 || cliSeen[n-1].rev < end {
			return fmt.Errorf("it printed %d changes; stderr:\n%s", n, cliErr.String())
		}
		return nil
	})
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	// The reader finishes at the EOF of the process's exit; Wait closes
	// the pipe, so it comes after every read (os/exec.Cmd.StdoutPipe).
	require.NoError(t, <-cliDone)
	require.NoError(t, cmd.Wait(), "edictkv watch at SIGTERM; stderr:\n%s", cliErr.String())
	assert.Contains(t, cliErr.String(), "resuming through http://"+m2.api, "edictkv watch went on through process 2")

	mu.Lock()
	defer mu.Unlock()
	for name, got := range map[string][]seenEvent{"the test's watch": seen, "edictkv watch": cliSeen} {
		checkWatched(t, name, got, attempts, start, end)
	}
}

func events(l kvjson.WatchLine) []seenEvent {
	var out []seenEvent
	for _, e := range l.Events {
		value := "(deleted)" // the writer deletes nothing
		if e.KV.Value != nil {
			value = *e.KV.Value
		}
		out = append(out, seenEvent{rev: l.Revision, key: e.KV.Key, value: value})
	}
	return out
}

// checkWatched checks a watcher's changes from start to end: one per
// revision, each revision once and in order, each an attempted write of
// its key, each acknowledged write at its revision.
func checkWatched(t *testing.T, name string, got []seenEvent, attempts map[string]*attempt, start, end uint64) {
	t.Helper()
	byRev := map[uint64]seenEvent{}
	for i, e := range got {
		if i > 0 && e.rev <= got[i-1].rev {
			t.Errorf("%s: revision %d after %d", name, e.rev, got[i-1].rev)
		}
		byRev[e.rev] = e
		a := attempts[e.value]
		switch {
		case a == nil:
			t.Errorf("%s: %s=%s at %d was never written", name, e.key, e.value, e.rev)
		case a.key != e.key:
			t.Errorf("%s: %s=%s at %d was written to %s", name, e.key, e.value, e.rev, a.key)
		case a.done && a.rev != e.rev:
			t.Errorf("%s: %s=%s at %d was acknowledged at %d", name, e.key, e.value, e.rev, a.rev)
		}
	}
	for rev := start; rev <= end; rev++ {
		if _, ok := byRev[rev]; !ok {
			t.Errorf("%s: no change at revision %d (it saw %d to %d)", name, rev, start, end)
		}
	}
	for v, a := range attempts {
		if a.done && a.rev <= end && byRev[a.rev].value != v {
			t.Errorf("%s: the acknowledged %s=%s at %d is not what it saw there (%+v)", name, a.key, v, a.rev, byRev[a.rev])
		}
	}
	if got[len(got)-1].rev != end {
		t.Errorf("%s: the last change at %d, want %d", name, got[len(got)-1].rev, end)
	}
}
