package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
)

// The history tests drive a 3-member cluster over TCP with etcd's own
// clients (clientv3, its concurrency package, etcdctl) and check every
// answer against what etcd defines: revisions, versions and values
// computed from the operations the test made (keyspace, below), not read
// back from the server.
//
// They run against edictkv. With EDICTKV_E2E_REFERENCE set to the path of
// an etcd binary (bench/etcd/install.sh builds v3.6.8) they run unchanged
// against a 3-member etcd cluster instead: every expectation in them is
// then shown to be etcd's own behaviour.

// kvTarget is the cluster a history test runs against.
type kvTarget struct {
	t    *testing.T
	name string   // "edictkv" or "etcd"
	eps  []string // each member's etcd API address
	// cli knows every member; members[i] only eps[i].
	cli     *clientv3.Client
	members []*clientv3.Client
	ec      *etcdCluster // nil for the reference
	ref     []*exec.Cmd  // the reference's processes, as eps
}

func newKVTarget(t *testing.T) *kvTarget {
	tg := &kvTarget{t: t}
	if bin := os.Getenv("EDICTKV_E2E_REFERENCE"); bin != "" {
		tg.name = "etcd"
		tg.eps, tg.ref = startReferenceEtcd(t, bin)
	} else {
		tg.ec = newEtcdCluster(t)
		tg.name, tg.eps = "edictkv", tg.ec.endpoints()
	}
	tg.cli = tg.client(tg.eps...)
	for _, ep := range tg.eps {
		tg.members = append(tg.members, tg.client(ep))
	}
	// A linearizable read through every member: each knows a leader.
	for _, m := range tg.members {
		waitFor(t, "a linearizable read through "+m.Endpoints()[0], 60*time.Second, func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, err := m.Get(ctx, "\x00e2e-probe")
			return err
		})
	}
	return tg
}

func (tg *kvTarget) client(eps ...string) *clientv3.Client {
	tg.t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	require.NoError(tg.t, err)
	tg.t.Cleanup(func() { cli.Close() })
	return cli
}

// rev is the cluster's current revision, as a linearizable read's header
// says.
func (tg *kvTarget) rev(ctx context.Context) int64 {
	tg.t.Helper()
	r, err := tg.cli.Get(ctx, "\x00e2e-probe")
	require.NoError(tg.t, err)
	return r.Header.Revision
}

// startReferenceEtcd runs three etcd processes as one cluster and returns
// their client addresses and the processes.
func startReferenceEtcd(t *testing.T, bin string) ([]string, []*exec.Cmd) {
	root := t.TempDir()
	var names, peers, clients, initial []string
	for i := 1; i <= 3; i++ {
		names = append(names, fmt.Sprintf("ref%d", i))
		peers = append(peers, freePort(t))
		clients = append(clients, freePort(t))
		initial = append(initial, fmt.Sprintf("ref%d=http://%s", i, peers[i-1]))
	}
	var cmds []*exec.Cmd
	var logs []string
	for i := range names {
		logName := filepath.Join(root, names[i]+".log")
		logf, err := os.Create(logName)
		require.NoError(t, err)
		cmd := exec.Command(bin, "--name", names[i], "--data-dir", filepath.Join(root, names[i]),
			"--listen-client-urls", "http://"+clients[i], "--advertise-client-urls", "http://"+clients[i],
			"--listen-peer-urls", "http://"+peers[i], "--initial-advertise-peer-urls", "http://"+peers[i],
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new",
			"--initial-cluster-token", "edictkv-e2e-reference", "--log-level", "warn")
		cmd.Stdout, cmd.Stderr = logf, logf
		dieWithTest(cmd)
		require.NoError(t, cmd.Start())
		logf.Close()
		cmds, logs = append(cmds, cmd), append(logs, logName)
	}
	t.Cleanup(func() {
		for _, c := range cmds {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
		if t.Failed() {
			for _, l := range logs {
				b, _ := os.ReadFile(l)
				t.Logf("log of %s (last 3000 bytes):\n%s", filepath.Base(l), tail(b, 3000))
			}
		}
	})
	return clients, cmds
}

// mkv is one key's record as etcd defines it.
type mkv struct {
	key, value           string
	create, mod, version int64
}

func (m mkv) String() string {
	return fmt.Sprintf("%s=%q(create %d, mod %d, version %d)", m.key, m.value, m.create, m.mod, m.version)
}

// mop is one write of a test: a put of key, or (del) a delete of key, or
// of [key, end) with end.
type mop struct {
	key, value, end string
	del             bool
}

func mput(k, v string) mop      { return mop{key: k, value: v} }
func mdel(k string) mop         { return mop{key: k, del: true} }
func mdelRange(k, e string) mop { return mop{key: k, end: e, del: true} }

// keyspace is a model of etcd's keyspace and its history: the first write
// of a fresh cluster makes revision 2; each request that changes a key
// makes the next revision, however many keys it changes; a put of a
// missing key starts a generation (create_revision is its revision,
// version 1); a put of a present key keeps create_revision and adds one
// to version; a delete ends the generation.
type keyspace struct {
	rev int64
	at  map[int64]map[string]mkv
}

func newKeyspace(rev int64) *keyspace {
	return &keyspace{rev: rev, at: map[int64]map[string]mkv{rev: {}}}
}

// apply makes ops one request's changes and returns the revision after
// it: the next, if any key changed, else the current one.
func (m *keyspace) apply(ops ...mop) int64 {
	cur := m.at[m.rev]
	next := make(map[string]mkv, len(cur))
	for k, v := range cur {
		next[k] = v
	}
	rev, changed := m.rev+1, false
	for _, op := range ops {
		switch {
		case op.del:
			for k := range next {
				if k == op.key || op.end != "" && k >= op.key && k < op.end {
					delete(next, k)
					changed = true
				}
			}
		default:
			kv, ok := next[op.key]
			if !ok {
				kv = mkv{key: op.key, create: rev}
			}
			kv.value, kv.mod, kv.version = op.value, rev, kv.version+1
			next[op.key] = kv
			changed = true
		}
	}
	if changed {
		m.rev = rev
		m.at[rev] = next
	}
	return m.rev
}

// get is the keyspace at rev: the keys with prefix, in key order.
func (m *keyspace) get(rev int64, prefix string) []mkv {
	var out []mkv
	for k, v := range m.at[rev] {
		if strings.HasPrefix(k, prefix) {
			out = append(out, v)
		}
	}
	slices.SortFunc(out, func(a, b mkv) int { return strings.Compare(a.key, b.key) })
	return out
}

func kvsOf(kvs []*mvccpb.KeyValue) []mkv {
	out := []mkv{}
	for _, kv := range kvs {
		out = append(out, mkv{key: string(kv.Key), value: string(kv.Value), create: kv.CreateRevision, mod: kv.ModRevision, version: kv.Version})
	}
	return out
}

func orEmpty(kvs []mkv) []mkv {
	if kvs == nil {
		return []mkv{}
	}
	return kvs
}

// do runs a write and checks its header's revision against the model's
// after ops.
func (m *keyspace) do(t *testing.T, what string, run func() (int64, error), ops ...mop) int64 {
	t.Helper()
	rev, err := run()
	require.NoError(t, err, what)
	want := m.apply(ops...)
	require.Equal(t, want, rev, "%s: the header's revision", what)
	return rev
}

func putOp(cli *clientv3.Client, ctx context.Context, k, v string) func() (int64, error) {
	return func() (int64, error) {
		r, err := cli.Put(ctx, k, v)
		if err != nil {
			return 0, err
		}
		return r.Header.Revision, nil
	}
}

func delOp(cli *clientv3.Client, ctx context.Context, k string, opts ...clientv3.OpOption) func() (int64, error) {
	return func() (int64, error) {
		r, err := cli.Delete(ctx, k, opts...)
		if err != nil {
			return 0, err
		}
		return r.Header.Revision, nil
	}
}

func txnOp(cli *clientv3.Client, ctx context.Context, ops ...clientv3.Op) func() (int64, error) {
	return func() (int64, error) {
		r, err := cli.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return 0, err
		}
		return r.Header.Revision, nil
	}
}

