package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A member holding a million keys restarts: the cluster is loaded by
// concurrent clients with txns of 128 puts of 100-byte values, a sample
// is overwritten, the history is compacted at the load's revision; one
// follower is stopped (SIGTERM, and in a second round SIGKILL), more keys
// are overwritten and some deleted while it is down, and it is started
// again. It must become ready and reach the leader's revision, and then
// answer, serializable and alone, every sampled key as last written, the
// keyspace at two past revisions (the load's and its stop's), and
// "compacted" below the compaction. The figures (load time and rate,
// compaction, restart to ready and to the leader's revision, each
// process's memory, the data directories' size) are logged.
//
// It is long: it runs only with EDICTKV_E2E_BIG=1 (EDICTKV_E2E_BIG_KEYS
// sets the number of keys, 1,000,000 by default), with a -timeout of an
// hour or more; docs/edictkv.md says how.
func TestHistoryRestartBig(t *testing.T) {
	if os.Getenv("EDICTKV_E2E_BIG") != "1" {
		t.Skip("EDICTKV_E2E_BIG is not 1: the million-key restart is long (see docs/edictkv.md, Testing)")
	}
	keys := 1_000_000
	if s := os.Getenv("EDICTKV_E2E_BIG_KEYS"); s != "" {
		n, err := strconv.Atoi(s)
		require.NoError(t, err, "EDICTKV_E2E_BIG_KEYS")
		keys = n
	}
	const batch, workers, sampleEvery = 128, 12, 997
	ec := newEtcdCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Hour)
	defer cancel()
	key := func(i int) string { return fmt.Sprintf("big/%08d", i) }
	// value is key i's value of generation gen: 100 bytes.
	value := func(i, gen int) string {
		s := fmt.Sprintf("%08d/%d/", i, gen)
		return s + strings.Repeat(string(rune('a'+i%26)), 100-len(s))
	}
	// Each process's own client; a write uses those of the live ones (a
	// client of a stopped process would wait for it).
	clients := map[*proc]*clientv3.Client{}
	for _, p := range ec.procs {
		clients[p] = ec.client(ec.grpc[p.id])
	}
	live := func() []*clientv3.Client {
		var out []*clientv3.Client
		for _, p := range ec.procs {
			if p.cmd != nil {
				out = append(out, clients[p])
			}
		}
		return out
	}
	putRetry(t, ec.cli, "big-warmup", "x")

	// write puts the keys idx of gen in txns of batch keys by the workers;
	// a txn refused with nothing written is tried again.
	write := func(what string, idx []int, gen int) time.Duration {
		clis := live()
		start := time.Now()
		next := atomic.Int64{}
		var done atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		var lastLog atomic.Int64
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					b := int(next.Add(1)) - 1
					if b*batch >= len(idx) {
						return
					}
					var ops []clientv3.Op
					for _, i := range idx[b*batch : min(len(idx), (b+1)*batch)] {
						ops = append(ops, clientv3.OpPut(key(i), value(i, gen)))
					}
					for {
						_, err := clis[w%len(clis)].Txn(ctx).Then(ops...).Commit()
						if err == nil {
							break
						}
						if !isErr(err, rpctypes.ErrNoLeader) && !isErr(err, rpctypes.ErrLeaderChanged) {
							errs <- fmt.Errorf("%s: batch %d: %w", what, b, err)
							return
						}
						time.Sleep(100 * time.Millisecond)
					}
					n := done.Add(int64(len(ops)))
					if tenth, old := n*10/int64(len(idx)), lastLog.Load(); tenth > old && lastLog.CompareAndSwap(old, tenth) {
						t.Logf("%s: %d of %d keys after %v", what, n, len(idx), time.Since(start).Round(time.Second))
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		return time.Since(start)
	}
	all := make([]int, keys)
	for i := range all {
		all[i] = i
	}
	loadTime := write("load", all, 0)
	t.Logf("loaded %d keys of 100 B in %v: %.0f keys/s", keys, loadTime.Round(time.Millisecond), float64(keys)/loadTime.Seconds())
	loaded := revNow(t, ctx, ec.cli)

	// now[i] is key i as last written: its generation (-1 once deleted)
	// and version.
	type kstate struct{ gen, version int }
	now := make([]kstate, keys)
	for i := range now {
		now[i] = kstate{0, 1}
	}
	var sample1, sample2, deleted []int
	for i := 0; i < keys; i += sampleEvery {
		sample1 = append(sample1, i)
		if i%(2*sampleEvery) == 0 && i+1 < keys {
			sample2 = append(sample2, i+1)
		}
		if i%(3*sampleEvery) == 0 && i+2 < keys {
			deleted = append(deleted, i+2)
		}
	}
	write("overwrite", sample1, 1)
	for _, i := range sample1 {
		now[i] = kstate{1, 2}
	}
	// The keyspace as of the load stays readable: the compaction is at
	// its revision.
	compactStart := time.Now()
	_, err := ec.cli.Compact(ctx, loaded, clientv3.WithCompactPhysical())
	require.NoError(t, err)
	t.Logf("physical compaction at revision %d of %d keys: %v", loaded, keys, time.Since(compactStart).Round(time.Millisecond))

	leader := ec.leader()
	f := ec.other(leader)
	report := func(when string) {
		for _, p := range ec.procs {
			if p.cmd == nil {
				continue
			}
			rss, hwm := procMemory(p.cmd.Process.Pid)
			t.Logf("%s: node %d (leader %v): RSS %s, peak RSS %s; data dir %s (state.db %s, edictkv.db %s)", when, p.id, p == leader,
				mib(rss), mib(hwm), mib(dirSize(p.dir)), mib(fileSize(filepath.Join(p.dir, "state.db"))), mib(fileSize(filepath.Join(p.dir, "edictkv.db"))))
		}
	}
	report("after the load")
	fc := ec.client(ec.grpc[f.id])
	serial := func(k string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
		ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		return fc.Get(ctx, k, append(opts, clientv3.WithSerializable())...)
	}
	check := func(i int, rev int64, want kstate) {
		t.Helper()
		var opts []clientv3.OpOption
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		r, err := serial(key(i), opts...)
		require.NoError(t, err)
		if want.gen < 0 {
			assert.Empty(t, r.Kvs, "%s at %d: deleted", key(i), rev)
			return
		}
		if assert.Len(t, r.Kvs, 1, "%s at %d", key(i), rev) {
			assert.Equal(t, value(i, want.gen), string(r.Kvs[0].Value), "%s at %d", key(i), rev)
			assert.Equal(t, int64(want.version), r.Kvs[0].Version, "%s at %d: version", key(i), rev)
		}
	}
	countAt := func(rev int64) int64 {
		t.Helper()
		opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithCountOnly()}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		r, err := serial("big/", opts...)
		require.NoError(t, err)
		return r.Count
	}
	count := func(ks []kstate) int64 {
		var n int64
		for _, k := range ks {
			if k.gen >= 0 {
				n++
			}
		}
		return n
	}

	// Two rounds: f stopped (SIGTERM, then SIGKILL: a crash, its state
	// reopened at its last committed batch), keys overwritten and deleted
	// while it is down, f started again. Then f alone, serializable:
	// every sample as last written and as it was at the stop, the load's
	// keyspace, nothing below the compaction.
	sampled := append(append(append([]int{0, keys - 1}, sample1...), sample2...), deleted...)
	for round, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		beforeStop := revNow(t, ctx, ec.cli)
		atStop := slices.Clone(now)
		ec.mustStop(f, sig)
		g := 2 + round
		write(fmt.Sprintf("round %d: overwrite while a follower is down", round), sample2, g)
		for _, i := range sample2 {
			now[i] = kstate{g, now[i].version + 1}
		}
		if round == 0 {
			for i := 0; i < len(deleted); i += batch {
				var ops []clientv3.Op
				for _, k := range deleted[i:min(len(deleted), i+batch)] {
					ops = append(ops, clientv3.OpDelete(key(k)))
					now[k] = kstate{-1, 0}
				}
				_, err := ec.cli.Txn(ctx).Then(ops...).Commit()
				require.NoError(t, err)
			}
		}
		target := revNow(t, ctx, ec.cli)

		restart := time.Now()
		ec.start(f)
		waitFor(t, fmt.Sprintf("node %d ready after its restart", f.id), 30*time.Minute, func() error {
			code, b, err := call("GET", "http://"+f.api+"/readyz", "")
			if err == nil && code != 200 {
				err = fmt.Errorf("%d %s", code, b)
			}
			return err
		})
		toReady := time.Since(restart)
		// A client of its own: the earlier one's connection waits out a
		// reconnection backoff.
		fc = ec.client(ec.grpc[f.id])
		waitFor(t, fmt.Sprintf("node %d at the leader's revision %d", f.id, target), 30*time.Minute, func() error {
			r, err := serial("big-warmup")
			if err != nil {
				return err
			}
			if r.Header.Revision < target {
				return fmt.Errorf("at revision %d", r.Header.Revision)
			}
			return nil
		})
		toCaughtUp := time.Since(restart)
		t.Logf("round %d: node %d stopped by %v, restarted holding %d keys: ready after %v, at the leader's revision %d after %v",
			round, f.id, sig, keys, toReady.Round(time.Millisecond), target, toCaughtUp.Round(time.Millisecond))
		report(fmt.Sprintf("round %d, after the restart", round))

		for _, i := range sampled {
			check(i, 0, now[i])
			check(i, loaded, kstate{0, 1})
			check(i, beforeStop, atStop[i])
		}
		assert.Equal(t, int64(keys), countAt(loaded), "keys at the load's revision %d", loaded)
		assert.Equal(t, count(atStop), countAt(beforeStop), "keys at the stop's revision %d", beforeStop)
		assert.Equal(t, count(now), countAt(0), "keys now")
		_, err := serial(key(0), clientv3.WithRev(loaded-1))
		assert.True(t, isErr(err, rpctypes.ErrCompacted), "a read below the compaction at %d: %v", loaded, err)
	}
}

func revNow(t *testing.T, ctx context.Context, cli *clientv3.Client) int64 {
	t.Helper()
	r, err := cli.Get(ctx, "big-warmup")
	require.NoError(t, err)
	return r.Header.Revision
}

// procMemory is a process's resident and peak resident memory, from
// /proc (0 where it cannot be read).
func procMemory(pid int) (rss, hwm int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			rss = kb << 10
		case "VmHWM:":
			hwm = kb << 10
		}
	}
	return rss, hwm
}

func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if info, err := d.Info(); err == nil && info.Mode().IsRegular() {
			n += info.Size()
		}
		return nil
	})
	return n
}

func fileSize(path string) int64 {
	info, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) || err != nil {
		return 0
	}
	return info.Size()
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
