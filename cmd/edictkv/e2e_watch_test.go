package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The watch tests run etcd's clients (clientv3, etcdctl) against 3
// processes, as the history tests do, and against etcd itself with
// EDICTKV_E2E_REFERENCE: a watcher is sent every change of its keys from
// its start revision on, in revision order, each once, from history and
// live, across a leader's death and across a resume on another member.

// wev is a watch event as the tests compare them: the key as the change
// left it (a DELETE's has only its key and, as mod, the deletion's
// revision) and, with prev_kv, the value before ("-": none).
type wev struct {
	typ, key, value      string
	create, mod, version int64
	prev                 string
}

func (e wev) String() string {
	return fmt.Sprintf("%s %s=%q(create %d, mod %d, version %d, prev %q)", e.typ, e.key, e.value, e.create, e.mod, e.version, e.prev)
}

func wevsOf(evs []*clientv3.Event, prevKV bool) []wev {
	var out []wev
	for _, e := range evs {
		x := wev{typ: e.Type.String(), key: string(e.Kv.Key), value: string(e.Kv.Value), create: e.Kv.CreateRevision,
			mod: e.Kv.ModRevision, version: e.Kv.Version}
		if prevKV {
			x.prev = "-"
			if e.PrevKv != nil {
				x.prev = string(e.PrevKv.Value)
			}
		}
		out = append(out, x)
	}
	return out
}

// events are the model's changes of the keys with prefix at revisions
// from to to, in revision order and, within one, in key order (the tests
// write a revision's keys in that order).
func (m *keyspace) events(prefix string, from, to int64, prevKV bool) []wev {
	var out []wev
	for rev := max(from, 2); rev <= to; rev++ {
		before, after := m.at[rev-1], m.at[rev]
		var keys []string
		for k := range before {
			keys = append(keys, k)
		}
		for k := range after {
			if _, ok := before[k]; !ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			if !strings.HasPrefix(k, prefix) {
				continue
			}
			b, wasThere := before[k]
			a, isThere := after[k]
			var e wev
			switch {
			case isThere && a.mod == rev:
				e = wev{typ: "PUT", key: k, value: a.value, create: a.create, mod: rev, version: a.version}
			case wasThere && !isThere:
				e = wev{typ: "DELETE", key: k, mod: rev}
			default:
				continue
			}
			if prevKV {
				e.prev = "-"
				if wasThere {
					e.prev = b.value
				}
			}
			out = append(out, e)
		}
	}
	return out
}

// collect reads wch until it has been sent an event at revision to or
// later, and returns the events; a response that cancels the watch, a
// closed channel or 90 s without reaching to fail the test.
func collect(t *testing.T, what string, wch clientv3.WatchChan, to int64, prevKV bool) []wev {
	t.Helper()
	var out []wev
	timeout := time.After(90 * time.Second)
	for len(out) == 0 || out[len(out)-1].mod < to {
		select {
		case r, ok := <-wch:
			require.True(t, ok, "%s: the watch channel closed after %d events", what, len(out))
			require.NoError(t, r.Err(), "%s", what)
			require.False(t, r.Canceled, "%s", what)
			out = append(out, wevsOf(r.Events, prevKV)...)
		case <-timeout:
			t.Fatalf("%s: %d events in 90s, the last %v; want up to revision %d", what, len(out), out[max(len(out)-1, 0):], to)
		}
	}
	return out
}

// replay is every change of the keys with prefix from revision from to
// to, as a new watch through cli sends them from history.
func replay(t *testing.T, cli *clientv3.Client, prefix string, from, to int64) []wev {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	return collect(t, "replay", cli.Watch(ctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(from), clientv3.WithPrevKV()), to, true)
}

// kill SIGKILLs member i.
func (tg *kvTarget) kill(i int) {
	tg.t.Helper()
	if tg.ec != nil {
		tg.ec.mustStop(tg.ec.procs[i], syscall.SIGKILL)
		return
	}
	_ = tg.ref[i].Process.Kill()
	_ = tg.ref[i].Wait()
}