// isErr says whether err, an error of clientv3's, is etcd's want.
func isErr(err, want error) bool { return errors.Is(rpctypes.Error(err), want) }

// A history: puts, deletes of a key and of a range, a deletion of
// nothing, a key deleted and created again; then clientv3's Compact with
// physical, at a mid-generation revision, at a tombstone, at a revision
// after a range delete and at the current revision. After each, reads
// below it fail with etcd's "compacted" error (through every member,
// serializable, once it applied the compaction), reads at and above it
// return the model's keyspace, exactly, through every member; compacting
// it again, or below it, fails with "compacted"; above the current
// revision, "future revision". Compactions make no revision.
func TestHistoryCompaction(t *testing.T) {
	tg := newKVTarget(t)
	cli := tg.cli
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	base := tg.rev(ctx)
	require.Equal(t, int64(1), base, "a fresh cluster is at revision 1")
	m := newKeyspace(base)
	put := func(k, v string) int64 { return m.do(t, "put "+k, putOp(cli, ctx, k, v), mput(k, v)) }
	put("c/k", "v1")                                                   // 2: c/k's first generation
	put("c/z", "z1")                                                   // 3: never written again
	put("c/k", "v2")                                                   // 4
	tomb := m.do(t, "delete c/k", delOp(cli, ctx, "c/k"), mdel("c/k")) // 5: c/k's tombstone
	m.do(t, "delete c/k again: no revision", delOp(cli, ctx, "c/k"), mdel("c/k"))
	midGen := put("c/k", "v3")                                                                                           // 6: second generation
	put("c/k", "v4")                                                                                                     // 7
	put("c/y", "y1")                                                                                                     // 8
	rangeDel := m.do(t, "delete [c/k, c/z)", delOp(cli, ctx, "c/k", clientv3.WithRange("c/z")), mdelRange("c/k", "c/z")) // 9: c/k and c/y
	put("c/k", "v5")                                                                                                     // 10: third generation
	m.do(t, "txn of two puts", txnOp(cli, ctx, clientv3.OpPut("c/y", "y2"), clientv3.OpPut("c/k", "v6")), mput("c/y", "y2"), mput("c/k", "v6"))
	require.Equal(t, int64(11), m.rev)
	require.Equal(t, []mkv{{"c/k", "v6", 10, 11, 2}, {"c/y", "y2", 11, 11, 1}, {"c/z", "z1", 3, 3, 1}}, m.get(m.rev, "c/"),
		"the model itself, by hand")

	// readAll checks a read at every revision the model has, through cli.
	readAll := func(who string, get func(rev int64) (*clientv3.GetResponse, error), compacted int64) {
		t.Helper()
		for rev := int64(1); rev <= m.rev; rev++ {
			r, err := get(rev)
			if rev < compacted {
				require.True(t, isErr(err, rpctypes.ErrCompacted), "%s: a read at %d below the compaction at %d: %v", who, rev, compacted, err)
				continue
			}
			require.NoError(t, err, "%s: a read at %d, compacted at %d", who, rev, compacted)
			want := m.get(rev, "c/")
			assert.Equal(t, orEmpty(want), kvsOf(r.Kvs), "%s: the keyspace at %d", who, rev)
			assert.Equal(t, int64(len(want)), r.Count, "%s: count at %d", who, rev)
			assert.False(t, r.More)
		}
	}
	compacted := int64(0)
	for i, at := range []int64{4, tomb, midGen, rangeDel, 0} {
		if at == 0 {
			at = m.rev // the current revision may be compacted
		}
		cr, err := cli.Compact(ctx, at, clientv3.WithCompactPhysical())
		require.NoError(t, err, "compact at %d", at)
		assert.Equal(t, m.rev, cr.Header.Revision, "a compaction's header: the current revision")
		compacted = at

		readAll("linearizable", func(rev int64) (*clientv3.GetResponse, error) {
			r, err := cli.Get(ctx, "c/", clientv3.WithPrefix(), clientv3.WithRev(rev))
			if err == nil {
				assert.Equal(t, m.rev, r.Header.Revision, "a read at a past revision: the header has the current one")
			}
			return r, err
		}, compacted)
		for rev := compacted; rev <= m.rev; rev++ {
			rangeOptionsAt(t, ctx, cli, m, rev)
		}
		for j, mc := range tg.members {
			// A member compacts when it applies the compaction: wait for
			// that, then read its history.
			waitFor(t, fmt.Sprintf("member %d applying the compaction at %d", j, at), 60*time.Second, func() error {
				_, err := mc.Get(ctx, "c/k", clientv3.WithRev(at-1), clientv3.WithSerializable())
				if at == 1 || isErr(err, rpctypes.ErrCompacted) {
					return nil
				}
				return fmt.Errorf("a serializable read at %d: %v", at-1, err)
			})
			readAll(fmt.Sprintf("serializable through member %d", j), func(rev int64) (*clientv3.GetResponse, error) {
				return mc.Get(ctx, "c/", clientv3.WithPrefix(), clientv3.WithRev(rev), clientv3.WithSerializable())
			}, compacted)
		}
		_, err = cli.Get(ctx, "c/k", clientv3.WithRev(m.rev+1))
		assert.True(t, isErr(err, rpctypes.ErrFutureRev), "a read above the current revision: %v", err)
		_, err = cli.Compact(ctx, at)
		assert.True(t, isErr(err, rpctypes.ErrCompacted), "compacting %d again: %v", at, err)
		_, err = cli.Compact(ctx, at-1)
		assert.True(t, isErr(err, rpctypes.ErrCompacted), "compacting %d below the compaction at %d: %v", at-1, at, err)
		_, err = cli.Compact(ctx, m.rev+1)
		assert.True(t, isErr(err, rpctypes.ErrFutureRev), "compacting above the current revision: %v", err)

		// The history goes on after the compaction, with no revision
		// taken by it: c/k is written again, c/z never.
		put("c/k", fmt.Sprintf("after%d", i))
		m.do(t, "delete c/y", delOp(cli, ctx, "c/y"), mdel("c/y"))
		put("c/y", fmt.Sprintf("again%d", i))
	}
	// c/z, written once at revision 3, is still at revision 3: every
	// compaction keeps a key's newest revision at or below it.
	r, err := cli.Get(ctx, "c/z", clientv3.WithRev(compacted))
	require.NoError(t, err)
	assert.Equal(t, []mkv{{"c/z", "z1", 3, 3, 1}}, kvsOf(r.Kvs))
}

