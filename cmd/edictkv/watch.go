package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/edictlog/edictlog/cmd/edictkv/kvjson"
)

// watcher is `edictkv watch`: a stream of GET /v1/watch/<key> that, when
// it breaks, is taken up again through the next endpoint from the
// revision after the last one seen, so that no change is printed twice
// or left out.
type watcher struct {
	endpoints []string
	key       string
	prefix    bool
	prevKV    bool
	asJSON    bool
	// idle is how long a stream may stay silent before it is taken for
	// dead: the server sends a progress line every 10 s while it is
	// idle.
	idle   time.Duration
	stdout io.Writer
	stderr io.Writer
	client *http.Client
	// next is the revision to resume from (0: the watch's first stream
	// starts after the current revision).
	next uint64
	// backoff bounds the wait before trying the endpoints again, after
	// each of them failed in turn.
	backoff time.Duration
}

func runWatch(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("watch", stderr)
	addrs := fs.String("addr", "127.0.0.1:8001", "HTTP addresses of edictkv processes, separated by commas: the watch resumes through the next one when its stream breaks")
	prefix := fs.Bool("prefix", false, "watch every key that starts with <key> (\"\" with --prefix: every key)")
	rev := fs.Uint64("rev", 0, "the revision to start from (0: the next one); changes of that revision on are printed")
	prevKV := fs.Bool("prev-kv", false, "print each changed key's previous value too")
	asJSON := fs.Bool("json", false, "print the stream's lines (kvjson.WatchLine, one JSON object a line) as they come")
	idle := fs.Duration("idle-timeout", 35*time.Second, "take a stream that stays silent this long for dead and resume through the next address")
	pos, err := parseArgs(fs, args, "<key>")
	if err != nil {
		return err
	}
	w := &watcher{key: pos[0], prefix: *prefix, prevKV: *prevKV, asJSON: *asJSON, idle: *idle, next: *rev,
		stdout: stdout, stderr: stderr, client: &http.Client{}, backoff: 2 * time.Second}
	for _, a := range strings.Split(*addrs, ",") {
		if a = strings.TrimSpace(a); a != "" {
			if !strings.Contains(a, "://") {
				a = "http://" + a
			}
			w.endpoints = append(w.endpoints, a)
		}
	}
	if len(w.endpoints) == 0 {
		return errors.New("--addr names no address")
	}
	if w.key == "" && !w.prefix {
		return errors.New("an empty key: give a key, or --prefix \"\" for every key")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := w.run(ctx); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

// errFatal is a stream's end that resuming cannot mend: the request was
// refused, or the history it needs is compacted.
type errFatal struct{ err error }

func (e errFatal) Error() string { return e.err.Error() }
func (e errFatal) Unwrap() error { return e.err }

// run watches until ctx ends or a stream ends for good.
func (w *watcher) run(ctx context.Context) error {
	failures := 0
	for i := 0; ctx.Err() == nil; i = (i + 1) % len(w.endpoints) {
		ep := w.endpoints[i]
		progressed, err := w.stream(ctx, ep)
		var fatal errFatal
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.As(err, &fatal):
			return fatal.err
		case progressed:
			failures = 0
		default:
			failures++
		}
		from := "the next revision"
		if w.next > 0 {
			from = fmt.Sprintf("revision %d", w.next)
		}
		next := w.endpoints[(i+1)%len(w.endpoints)]
		fmt.Fprintf(w.stderr, "edictkv watch: %s: %v; resuming through %s from %s\n", ep, err, next, from)
		if failures > 0 && failures%len(w.endpoints) == 0 {
			// Every endpoint failed in turn: wait before the next round.
			wait := min(time.Duration(failures/len(w.endpoints))*100*time.Millisecond, w.backoff)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(wait):
			}
		}
	}
	return nil
}

// stream reads one stream from ep and prints its changes; progressed
// says it got at least one line. It returns why the stream ended.
func (w *watcher) stream(ctx context.Context, ep string) (progressed bool, _ error) {
	q := url.Values{}
	if w.prefix {
		q.Set("prefix", "true")
	}
	if w.prevKV {
		q.Set("prev_kv", "true")
	}
	if w.next > 0 {
		q.Set("from", strconv.FormatUint(w.next, 10))
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ep+"/v1/watch/"+url.PathEscape(w.key)+"?"+q.Encode(), nil)
	if err != nil {
		return false, errFatal{err}
	}
	resp, err := w.client.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		e := &errRemote{status: resp.StatusCode}
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if json.Unmarshal(raw, &e.body) != nil || e.body.Error == "" {
			e.body.Error = strings.TrimSpace(string(raw))
		}
		// A refused request (4xx) is refused by every process alike; a
		// compacted start is lost history. Anything else may pass
		// through another process.
		if resp.StatusCode/100 == 4 {
			return false, errFatal{e}
		}
		return false, e
	}
	lines := make(chan kvjson.WatchLine)
	ended := make(chan error, 1)
	go func() {
		d := kvjson.NewWatchDecoder(resp.Body, 0)
		for {
			l, err := d.Next()
			if err != nil {
				ended <- err
				return
			}
			select {
			case lines <- l:
			case <-ctx.Done():
				ended <- ctx.Err()
				return
			}
		}
	}()
	idle := time.NewTimer(w.idle)
	defer idle.Stop()
	for {
		select {
		case <-ctx.Done():
			return progressed, ctx.Err()
		case <-idle.C:
			return progressed, fmt.Errorf("no line for %v", w.idle)
		case err := <-ended:
			if errors.Is(err, io.EOF) {
				err = errors.New("the stream ended")
			}
			return progressed, err
		case l := <-lines:
			progressed = true
			idle.Reset(w.idle)
			if err := w.line(l); err != nil {
				return progressed, err
			}
		}
	}
}

// line prints one line's changes and moves the revision to resume from
// past it; an error line ends the stream (for good if it says compacted).
func (w *watcher) line(l kvjson.WatchLine) error {
	if l.Error != nil {
		err := fmt.Errorf("%s: %s", l.Error.Code, l.Error.Error)
		if l.Error.Code == kvjson.CodeCompacted {
			return errFatal{fmt.Errorf("watch from revision %d: %w (watch again from revision %d on, or later)", w.next, err, l.Error.CompactRevision)}
		}
		return err
	}
	// Lines of events of revisions already printed cannot come: the
	// stream starts at w.next. The decoder checks the order within a
	// stream; this holds it across streams.
	if len(l.Events) > 0 && w.next > 0 && l.Revision < w.next {
		return errFatal{fmt.Errorf("the stream sent revision %d, before %d, which it was asked to start from", l.Revision, w.next)}
	}
	if w.asJSON {
		b, err := json.Marshal(l)
		if err != nil {
			return errFatal{err}
		}
		if _, err := w.stdout.Write(append(b, '\n')); err != nil {
			return errFatal{err}
		}
	} else {
		for _, e := range l.Events {
			fmt.Fprintln(w.stdout, strings.ToUpper(e.Type))
			if e.Prev != nil {
				printKV(w.stdout, *e.Prev)
			}
			printKV(w.stdout, e.KV)
		}
	}
	if l.Revision+1 > w.next {
		w.next = l.Revision + 1
	}
	return nil
}

// printKV prints a key and its value on two lines, as etcdctl's simple
// output does; a value that is not UTF-8 in base64.
func printKV(out io.Writer, kv kvjson.KVJSON) {
	v := kv.ValueBase64
	if kv.Value != nil {
		v = *kv.Value
	}
	fmt.Fprintf(out, "%s\n%s\n", kv.Key, v)
}