// signal sends sig to member i (SIGSTOP and SIGCONT pause and resume it).
func (tg *kvTarget) signal(i int, sig syscall.Signal) {
	tg.t.Helper()
	if tg.ec != nil {
		require.NoError(tg.t, tg.ec.procs[i].cmd.Process.Signal(sig))
		return
	}
	require.NoError(tg.t, tg.ref[i].Process.Signal(sig))
}

// leaderIndex is the member that says it leads (its status names itself),
// skipping dead ones.
func (tg *kvTarget) leaderIndex(dead ...int) int {
	tg.t.Helper()
	found := -1
	waitFor(tg.t, "a leader", 60*time.Second, func() error {
		for i, m := range tg.members {
			if slices.Contains(dead, i) {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			st, err := m.Status(ctx, tg.eps[i])
			cancel()
			if err == nil && st.Leader == st.Header.MemberId {
				found = i
				return nil
			}
		}
		return fmt.Errorf("no member leads")
	})
	return found
}

// putUntil writes key=value through cli until a write is acknowledged,
// retrying what may not have been written (no leader, a member down, a
// timeout: then the put may be applied twice, as a client sees etcd do
// it); it returns the acknowledged revision.
func putUntil(t *testing.T, cli *clientv3.Client, key, value string) int64 {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		r, err := cli.Put(ctx, key, value)
		cancel()
		if err == nil {
			return r.Header.Revision
		}
		if time.Now().After(deadline) {
			t.Fatalf("put %s: %v", key, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A watch from a past revision gets the history of its keys, through
// every member: puts, a transaction's several keys at one revision, a
// key deleted and created again, a range deleted, a write outside the
// prefix; with prev_kv, filters, and from a revision in the middle.
func TestWatchFromPastRevision(t *testing.T) {
	tg := newKVTarget(t)
	ctx := ctxT(t)
	cli := tg.cli
	m := newKeyspace(tg.rev(ctx))
	start := m.rev + 1
	m.do(t, "put", putOp(cli, ctx, "wp/a", "1"), mput("wp/a", "1"))
	m.do(t, "put", putOp(cli, ctx, "wp/b", "1"), mput("wp/b", "1"))
	m.do(t, "put", putOp(cli, ctx, "wp/a", "2"), mput("wp/a", "2"))
	m.do(t, "txn", txnOp(cli, ctx, clientv3.OpPut("wp/c", "1"), clientv3.OpPut("wp/d", "1")), mput("wp/c", "1"), mput("wp/d", "1"))
	mid := m.do(t, "delete", delOp(cli, ctx, "wp/b"), mdel("wp/b"))
	m.do(t, "put", putOp(cli, ctx, "wp/b", "2"), mput("wp/b", "2"))
	m.do(t, "put outside", putOp(cli, ctx, "wq", "1"), mput("wq", "1"))
	m.do(t, "delete a range", delOp(cli, ctx, "wp/c", clientv3.WithRange("wp/e")), mdelRange("wp/c", "wp/e"))
	end := m.do(t, "put", putOp(cli, ctx, "wp/a", "3"), mput("wp/a", "3"))

	watch := func(what string, c *clientv3.Client, key string, prevKV bool, opts ...clientv3.OpOption) []wev {
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		if prevKV {
			opts = append(opts, clientv3.WithPrevKV())
		}
		return collect(t, what, c.Watch(wctx, key, opts...), end, prevKV)
	}
	for i, c := range append([]*clientv3.Client{cli}, tg.members...) {
		what := fmt.Sprintf("%s: through client %d", tg.name, i)
		assert.Equal(t, m.events("wp/", start, end, true), watch(what, c, "wp/", true, clientv3.WithPrefix(), clientv3.WithRev(start)), what)
	}
	assert.Equal(t, m.events("wp/", mid, end, false), watch("from the middle", cli, "wp/", false, clientv3.WithPrefix(), clientv3.WithRev(mid)))
	assert.Equal(t, m.events("wp/a", start, end, true), watch("one key", cli, "wp/a", true, clientv3.WithRev(start)))
	var dels []wev
	for _, e := range m.events("wp/", start, end, false) {
		if e.typ == "DELETE" {
			dels = append(dels, e)
		}
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wch := cli.Watch(wctx, "wp/", clientv3.WithPrefix(), clientv3.WithRev(start), clientv3.WithFilterPut())
	assert.Equal(t, dels, collect(t, "NOPUT", wch, dels[len(dels)-1].mod, false))
}

// Watchers on every member, and one on a client of all of them, see every
// write of a writer that goes on while the leader is killed: each gets
// exactly the history of the prefix, in order, none missed nor repeated
// (a watcher whose member died resumes on another from the revision it
// reached), the history as a new watch replays it, and every
// acknowledged write is in it.
func TestWatchAcrossLeaderKill(t *testing.T) {
	tg := newKVTarget(t)
	ctx := ctxT(t)
	start := tg.rev(ctx) + 1
	leader := tg.leaderIndex()
	type watcher struct {
		what string
		wch  clientv3.WatchChan
	}
	var ws []watcher
	wctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i, c := range slices.Concat(tg.members, []*clientv3.Client{tg.cli}) {
		if i == leader {
			continue // its only member dies
		}
		ws = append(ws, watcher{fmt.Sprintf("%s: watcher %d", tg.name, i),
			c.Watch(wctx, "lk/", clientv3.WithPrefix(), clientv3.WithRev(start), clientv3.WithPrevKV())})
	}
	// One more on a client of the leader alone, told of the others once
	// the leader is dead: its stream resumes there.
	lone := tg.client(tg.eps[leader])
	ws = append(ws, watcher{tg.name + ": watcher on the leader, resumed on another member",
		lone.Watch(wctx, "lk/", clientv3.WithPrefix(), clientv3.WithRev(start), clientv3.WithPrevKV())})

	const writes = 150
	acked := map[string]int64{}
	for i := range writes {
		if i == writes/3 {
			tg.kill(leader)
			lone.SetEndpoints(slices.Delete(slices.Clone(tg.eps), leader, leader+1)...)
		}
		v := fmt.Sprintf("v%d", i)
		acked[v] = putUntil(t, tg.cli, fmt.Sprintf("lk/%d", i%7), v)
	}
	end := tg.rev(ctx)
	want := replay(t, tg.cli, "lk/", start, end)
	t.Logf("%s: member %d killed after %d of %d writes; revisions %d to %d, %d events", tg.name, leader, writes/3, writes, start, end, len(want))
	seen := map[string]bool{}
	for _, e := range want {
		seen[e.value] = true
	}
	for v, rev := range acked {
		assert.True(t, seen[v], "the acknowledged write of %s at %d is in the history", v, rev)
	}
	var wg sync.WaitGroup
	got := make([][]wev, len(ws))
	for i, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = collectAsync(w.wch, end)
		}()
	}
	wg.Wait()
	for i, w := range ws {
		assert.Equal(t, want, got[i], w.what)
	}
}

// collectAsync is collect for another goroutine than the test's: what it
// got, however it ended.
func collectAsync(wch clientv3.WatchChan, to int64) []wev {
	var out []wev
	timeout := time.After(90 * time.Second)
	for len(out) == 0 || out[len(out)-1].mod < to {
		select {
		case r, ok := <-wch:
			if !ok || r.Err() != nil || r.Canceled {
				return append(out, wev{typ: fmt.Sprintf("ended: %v", r.Err())})
			}
			out = append(out, wevsOf(r.Events, true)...)
		case <-timeout:
			return append(out, wev{typ: "timed out"})
		}
	}
	return out
}

// A watcher that stops on one member and resumes on another from the
// last revision it was sent misses and repeats nothing, also when the
// member it resumes on is behind (paused while the others wrote: the
// start revision is in its future until it catches up). A progress
// notification it asks for there is at a revision the member applied, and
// the watcher has by then been sent every event up to it.
func TestWatchResumeOnAnotherMember(t *testing.T) {
	tg := newKVTarget(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	leader := tg.leaderIndex()
	a, b := (leader+1)%3, (leader+2)%3
	start := tg.rev(ctx) + 1
	for i := range 10 {
		putUntil(t, tg.cli, fmt.Sprintf("rs/%d", i%3), fmt.Sprintf("a%d", i))
	}
	mid := tg.rev(ctx)

	// Seen on a, up to mid.
	actx, cancel := context.WithCancel(ctx)
	got := collect(t, "on member a", tg.members[a].Watch(actx, "rs/", clientv3.WithPrefix(), clientv3.WithRev(start), clientv3.WithPrevKV()), mid, true)
	cancel()

	// b falls behind: paused while the leader and a write.
	tg.signal(b, syscall.SIGSTOP)
	paused := true
	defer func() {
		if paused {
			tg.signal(b, syscall.SIGCONT)
		}
	}()
	for i := range 10 {
		putUntil(t, tg.members[leader], fmt.Sprintf("rs/%d", i%3), fmt.Sprintf("b%d", i))
	}
	last := got[len(got)-1].mod
	bctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// clientv3's Watch returns once the member answers: it waits for b,
	// whose create request is, most likely, in before it resumes.
	wchc := make(chan clientv3.WatchChan, 1)
	go func() {
		wchc <- tg.members[b].Watch(bctx, "rs/", clientv3.WithPrefix(), clientv3.WithRev(last+1), clientv3.WithPrevKV())
	}()
	time.Sleep(200 * time.Millisecond)
	tg.signal(b, syscall.SIGCONT)
	paused = false
	wch := <-wchc
	for i := range 5 {
		putUntil(t, tg.members[leader], fmt.Sprintf("rs/%d", i%3), fmt.Sprintf("c%d", i))
	}
	end := tg.rev(ctx)
	got = append(got, collect(t, "resumed on member b", wch, end, true)...)
	assert.Equal(t, replay(t, tg.cli, "rs/", start, end), got)

	// Progress on b: asked until it reports end, each report no later
	// than what b sent.
	deadline := time.After(60 * time.Second)
	for {
		require.NoError(t, tg.members[b].RequestProgress(bctx))
		select {
		case r, ok := <-wch:
			require.True(t, ok)
			require.NoError(t, r.Err())
			require.True(t, r.IsProgressNotify(), "no event after %d: %v", end, r.Events)
			assert.LessOrEqual(t, r.Header.Revision, end)
			assert.GreaterOrEqual(t, r.Header.Revision, end, "b has applied and sent everything up to end")
			return
		case <-time.After(500 * time.Millisecond):
		case <-deadline:
			t.Fatal("no progress notification from member b within 60s")
		}
	}
}

// A watch from a revision that compaction removed is cancelled with etcd's
// "compacted" error and the compaction revision; a watch from there gets
// that revision's changes and the rest.
func TestWatchCompactionCancels(t *testing.T) {
	tg := newKVTarget(t)
	ctx := ctxT(t)
	start := tg.rev(ctx) + 1
	var revs []int64
	for i := range 6 {
		revs = append(revs, putUntil(t, tg.cli, "wc/k", fmt.Sprint(i)))
	}
	compactAt := revs[3]
	_, err := tg.cli.Compact(ctx, compactAt, clientv3.WithCompactPhysical())
	require.NoError(t, err)
	for i, c := range tg.members {
		waitFor(t, fmt.Sprintf("member %d applying the compaction", i), 30*time.Second, func() error {
			_, err := c.Get(ctx, "wc/k", clientv3.WithRev(start), clientv3.WithSerializable())
			if !isErr(err, rpctypes.ErrCompacted) {
				return fmt.Errorf("a read below the compaction: %v", err)
			}
			return nil
		})
		wctx, cancel := context.WithCancel(ctx)
		wch := c.Watch(wctx, "wc/k", clientv3.WithRev(start))
		var r clientv3.WatchResponse
		select {
		case r = <-wch:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: member %d: no answer to a watch from a compacted revision", tg.name, i)
		}
		assert.ErrorIs(t, r.Err(), rpctypes.ErrCompacted, "%s: member %d", tg.name, i)
		assert.Equal(t, compactAt, r.CompactRevision, "%s: member %d", tg.name, i)
		assert.True(t, r.Canceled)
		_, ok := <-wch
		assert.False(t, ok, "the channel closes after the cancel")
		cancel()

		wctx, cancel = context.WithCancel(ctx)
		got := collect(t, "from the compaction revision", c.Watch(wctx, "wc/k", clientv3.WithRev(compactAt)), revs[5], false)
		cancel()
		var mods []int64
		for _, e := range got {
			mods = append(mods, e.mod)
		}
		assert.Equal(t, revs[3:], mods, "%s: member %d", tg.name, i)
	}
}

// etcdctl watch --prefix prints every change from a past revision and then
// live ones; etcdctl make-mirror copies a prefix to another, the changes
// made while it runs included. It needs EDICTKV_ETCDCTL, as TestEtcdctl
// does.
func TestWatchEtcdctl(t *testing.T) {
	bin := os.Getenv("EDICTKV_ETCDCTL")
	if bin == "" {
		t.Skip("EDICTKV_ETCDCTL is not set: build etcdctl with bench/etcd/install.sh and point it there")
	}
	tg := newKVTarget(t)
	ctx := ctxT(t)
	cli := tg.cli
	// start runs etcdctl in the background and returns its output's lines.
	start := func(args ...string) <-chan string {
		cctx, cancel := context.WithCancel(context.Background())
		cmd := exec.CommandContext(cctx, bin, append([]string{"--endpoints=" + strings.Join(tg.eps, ","), "--dial-timeout=5s"}, args...)...)
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		require.NoError(t, cmd.Start())
		lines := make(chan string, 1024)
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				lines <- sc.Text()
			}
			_, _ = io.Copy(io.Discard, out)
			close(lines)
		}()
		t.Cleanup(func() {
			cancel()
			_ = cmd.Wait()
			if t.Failed() {
				t.Logf("etcdctl %s: %s", strings.Join(args, " "), stderr.String())
			}
		})
		return lines
	}

	m := newKeyspace(tg.rev(ctx))
	from := m.rev + 1
	m.do(t, "put", putOp(cli, ctx, "ew/a", "1"), mput("ew/a", "1"))
	m.do(t, "put", putOp(cli, ctx, "ew/b", "1"), mput("ew/b", "1"))
	lines := start("watch", "--prefix", "ew/", fmt.Sprintf("--rev=%d", from))
	m.do(t, "delete", delOp(cli, ctx, "ew/a"), mdel("ew/a"))
	m.do(t, "txn", txnOp(cli, ctx, clientv3.OpPut("ew/c", "1"), clientv3.OpPut("ew/d", "2")), mput("ew/c", "1"), mput("ew/d", "2"))
	var want []string
	for _, e := range m.events("ew/", from, m.rev, false) {
		want = append(want, e.typ, e.key, e.value)
	}
	var got []string
	timeout := time.After(60 * time.Second)
	for len(got) < len(want) {
		select {
		case l, ok := <-lines:
			require.True(t, ok, "etcdctl watch ended after %q", got)
			got = append(got, l)
		case <-timeout:
			t.Fatalf("etcdctl watch printed %q in 60s; want %q", got, want)
		}
	}
	assert.Equal(t, want, got, "%s: etcdctl watch --prefix", tg.name)

	// make-mirror of mm/ to mc/ on the same cluster, through one member.
	for i := range 3 {
		putUntil(t, cli, fmt.Sprintf("mm/%d", i), fmt.Sprintf("x%d", i))
	}
	start("make-mirror", "--prefix", "mm/", "--dest-prefix", "mc/", tg.eps[1])
	putUntil(t, cli, "mm/3", "x3")
	putUntil(t, cli, "mm/0", "y0")
	_, err := cli.Delete(ctx, "mm/1")
	require.NoError(t, err)
	putUntil(t, cli, "mm/4", "x4")
	want = []string{"mc/0=y0", "mc/2=x2", "mc/3=x3", "mc/4=x4"}
	waitFor(t, "the mirror", 60*time.Second, func() error {
		r, err := cli.Get(ctx, "mc/", clientv3.WithPrefix())
		if err != nil {
			return err
		}
		var kvs []string
		for _, kv := range r.Kvs {
			kvs = append(kvs, string(kv.Key)+"="+string(kv.Value))
		}
		if !slices.Equal(kvs, want) {
			return fmt.Errorf("mc/ holds %q, want %q", kvs, want)
		}
		return nil
	})
}