// rangeOptionsAt reads c/ at rev with etcd's range options, each checked
// against the model as etcd's Range defines them: the keys in the range
// are counted (count), filtered by the revision bounds, sorted, then cut
// to the limit (more: the filter and sort left more than the limit).
func rangeOptionsAt(t *testing.T, ctx context.Context, cli *clientv3.Client, m *keyspace, rev int64) {
	t.Helper()
	byKey := func(a, b mkv) int { return strings.Compare(a.key, b.key) }
	for _, c := range []struct {
		name                string
		opts                []clientv3.OpOption
		keep                func(mkv) bool
		order               func(a, b mkv) int
		limit               int
		keysOnly, countOnly bool
	}{
		{name: "limit 1", opts: []clientv3.OpOption{clientv3.WithLimit(1)}, limit: 1},
		{name: "by key, descending, limit 2", opts: []clientv3.OpOption{clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend), clientv3.WithLimit(2)},
			order: func(a, b mkv) int { return byKey(b, a) }, limit: 2},
		{name: "by value, limit 2", opts: []clientv3.OpOption{clientv3.WithSort(clientv3.SortByValue, clientv3.SortAscend), clientv3.WithLimit(2)},
			order: func(a, b mkv) int { return strings.Compare(a.value, b.value) }, limit: 2},
		{name: "mod revision from 7, limit 1", opts: []clientv3.OpOption{clientv3.WithMinModRev(7), clientv3.WithLimit(1)},
			keep: func(kv mkv) bool { return kv.mod >= 7 }, limit: 1},
		{name: "mod revision up to 7", opts: []clientv3.OpOption{clientv3.WithMaxModRev(7)}, keep: func(kv mkv) bool { return kv.mod <= 7 }},
		{name: "created from 6", opts: []clientv3.OpOption{clientv3.WithMinCreateRev(6)}, keep: func(kv mkv) bool { return kv.create >= 6 }},
		{name: "created up to 5, limit 1", opts: []clientv3.OpOption{clientv3.WithMaxCreateRev(5), clientv3.WithLimit(1)},
			keep: func(kv mkv) bool { return kv.create <= 5 }, limit: 1},
		{name: "keys only", opts: []clientv3.OpOption{clientv3.WithKeysOnly()}, keysOnly: true},
		{name: "count only", opts: []clientv3.OpOption{clientv3.WithCountOnly()}, countOnly: true},
	} {
		all := m.get(rev, "c/")
		want := []mkv{}
		for _, kv := range all {
			if c.keep == nil || c.keep(kv) {
				if c.keysOnly {
					kv.value = ""
				}
				want = append(want, kv)
			}
		}
		if c.order != nil {
			slices.SortFunc(want, c.order)
		}
		more := c.limit > 0 && len(want) > c.limit
		if more {
			want = want[:c.limit]
		}
		if c.countOnly {
			want = []mkv{}
		}
		r, err := cli.Get(ctx, "c/", append([]clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithRev(rev)}, c.opts...)...)
		require.NoError(t, err, "%s at %d", c.name, rev)
		assert.Equal(t, want, kvsOf(r.Kvs), "%s at %d", c.name, rev)
		assert.Equal(t, int64(len(all)), r.Count, "%s at %d: count", c.name, rev)
		assert.Equal(t, more, r.More, "%s at %d: more", c.name, rev)
	}
}

// Kubernetes' paginated list: pages of a prefix read with a limit, the
// first at the current revision, the others at the first page's header
// revision from the last key + "\x00", through a different member each,
// while another client puts, overwrites and deletes keys of that prefix
// (at least three of its writes between two pages). The pages together
// are exactly the keyspace at that revision, as one read at it returns
// it: no key twice, none missing, every value, revision and version; each
// page's count is the number of keys from its start to the prefix's end,
// more is whether the page left some out.
func TestHistoryPagination(t *testing.T) {
	tg := newKVTarget(t)
	cli := tg.cli
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const prefix, initial, space, limit = "pg/", 300, 600, 7
	key := func(i int) string { return fmt.Sprintf("%s%04d", prefix, i) }
	for i := 0; i < initial; i += 50 {
		var ops []clientv3.Op
		for j := i; j < i+50; j++ {
			ops = append(ops, clientv3.OpPut(key(j), fmt.Sprintf("v%d-0", j)))
		}
		_, err := cli.Txn(ctx).Then(ops...).Commit()
		require.NoError(t, err)
	}

	// The writer: its own client, on the last member. writes counts the
	// writes that changed a key.
	var writes atomic.Int64
	stop := make(chan struct{})
	writerDone := make(chan error, 1)
	go func() {
		w := tg.members[len(tg.members)-1]
		rng := rand.New(rand.NewPCG(1, 2))
		for n := 1; ; n++ {
			select {
			case <-stop:
				writerDone <- nil
				return
			default:
			}
			i := rng.IntN(space)
			changed := true
			var err error
			if rng.IntN(3) == 0 {
				var d *clientv3.DeleteResponse
				d, err = w.Delete(ctx, key(i))
				changed = err == nil && d.Deleted == 1
			} else {
				_, err = w.Put(ctx, key(i), fmt.Sprintf("v%d-%d", i, n))
			}
			if err != nil {
				writerDone <- err
				return
			}
			if changed {
				writes.Add(1)
			}
		}
	}()
	awaitWrites := func(since int64) {
		waitFor(t, "three writes of the writer", 60*time.Second, func() error {
			if writes.Load() >= since+3 {
				return nil
			}
			select {
			case err := <-writerDone:
				t.Fatalf("the writer: %v", err)
			default:
			}
			return errors.New("not yet")
		})
	}

	end := clientv3.GetPrefixRangeEnd(prefix)
	type page struct {
		start string
		resp  *clientv3.GetResponse
	}
	awaitWrites(0)
	first, err := cli.Get(ctx, prefix, clientv3.WithRange(end), clientv3.WithLimit(limit))
	require.NoError(t, err)
	rev := first.Header.Revision
	pages := []page{{prefix, first}}
	last := first
	for last.More {
		awaitWrites(writes.Load())
		start := string(last.Kvs[len(last.Kvs)-1].Key) + "\x00"
		r, err := tg.members[len(pages)%len(tg.members)].Get(ctx, start, clientv3.WithRange(end), clientv3.WithLimit(limit), clientv3.WithRev(rev))
		require.NoError(t, err, "page %d at revision %d", len(pages), rev)
		pages = append(pages, page{start, r})
		last = r
	}
	close(stop)
	require.NoError(t, <-writerDone)

	whole, err := cli.Get(ctx, prefix, clientv3.WithRange(end), clientv3.WithRev(rev))
	require.NoError(t, err)
	want := kvsOf(whole.Kvs)
	require.Equal(t, int64(len(want)), whole.Count)
	var union []mkv
	for i, p := range pages {
		from := 0
		for from < len(want) && want[from].key < p.start {
			from++
		}
		rest := int64(len(want) - from)
		assert.Equal(t, rest, p.resp.Count, "page %d's count: the keys from %q on at %d", i, p.start, rev)
		assert.Equal(t, min(int64(limit), rest), int64(len(p.resp.Kvs)), "page %d's length", i)
		assert.Equal(t, rest > limit, p.resp.More, "page %d's more", i)
		union = append(union, kvsOf(p.resp.Kvs)...)
	}
	require.Equal(t, want, union, "the pages at revision %d against one read at it", rev)

	now, err := cli.Get(ctx, prefix, clientv3.WithRange(end))
	require.NoError(t, err)
	require.GreaterOrEqual(t, now.Header.Revision-rev, int64(3*(len(pages)-1)), "the writer wrote between the pages")
	require.NotEqual(t, want, kvsOf(now.Kvs), "the keyspace changed while the pages were read")
	t.Logf("%s: %d pages of %d keys at revision %d, %d writes meanwhile (now at revision %d)",
		tg.name, len(pages), len(want), rev, writes.Load(), now.Header.Revision)

	// A compaction past a list's revision ends the list: its next page is
	// etcd's "compacted" error (Kubernetes' expired continue token).
	p1, err := cli.Get(ctx, prefix, clientv3.WithRange(end), clientv3.WithLimit(limit))
	require.NoError(t, err)
	require.True(t, p1.More)
	at := p1.Header.Revision
	after, err := cli.Put(ctx, key(0), "after the first page")
	require.NoError(t, err)
	_, err = cli.Compact(ctx, after.Header.Revision)
	require.NoError(t, err)
	next := string(p1.Kvs[len(p1.Kvs)-1].Key) + "\x00"
	_, err = cli.Get(ctx, next, clientv3.WithRange(end), clientv3.WithLimit(limit), clientv3.WithRev(at))
	assert.True(t, isErr(err, rpctypes.ErrCompacted), "the next page at %d after a compaction at %d: %v", at, after.Header.Revision, err)
	r, err := cli.Get(ctx, next, clientv3.WithRange(end), clientv3.WithLimit(limit), clientv3.WithRev(after.Header.Revision))
	require.NoError(t, err, "a page at the compaction revision")
	assert.Len(t, r.Kvs, limit)
}

