package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ctlGet is `etcdctl get -w json`'s output: etcd's RangeResponse as
// encoding/json writes it (keys and values in base64).
type ctlGet struct {
	Header struct {
		Revision int64 `json:"revision"`
	} `json:"header"`
	Kvs []struct {
		Key            []byte `json:"key"`
		Value          []byte `json:"value"`
		CreateRevision int64  `json:"create_revision"`
		ModRevision    int64  `json:"mod_revision"`
		Version        int64  `json:"version"`
	} `json:"kvs"`
	Count int64 `json:"count"`
	More  bool  `json:"more"`
}

func (g ctlGet) kvs() []mkv {
	out := []mkv{}
	for _, kv := range g.Kvs {
		out = append(out, mkv{key: string(kv.Key), value: string(kv.Value), create: kv.CreateRevision, mod: kv.ModRevision, version: kv.Version})
	}
	return out
}

// etcdctl's history commands against the cluster: each write's revision
// (put -w json), get --rev=N at every revision with the keys, values,
// create and mod revisions and versions etcd defines (a fresh cluster's
// first write is revision 2, a delete ends a generation), through every
// member with --consistency=s too; compaction and its errors, and
// etcd's errors for a read below the compaction and above the current
// revision. It needs EDICTKV_ETCDCTL, as TestEtcdctl does.
func TestHistoryEtcdctl(t *testing.T) {
	bin := os.Getenv("EDICTKV_ETCDCTL")
	if bin == "" {
		t.Skip("EDICTKV_ETCDCTL is not set: build etcdctl with bench/etcd/install.sh and point it there")
	}
	tg := newKVTarget(t)
	// run returns etcdctl's standard output; an error carries its
	// standard error.
	run := func(eps []string, stdin string, args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, append([]string{"--endpoints=" + strings.Join(eps, ","), "--dial-timeout=5s", "--command-timeout=20s"}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			return stdout.String(), fmt.Errorf("%w: %s", err, stderr.String())
		}
		return stdout.String(), nil
	}
	ctl := func(args ...string) string {
		t.Helper()
		out, err := run(tg.eps, "", args...)
		require.NoError(t, err, "etcdctl %s:\n%s", strings.Join(args, " "), out)
		return out
	}
	// ctlErr runs a command that must fail with etcd's error want.
	ctlErr := func(want string, args ...string) {
		t.Helper()
		out, err := run(tg.eps, "", args...)
		require.Error(t, err, "etcdctl %s must fail; it printed:\n%s", strings.Join(args, " "), out)
		assert.Contains(t, err.Error(), want, "etcdctl %s", strings.Join(args, " "))
	}
	getJSON := func(eps []string, args ...string) (ctlGet, error) {
		var g ctlGet
		out, err := run(eps, "", append([]string{"get", "-w", "json"}, args...)...)
		if err != nil {
			return g, fmt.Errorf("etcdctl get %s: %w: %s", strings.Join(args, " "), err, out)
		}
		if err := json.Unmarshal([]byte(out), &g); err != nil {
			return g, fmt.Errorf("etcdctl get %s: %w: %s", strings.Join(args, " "), err, out)
		}
		return g, nil
	}

	m := newKeyspace(1)
	// write runs a write with -w json and checks the header's revision.
	write := func(stdin string, args []string, ops ...mop) {
		t.Helper()
		out, err := run(tg.eps, stdin, append(args, "-w", "json")...)
		require.NoError(t, err, "etcdctl %s:\n%s", strings.Join(args, " "), out)
		var r struct {
			Header struct {
				Revision int64 `json:"revision"`
			} `json:"header"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &r), "etcdctl %s: %s", strings.Join(args, " "), out)
		assert.Equal(t, m.apply(ops...), r.Header.Revision, "etcdctl %s: the header's revision", strings.Join(args, " "))
	}
	put := func(k, v string) { t.Helper(); write("", []string{"put", k, v}, mput(k, v)) }
	put("h/a", "1") // 2: a fresh cluster's first write
	require.Equal(t, int64(2), m.rev)
	put("h/b", "1")                                                                            // 3
	put("h/a", "2")                                                                            // 4
	assert.Equal(t, "1\n", ctl("del", "h/b"))                                                  // 5: h/b's tombstone
	m.apply(mdel("h/b"))                                                                       //
	write("", []string{"del", "h/b"}, mdel("h/b"))                                             // deletes nothing: no revision
	put("h/b", "2")                                                                            // 6: h/b again, version 1
	put("h/c", "1")                                                                            // 7
	write("\nput h/a 3\nput h/c 2\n\n\n", []string{"txn"}, mput("h/a", "3"), mput("h/c", "2")) // 8: one revision
	put("h/d", "1")                                                                            // 9
	write("", []string{"del", "--range", "h/c", "h/d"}, mdelRange("h/c", "h/d"))               // 10: [h/c, h/d)
	put("h/a", "4")                                                                            // 11
	require.Equal(t, int64(11), m.rev)
	require.Equal(t, []mkv{{"h/a", "4", 2, 11, 4}, {"h/b", "2", 6, 6, 1}, {"h/d", "1", 9, 9, 1}}, m.get(m.rev, "h/"), "the model itself, by hand")

	// check reads the whole history through eps: compacted below
	// compacted, the model's keyspace from it on.
	check := func(eps []string, consistency string, compacted int64) {
		t.Helper()
		for rev := int64(1); rev <= m.rev; rev++ {
			args := []string{"--prefix", "h/", fmt.Sprintf("--rev=%d", rev), "--consistency=" + consistency}
			if rev < compacted {
				ctlErr("required revision has been compacted", append([]string{"get"}, args...)...)
				continue
			}
			g, err := getJSON(eps, args...)
			require.NoError(t, err)
			want := m.get(rev, "h/")
			assert.Equal(t, orEmpty(want), g.kvs(), "the keyspace at %d", rev)
			assert.Equal(t, int64(len(want)), g.Count, "count at %d", rev)
			assert.False(t, g.More)
			assert.Equal(t, m.rev, g.Header.Revision, "a read at %d: the header has the current revision", rev)
		}
		ctlErr("required revision is a future revision", "get", "h/a", fmt.Sprintf("--rev=%d", m.rev+1), "--consistency="+consistency)
	}
	check(tg.eps, "l", 0)
	// The plain output at a past revision, and of a key deleted then.
	assert.Equal(t, "h/a\n1\n", ctl("get", "h/a", "--rev=3"))
	assert.Equal(t, "", ctl("get", "h/b", "--rev=5"))
	assert.Equal(t, "h/b\n2\n", ctl("get", "h/b", "--rev=6"))
	assert.Equal(t, "h/a\n4\nh/b\n2\nh/d\n1\n", ctl("get", "--prefix", "h/"))

	// Each member, serializable, once it has applied every write.
	waitApplied := func(ep string, compacted int64) {
		t.Helper()
		waitFor(t, "member "+ep+" applying revision "+fmt.Sprint(m.rev), 60*time.Second, func() error {
			g, err := getJSON([]string{ep}, "h/a", "--consistency=s")
			if err != nil {
				return err
			}
			if g.Header.Revision < m.rev {
				return fmt.Errorf("at revision %d", g.Header.Revision)
			}
			if compacted > 1 {
				if out, err := run([]string{ep}, "", "get", "h/a", "--consistency=s", fmt.Sprintf("--rev=%d", compacted-1)); err == nil {
					return fmt.Errorf("a read below the compaction at %d answered: %s", compacted, out)
				}
			}
			return nil
		})
	}
	for _, ep := range tg.eps {
		waitApplied(ep, 0)
		check([]string{ep}, "s", 0)
	}

	// Compaction: at 4, then again and below (etcd's error), then
	// physical at 5, h/b's tombstone: h/b's generation from 6 is kept.
	assert.Equal(t, "compacted revision 4\n", ctl("compaction", "4"))
	check(tg.eps, "l", 4)
	ctlErr("required revision has been compacted", "compaction", "4")
	ctlErr("required revision has been compacted", "compaction", "3")
	ctlErr("required revision is a future revision", "compaction", fmt.Sprint(m.rev+1))
	assert.Equal(t, "compacted revision 5\n", ctl("compaction", "--physical", "5"))
	check(tg.eps, "l", 5)
	for _, ep := range tg.eps {
		waitApplied(ep, 5)
		check([]string{ep}, "s", 5)
	}
	assert.Equal(t, "", ctl("get", "h/b", "--rev=5"), "h/b at its tombstone, the compaction revision")
	g, err := getJSON(tg.eps, "h/b", "--rev=6")
	require.NoError(t, err)
	assert.Equal(t, []mkv{{"h/b", "2", 6, 6, 1}}, g.kvs())

	// Writes go on after the compactions, which made no revision.
	put("h/b", "3")
	require.Equal(t, int64(12), m.rev)
	assert.Equal(t, "compacted revision 12\n", ctl("compaction", "--physical", "12"))
	check(tg.eps, "l", 12)
	g, err = getJSON(tg.eps, "--prefix", "h/")
	require.NoError(t, err)
	assert.Equal(t, []mkv{{"h/a", "4", 2, 11, 4}, {"h/b", "3", 6, 12, 2}, {"h/d", "1", 9, 9, 1}}, g.kvs())
}