// A bank: accounts with a fixed total, transfers between them made by
// clients on every member at once through concurrency.NewSTM, for each
// isolation level. Every attempt reads every account, one by one.
//
//   - SerializableSnapshot and Serializable read an attempt at one
//     revision (the first read's, WithRev after it): every attempt's
//     reads sum to the total.
//   - Those two and RepeatableReads validate their reads at commit
//     (mod_revision compares): the total holds at every revision, and
//     each commit moved exactly the amount it meant from the balances
//     just before it.
//   - ReadCommitted validates nothing, so concurrent transfers may lose
//     updates and the total is not etcd's promise there. What it keeps:
//     each commit wrote both its accounts at one revision, with the
//     values it meant.
//
// For every level, each account's final balance is its last commit's.
func TestHistorySTM(t *testing.T) {
	tg := newKVTarget(t)
	const accounts, initial, perMember, transfers = 5, 100, 2, 15
	const total = accounts * initial
	for _, iso := range []struct {
		name string
		iso  concurrency.Isolation
	}{
		{"SerializableSnapshot", concurrency.SerializableSnapshot},
		{"Serializable", concurrency.Serializable},
		{"RepeatableReads", concurrency.RepeatableReads},
		{"ReadCommitted", concurrency.ReadCommitted},
	} {
		t.Run(iso.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			prefix := "bank/" + iso.name + "/"
			acct := func(i int) string { return fmt.Sprintf("%s%d", prefix, i) }
			var init []clientv3.Op
			for i := range accounts {
				init = append(init, clientv3.OpPut(acct(i), strconv.Itoa(initial)))
			}
			start, err := tg.cli.Txn(ctx).Then(init...).Commit()
			require.NoError(t, err)
			// RepeatableReads and ReadCommitted read serializably: a member
			// answers from what it has applied, which need not hold yet a
			// write answered through another member (etcd's too). A
			// linearizable read at each member waits until it has.
			for mi, member := range tg.members {
				r, err := member.Get(ctx, acct(0))
				require.NoError(t, err, "member %d", mi)
				require.GreaterOrEqual(t, r.Header.Revision, start.Header.Revision, "member %d", mi)
			}

			type commit struct {
				rev, amount      int64
				from, to         int
				fromWant, toWant int64 // what the transfer wrote
			}
			var (
				mu           sync.Mutex
				commits      []commit
				attempts     atomic.Int64
				inconsistent atomic.Int64 // attempts whose reads did not sum to the total
			)
			workers := len(tg.members) * perMember
			commitsWanted := workers * transfers
			maxAttempts := int64(commitsWanted * workers * 20)
			var wg sync.WaitGroup
			errs := make(chan error, workers)
			for mi, member := range tg.members {
				for w := range perMember {
					wg.Add(1)
					go func() {
						defer wg.Done()
						rng := rand.New(rand.NewPCG(uint64(mi), uint64(w)))
						for range transfers {
							var c commit
							apply := func(s concurrency.STM) error {
								// A failed attempt answers another's commit,
								// which fails at most one attempt of every
								// other worker (RepeatableReads' stale
								// reads from a lagging member add some):
								// far more attempts than that is a
								// livelock.
								if attempts.Add(1) > maxAttempts {
									return fmt.Errorf("over %d attempts for %d transfers: commits keep failing", maxAttempts, commitsWanted)
								}
								from := rng.IntN(accounts)
								to := (from + 1 + rng.IntN(accounts-1)) % accounts
								bal := make([]int64, accounts)
								var sum int64
								// The first read fixes the attempt's revision
								// (Serializable*); the rest follow it.
								for _, i := range append([]int{from}, slices.DeleteFunc(seq(accounts), func(i int) bool { return i == from })...) {
									v, err := strconv.ParseInt(s.Get(acct(i)), 10, 64)
									if err != nil {
										return fmt.Errorf("account %d: %w", i, err)
									}
									bal[i], sum = v, sum+v
								}
								if sum != total {
									inconsistent.Add(1)
								}
								amount := min(bal[from], 1+rng.Int64N(20))
								c = commit{amount: amount, from: from, to: to, fromWant: bal[from] - amount, toWant: bal[to] + amount}
								s.Put(acct(from), strconv.FormatInt(c.fromWant, 10))
								s.Put(acct(to), strconv.FormatInt(c.toWant, 10))
								return nil
							}
							resp, err := concurrency.NewSTM(member, apply, concurrency.WithIsolation(iso.iso), concurrency.WithAbortContext(ctx))
							if err != nil {
								errs <- fmt.Errorf("member %d, worker %d: %w", mi, w, err)
								return
							}
							c.rev = resp.Header.Revision
							mu.Lock()
							commits = append(commits, c)
							mu.Unlock()
						}
					}()
				}
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			t.Logf("%s %s: %d commits in %d attempts; %d attempts read balances not summing to %d",
				tg.name, iso.name, len(commits), attempts.Load(), inconsistent.Load(), total)
			require.Len(t, commits, commitsWanted)

			// balances reads every account at rev.
			balances := func(rev int64) ([]int64, []int64) {
				r, err := tg.cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(rev))
				require.NoError(t, err, "balances at %d", rev)
				require.Len(t, r.Kvs, accounts, "accounts at %d", rev)
				bal, mods := make([]int64, accounts), make([]int64, accounts)
				for i, kv := range r.Kvs {
					require.Equal(t, acct(i), string(kv.Key))
					v, err := strconv.ParseInt(string(kv.Value), 10, 64)
					require.NoError(t, err)
					bal[i], mods[i] = v, kv.ModRevision
				}
				return bal, mods
			}
			slices.SortFunc(commits, func(a, b commit) int { return int(a.rev - b.rev) })
			serializable := iso.iso != concurrency.ReadCommitted
			last := make([]int64, accounts)
			for i := range last {
				last[i] = initial
			}
			for i, c := range commits {
				if i > 0 {
					require.Greater(t, c.rev, commits[i-1].rev, "two commits at one revision")
				} else {
					require.Greater(t, c.rev, start.Header.Revision)
				}
				bal, mods := balances(c.rev)
				for a := range accounts {
					switch a {
					case c.from, c.to:
						assert.Equal(t, c.rev, mods[a], "commit at %d: account %d's mod_revision", c.rev, a)
					default:
						assert.Less(t, mods[a], c.rev, "commit at %d wrote account %d, not its own", c.rev, a)
					}
				}
				assert.Equal(t, c.fromWant, bal[c.from], "commit at %d: account %d (from)", c.rev, c.from)
				assert.Equal(t, c.toWant, bal[c.to], "commit at %d: account %d (to)", c.rev, c.to)
				last[c.from], last[c.to] = c.fromWant, c.toWant
				if serializable {
					before, _ := balances(c.rev - 1)
					assert.Equal(t, before[c.from]-c.amount, bal[c.from], "commit at %d moved %d from the balance before it", c.rev, c.amount)
					assert.Equal(t, before[c.to]+c.amount, bal[c.to], "commit at %d moved %d to the balance before it", c.rev, c.amount)
					var sum int64
					for _, b := range bal {
						sum += b
					}
					assert.Equal(t, int64(total), sum, "the total at revision %d", c.rev)
				}
			}
			final, _ := balances(0)
			assert.Equal(t, last, final, "each account's final balance is its last commit's")
			if serializable {
				var sum int64
				for _, b := range final {
					sum += b
				}
				assert.Equal(t, int64(total), sum, "the total at the end")
			}
			if iso.iso == concurrency.SerializableSnapshot || iso.iso == concurrency.Serializable {
				assert.Zero(t, inconsistent.Load(), "attempts whose reads were not at one revision")
			}
		})
	}
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// Range compares and nested txns, with the results etcd defines: a
// compare over a range holds if every key in it satisfies it, and over a
// range with no key compares a zero key (version, revisions 0), except a
// value compare, which fails; compares of nested txns are evaluated on
// the keyspace before the txn, ranges in a branch see the writes before
// them; the whole txn is one revision; etcd's duplicate-key rules across
// nested txns; a range at a compacted or future revision in a branch
// refuses the whole txn, writing nothing.
func TestHistoryNestedTxn(t *testing.T) {
	tg := newKVTarget(t)
	cli := tg.cli
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	m := newKeyspace(tg.rev(ctx))
	put := func(k, v string) int64 { return m.do(t, "put "+k, putOp(cli, ctx, k, v), mput(k, v)) }
	put("n/a", "1")                                            // 2
	put("n/b", "b1")                                           // 3
	put("n/b", "b2")                                           // 4
	put("n/c", "c1")                                           // 5
	put("n/b", "2")                                            // 6
	put("n/c", "3")                                            // 7
	put("n/d", "d")                                            // 8
	m.do(t, "delete n/d", delOp(cli, ctx, "n/d"), mdel("n/d")) // 9
	put("n/x", "old")                                          // 10
	put("o/x", "x")                                            // 11
	// n/a: version 1, create 2; n/b: version 3, create 3, mod 6;
	// n/c: version 2, create 5, mod 7; n/d: none; n/x: version 1, mod 10.
	require.Equal(t, int64(11), m.rev)

	for _, c := range []struct {
		name string
		cmps []clientv3.Cmp
		want bool
	}{
		{"every version in a prefix > 0", []clientv3.Cmp{clientv3.Compare(clientv3.Version("n/").WithPrefix(), ">", 0)}, true},
		{"every version in a prefix = 1", []clientv3.Cmp{clientv3.Compare(clientv3.Version("n/").WithPrefix(), "=", 1)}, false},
		{"versions in [n/a, n/c) < 4", []clientv3.Cmp{clientv3.Compare(clientv3.Version("n/a").WithRange("n/c"), "<", 4)}, true},
		{"versions in [n/a, n/c) < 3", []clientv3.Cmp{clientv3.Compare(clientv3.Version("n/a").WithRange("n/c"), "<", 3)}, false},
		{"create revisions in a prefix < 11", []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision("n/").WithPrefix(), "<", 11)}, true},
		{"create revisions in a prefix < 5", []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision("n/").WithPrefix(), "<", 5)}, false},
		{"mod revisions in a prefix > 1", []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision("n/").WithPrefix(), ">", 1)}, true},
		{"mod revisions in a prefix != 6", []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision("n/").WithPrefix(), "!=", 6)}, false},
		{"values in a prefix != zzz", []clientv3.Cmp{clientv3.Compare(clientv3.Value("n/").WithPrefix(), "!=", "zzz")}, true},
		{"values in a prefix = 1", []clientv3.Cmp{clientv3.Compare(clientv3.Value("n/").WithPrefix(), "=", "1")}, false},
		{"values in [n/a, n/b) = 1", []clientv3.Cmp{clientv3.Compare(clientv3.Value("n/a").WithRange("n/b"), "=", "1")}, true},
		{"an empty prefix's version = 0", []clientv3.Cmp{clientv3.Compare(clientv3.Version("none/").WithPrefix(), "=", 0)}, true},
		{"an empty prefix's version > 0", []clientv3.Cmp{clientv3.Compare(clientv3.Version("none/").WithPrefix(), ">", 0)}, false},
		{"an empty prefix's create revision = 0", []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision("none/").WithPrefix(), "=", 0)}, true},
		{"an empty prefix's value != x", []clientv3.Cmp{clientv3.Compare(clientv3.Value("none/").WithPrefix(), "!=", "x")}, false},
		{"from n/ on, version > 0", []clientv3.Cmp{clientv3.Compare(clientv3.Version("n/").WithRange("\x00"), ">", 0)}, true},
		{"from n/ on, value != x: o/x", []clientv3.Cmp{clientv3.Compare(clientv3.Value("n/").WithRange("\x00"), "!=", "x")}, false},
		{"[n/c, n/e): n/c only, n/d deleted", []clientv3.Cmp{clientv3.Compare(clientv3.Version("n/c").WithRange("n/e"), "=", 2)}, true},
		{"a deleted key's create revision = 0", []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision("n/d"), "=", 0)}, true},
		{"a deleted key's mod revision < 9", []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision("n/d"), "<", 9)}, true},
		{"a deleted key's value = empty", []clientv3.Cmp{clientv3.Compare(clientv3.Value("n/d"), "=", "")}, false},
		{"keys present and missing, all hold", []clientv3.Cmp{
			clientv3.Compare(clientv3.Version("n/a"), "=", 1),
			clientv3.Compare(clientv3.CreateRevision("n/d"), "=", 0),
			clientv3.Compare(clientv3.ModRevision("n/missing"), "=", 0),
			clientv3.Compare(clientv3.Version("n/b").WithRange("n/e"), ">", 1),
			clientv3.Compare(clientv3.Version("n/zz").WithPrefix(), "<", 1),
		}, true},
		{"keys present and missing, a missing key's value fails", []clientv3.Cmp{
			clientv3.Compare(clientv3.Version("n/a"), "=", 1),
			clientv3.Compare(clientv3.CreateRevision("n/d"), "=", 0),
			clientv3.Compare(clientv3.Value("n/missing"), "!=", "x"),
		}, false},
		{"keys present and missing, a present key fails", []clientv3.Cmp{
			clientv3.Compare(clientv3.CreateRevision("n/d"), "=", 0),
			clientv3.Compare(clientv3.Version("n/b"), "=", 2),
		}, false},
	} {
		r, err := cli.Txn(ctx).If(c.cmps...).Then(clientv3.OpGet("n/a")).Else(clientv3.OpGet("n/b")).Commit()
		require.NoError(t, err, c.name)
		assert.Equal(t, c.want, r.Succeeded, c.name)
		assert.Equal(t, m.rev, r.Header.Revision, "%s: a txn that only reads makes no revision", c.name)
		require.Len(t, r.Responses, 1, c.name)
		want := map[bool]string{true: "n/a", false: "n/b"}[c.want]
		assert.Equal(t, []mkv{m.at[m.rev][want]}, kvsOf(r.Responses[0].GetResponseRange().Kvs), "%s: the branch's read", c.name)
	}

	// One txn, nested txns on both its paths: nested compares see the
	// keyspace before the txn (n/x is still "old" for them), ranges the
	// writes before them.
	rev := m.rev + 1
	r, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.Version("n/a"), "=", 1)).Then(
		clientv3.OpPut("n/x", "new"),
		clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.Value("n/x"), "=", "old")},
			[]clientv3.Op{clientv3.OpPut("n/y", "saw-old"), clientv3.OpGet("n/x")},
			[]clientv3.Op{clientv3.OpPut("n/y", "saw-new")}),
		clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.Version("n/b").WithPrefix(), "=", 99)},
			[]clientv3.Op{clientv3.OpPut("n/z", "no")},
			[]clientv3.Op{clientv3.OpPut("n/z", "yes"), clientv3.OpDelete("n/c"), clientv3.OpGet("n/a", clientv3.WithRev(2))}),
		clientv3.OpGet("n/", clientv3.WithPrefix()),
	).Else(clientv3.OpPut("n/never", "x")).Commit()
	require.NoError(t, err)
	m.apply(mput("n/x", "new"), mput("n/y", "saw-old"), mput("n/z", "yes"), mdel("n/c"))
	require.Equal(t, rev, m.rev)
	require.True(t, r.Succeeded)
	assert.Equal(t, rev, r.Header.Revision, "the txn's revision")
	require.Len(t, r.Responses, 4)
	assert.Equal(t, rev, r.Responses[0].GetResponsePut().Header.Revision, "a put in the txn: its revision")
	n1 := r.Responses[1].GetResponseTxn()
	require.NotNil(t, n1)
	assert.True(t, n1.Succeeded, "the nested compare saw n/x before the txn's put")
	assert.Zero(t, n1.Header.GetRevision(), "a nested txn's header is empty")
	require.Len(t, n1.Responses, 2)
	assert.Equal(t, rev, n1.Responses[0].GetResponsePut().Header.Revision)
	assert.Equal(t, []mkv{{"n/x", "new", 10, rev, 2}}, kvsOf(n1.Responses[1].GetResponseRange().Kvs), "a range after the put sees it")
	assert.Equal(t, rev, n1.Responses[1].GetResponseRange().Header.Revision)
	n2 := r.Responses[2].GetResponseTxn()
	require.NotNil(t, n2)
	assert.False(t, n2.Succeeded)
	require.Len(t, n2.Responses, 3)
	assert.Equal(t, int64(1), n2.Responses[1].GetResponseDeleteRange().Deleted)
	assert.Equal(t, []mkv{{"n/a", "1", 2, 2, 1}}, kvsOf(n2.Responses[2].GetResponseRange().Kvs), "a range at a past revision in a nested txn")
	assert.Equal(t, m.get(rev, "n/"), kvsOf(r.Responses[3].GetResponseRange().Kvs), "the outer range sees every write before it")
	g, err := cli.Get(ctx, "", clientv3.WithFromKey())
	require.NoError(t, err)
	assert.Equal(t, m.get(rev, ""), kvsOf(g.Kvs), "the keyspace after the txn")
	g, err = cli.Get(ctx, "n/", clientv3.WithPrefix(), clientv3.WithRev(rev-1))
	require.NoError(t, err)
	assert.Equal(t, m.get(rev-1, "n/"), kvsOf(g.Kvs), "the keyspace just before the txn")

	// A txn refused in the failure path, and one whose compare fails
	// with a nested txn on the failure path.
	r, err = cli.Txn(ctx).If(clientv3.Compare(clientv3.Value("n/x"), "=", "old")).Then(clientv3.OpPut("n/never", "x")).Else(
		clientv3.OpTxn(nil, []clientv3.Op{clientv3.OpPut("n/w", "1"), clientv3.OpDelete("n/", clientv3.WithRange("n/b"))}, nil),
	).Commit()
	require.NoError(t, err)
	m.apply(mput("n/w", "1"), mdelRange("n/", "n/b"))
	assert.False(t, r.Succeeded)
	assert.Equal(t, m.rev, r.Header.Revision)
	nr := r.Responses[0].GetResponseTxn()
	require.NotNil(t, nr)
	assert.True(t, nr.Succeeded, "a nested txn without compares takes its success path")
	assert.Equal(t, int64(1), nr.Responses[1].GetResponseDeleteRange().Deleted, "n/a deleted")

	// etcd's duplicate-key rules (v3rpc's checkIntervals), each on a
	// fresh prefix: refused ones write nothing.
	for i, c := range []struct {
		name string
		ops  func(p string) []clientv3.Op
		dup  bool
		// writes is what an accepted txn does, on prefix p.
		writes func(p string) []mop
	}{
		{"a key put twice", func(p string) []clientv3.Op {
			return []clientv3.Op{clientv3.OpPut(p+"k", "1"), clientv3.OpPut(p+"k", "2")}
		}, true, nil},
		{"a key put and deleted", func(p string) []clientv3.Op {
			return []clientv3.Op{clientv3.OpDelete(p + "k"), clientv3.OpPut(p+"k", "2")}
		}, true, nil},
		{"a key put, and in a nested txn's success path", func(p string) []clientv3.Op {
			return []clientv3.Op{clientv3.OpPut(p+"k", "1"), clientv3.OpTxn(nil, []clientv3.Op{clientv3.OpPut(p+"k", "2")}, nil)}
		}, true, nil},
		{"a key put, and in a nested txn's failure path", func(p string) []clientv3.Op {
			return []clientv3.Op{clientv3.OpPut(p+"k", "1"), clientv3.OpTxn(nil, nil, []clientv3.Op{clientv3.OpPut(p+"k", "2")})}
		}, true, nil},
		{"a key put in two nested txns", func(p string) []clientv3.Op {
			return []clientv3.Op{
				clientv3.OpTxn(nil, []clientv3.Op{clientv3.OpPut(p+"k", "1")}, nil),
				clientv3.OpTxn(nil, []clientv3.Op{clientv3.OpPut(p+"k", "2")}, nil),
			}
		}, true, nil},
		{"a range deleted, a key in it put in a nested txn", func(p string) []clientv3.Op {
			return []clientv3.Op{clientv3.OpDelete(p, clientv3.WithPrefix()), clientv3.OpTxn(nil, []clientv3.Op{clientv3.OpPut(p+"k", "2")}, nil)}
		}, true, nil},
		{"a key put, deleted in a nested txn's failure path", func(p string) []clientv3.Op {
			return []clientv3.Op{clientv3.OpPut(p+"k", "1"), clientv3.OpTxn(nil, nil, []clientv3.Op{clientv3.OpDelete(p + "k")})}
		}, true, nil},
		{"a key put in both paths of one nested txn", func(p string) []clientv3.Op {
			return []clientv3.Op{clientv3.OpTxn(nil, []clientv3.Op{clientv3.OpPut(p+"k", "1")}, []clientv3.Op{clientv3.OpPut(p+"k", "2")})}
		}, false, func(p string) []mop { return []mop{mput(p+"k", "1")} }},
		{"two deletes that overlap", func(p string) []clientv3.Op {
			return []clientv3.Op{clientv3.OpDelete(p + "a"), clientv3.OpDelete(p, clientv3.WithPrefix())}
		}, false, func(p string) []mop { return []mop{mdelRange(p, p+"\xff")} }},
		{"a key deleted in a nested txn, another put", func(p string) []clientv3.Op {
			return []clientv3.Op{clientv3.OpTxn(nil, []clientv3.Op{clientv3.OpDelete(p + "a")}, nil), clientv3.OpPut(p+"k", "3")}
		}, false, func(p string) []mop { return []mop{mdel(p + "a"), mput(p+"k", "3")} }},
	} {
		p := fmt.Sprintf("dup%d/", i)
		m.do(t, "setup", txnOp(cli, ctx, clientv3.OpPut(p+"a", "a"), clientv3.OpPut(p+"b", "b")), mput(p+"a", "a"), mput(p+"b", "b"))
		r, err := cli.Txn(ctx).Then(c.ops(p)...).Commit()
		if c.dup {
			assert.True(t, isErr(err, rpctypes.ErrDuplicateKey), "%s: %v", c.name, err)
		} else if assert.NoError(t, err, c.name) {
			m.apply(c.writes(p)...)
			assert.Equal(t, m.rev, r.Header.Revision, c.name)
		}
		// The failure path is checked as well.
		_, err = cli.Txn(ctx).If(clientv3.Compare(clientv3.Version(p+"a"), "=", 99)).Else(c.ops(p)...).Commit()
		if c.dup {
			assert.True(t, isErr(err, rpctypes.ErrDuplicateKey), "%s, in the failure path: %v", c.name, err)
		}
		g, err := cli.Get(ctx, p, clientv3.WithPrefix())
		require.NoError(t, err)
		if c.dup {
			assert.Equal(t, orEmpty(m.get(m.rev, p)), kvsOf(g.Kvs), "%s: nothing written", c.name)
		}
		// Align the model with an accepted failure path's writes.
		if !c.dup {
			m.apply(c.writes(p)...)
			assert.Equal(t, orEmpty(m.get(m.rev, p)), kvsOf(g.Kvs), c.name)
			assert.Equal(t, m.rev, g.Header.Revision, c.name)
		}
	}

	// A range at a compacted or a future revision in a branch refuses the
	// whole txn: the put before it is not written.
	cur := m.rev
	_, err = cli.Compact(ctx, 5, clientv3.WithCompactPhysical())
	require.NoError(t, err)
	for _, c := range []struct {
		rev  int64
		want error
	}{{4, rpctypes.ErrCompacted}, {cur + 1, rpctypes.ErrFutureRev}} {
		_, err = cli.Txn(ctx).Then(clientv3.OpPut("n/refused", "x"),
			clientv3.OpTxn(nil, []clientv3.Op{clientv3.OpGet("n/a", clientv3.WithRev(c.rev))}, nil)).Commit()
		assert.True(t, isErr(err, c.want), "a range at %d in a nested txn: %v", c.rev, err)
	}
	g, err = cli.Get(ctx, "n/refused")
	require.NoError(t, err)
	assert.Empty(t, g.Kvs)
	assert.Equal(t, cur, g.Header.Revision, "refused txns make no revision")
	g, err = cli.Get(ctx, "n/b", clientv3.WithRev(5))
	require.NoError(t, err)
	assert.Equal(t, []mkv{{"n/b", "b2", 3, 4, 2}}, kvsOf(g.Kvs), "n/b at the compaction revision")
}

// Kubernetes' storage without watches: GuaranteedUpdate's loop (a read,
// then a txn that writes only if mod_revision is still the one read, and
// on a conflict reads the key in the txn's failure path and tries again)
// by workers on every member at once on one key; creation and deletion
// with their preconditions. No update is lost: the key's history is one
// increment per revision, each read back at its revision.
func TestHistoryGuaranteedUpdate(t *testing.T) {
	tg := newKVTarget(t)
	cli := tg.cli
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const key, perMember, updates = "/registry/pods/default/counter", 2, 20
	workers := perMember * len(tg.members)
	maxConflicts := int64(workers * updates * workers * 10)
	value := func(n int64, by string) string { return fmt.Sprintf(`{"n":%d,"by":%q}`, n, by) }
	count := func(v []byte) int64 {
		s := strings.TrimPrefix(string(v), `{"n":`)
		n, err := strconv.ParseInt(s[:strings.IndexByte(s, ',')], 10, 64)
		require.NoError(t, err, "%s", v)
		return n
	}

	// Create: only if the key does not exist.
	create := func() *clientv3.TxnResponse {
		r, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", 0)).Then(clientv3.OpPut(key, value(0, "create"))).Commit()
		require.NoError(t, err)
		return r
	}
	created := create()
	require.True(t, created.Succeeded)
	createRev := created.Header.Revision
	require.False(t, create().Succeeded, "creating an existing key")

	type update struct {
		rev, n int64
		by     string
	}
	var (
		mu        sync.Mutex
		done      []update
		conflicts atomic.Int64
	)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for mi, member := range tg.members {
		for w := range perMember {
			wg.Add(1)
			go func() {
				defer wg.Done()
				by := fmt.Sprintf("m%d-w%d", mi, w)
				for range updates {
					g, err := member.Get(ctx, key)
					if err != nil {
						errs <- err
						return
					}
					cur := g.Kvs[0]
					for {
						next := count(cur.Value) + 1
						r, err := member.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", cur.ModRevision)).
							Then(clientv3.OpPut(key, value(next, by))).Else(clientv3.OpGet(key)).Commit()
						if err != nil {
							errs <- err
							return
						}
						if r.Succeeded {
							mu.Lock()
							done = append(done, update{r.Header.Revision, next, by})
							mu.Unlock()
							break
						}
						// A conflict answers another's update, which fails
						// at most one try of every other worker.
						if conflicts.Add(1) > maxConflicts {
							errs <- fmt.Errorf("over %d conflicts for %d updates: updates keep failing", maxConflicts, workers*updates)
							return
						}
						cur = r.Responses[0].GetResponseRange().Kvs[0]
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("%s: %d updates by %d workers, %d conflicts retried", tg.name, len(done), workers, conflicts.Load())

	n := int64(workers * updates)
	require.Len(t, done, int(n))
	slices.SortFunc(done, func(a, b update) int { return int(a.rev - b.rev) })
	for i, u := range done {
		// Nothing else writes: the updates are the revisions after the
		// create, one each, and each counts one more than the one before.
		require.Equal(t, createRev+int64(i)+1, u.rev, "update %d's revision", i)
		require.Equal(t, int64(i)+1, u.n, "update at revision %d counted from the one before it", u.rev)
		g, err := cli.Get(ctx, key, clientv3.WithRev(u.rev))
		require.NoError(t, err)
		require.Equal(t, []mkv{{key, value(u.n, u.by), createRev, u.rev, int64(i) + 2}}, kvsOf(g.Kvs), "the key at revision %d", u.rev)
	}
	g, err := cli.Get(ctx, key)
	require.NoError(t, err)
	last := done[len(done)-1]
	require.Equal(t, []mkv{{key, value(n, last.by), createRev, last.rev, n + 1}}, kvsOf(g.Kvs))

	// Delete with a precondition: a stale one fails and reads the key, a
	// current one deletes it; then the key is created anew.
	stale, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", done[0].rev)).
		Then(clientv3.OpDelete(key)).Else(clientv3.OpGet(key)).Commit()
	require.NoError(t, err)
	require.False(t, stale.Succeeded)
	assert.Equal(t, kvsOf(g.Kvs), kvsOf(stale.Responses[0].GetResponseRange().Kvs))
	assert.Equal(t, last.rev, stale.Header.Revision)
	del, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", last.rev)).
		Then(clientv3.OpDelete(key, clientv3.WithPrevKV())).Else(clientv3.OpGet(key)).Commit()
	require.NoError(t, err)
	require.True(t, del.Succeeded)
	dr := del.Responses[0].GetResponseDeleteRange()
	assert.Equal(t, int64(1), dr.Deleted)
	assert.Equal(t, kvsOf(g.Kvs), kvsOf(dr.PrevKvs))
	assert.Equal(t, last.rev+1, del.Header.Revision)
	again := create()
	require.True(t, again.Succeeded)
	assert.Equal(t, last.rev+2, again.Header.Revision)
	g, err = cli.Get(ctx, key)
	require.NoError(t, err)
	assert.Equal(t, []mkv{{key, value(0, "create"), last.rev + 2, last.rev + 2, 1}}, kvsOf(g.Kvs), "a new generation")
	g, err = cli.Get(ctx, key, clientv3.WithRev(last.rev+1))
	require.NoError(t, err)
	assert.Empty(t, g.Kvs, "the key at its deletion")
	assert.Equal(t, int64(0), g.Count)
	g, err = cli.Get(ctx, key, clientv3.WithCountOnly())
	require.NoError(t, err)
	assert.Equal(t, int64(1), g.Count)
	assert.Empty(t, g.Kvs)
}

// A write answered through a member is applied there before the answer,
// as etcd's member answers a proposal only once it has applied it: a
// serializable read through the same member sees it at once, however idle
// the cluster, whichever member leads. Each member writes in turn, as a
// client would from one endpoint (etcdctl put, then get
// --consistency=s), and also deletes and writes in a txn.
func TestHistoryReadYourWritesAtAMember(t *testing.T) {
	tg := newKVTarget(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for round := range 10 {
		for mi, m := range tg.members {
			key := fmt.Sprintf("ryw/%d", mi)
			val := fmt.Sprintf("%d-%d", round, mi)
			put, err := m.Put(ctx, key, val)
			require.NoError(t, err)
			got, err := m.Get(ctx, key, clientv3.WithSerializable())
			require.NoError(t, err)
			require.GreaterOrEqual(t, got.Header.Revision, put.Header.Revision, "member %d, round %d: a serializable read after a put through it", mi, round)
			require.Len(t, got.Kvs, 1, "member %d, round %d", mi, round)
			require.Equal(t, val, string(got.Kvs[0].Value), "member %d, round %d", mi, round)

			del, err := m.Txn(ctx).Then(clientv3.OpDelete(key), clientv3.OpPut(key+"/txn", val)).Commit()
			require.NoError(t, err)
			got, err = m.Get(ctx, "ryw/", clientv3.WithPrefix(), clientv3.WithSerializable())
			require.NoError(t, err)
			require.GreaterOrEqual(t, got.Header.Revision, del.Header.Revision, "member %d, round %d: after a txn through it", mi, round)
			keys := map[string]string{}
			for _, kv := range got.Kvs {
				keys[string(kv.Key)] = string(kv.Value)
			}
			require.NotContains(t, keys, key, "member %d, round %d: deleted by the txn", mi, round)
			require.Equal(t, val, keys[key+"/txn"], "member %d, round %d", mi, round)
		}
	}
}
