package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// b64 is a key or value as etcd's JSON gateway takes and gives it.
func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// shape is the set of a JSON value's paths to its leaves ("header.revision",
// "kvs[].key"): what a client of the gateway reads, without the values.
func shape(t *testing.T, raw []byte) []string {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal(raw, &v), "%s", raw)
	set := map[string]bool{}
	var walk func(v any, at string)
	walk = func(v any, at string) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				p := k
				if at != "" {
					p = at + "." + k
				}
				walk(e, p)
			}
		case []any:
			for _, e := range x {
				walk(e, at+"[]")
			}
		default:
			set[at] = true
		}
	}
	walk(v, "")
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

var header = []string{"header.cluster_id", "header.member_id", "header.raft_term", "header.revision"}

func withHeader(paths ...string) []string {
	out := append(slices.Clone(header), paths...)
	slices.Sort(out)
	return out
}

// gw posts body to the gateway at ep and returns the status and answer.
func gw(t *testing.T, ep, path, body string) (int, []byte) {
	t.Helper()
	code, b, err := call("POST", "http://"+ep+path, body)
	require.NoError(t, err, "POST %s", path)
	return code, b
}

// etcd's JSON gateway with curl's semantics (HTTP/1.1 POSTs of JSON) on
// the etcd API's port: put, range, txn, deleterange, compaction, a watch
// POST streaming its responses, member list and status; the answers'
// shapes are etcd's gateway's (EDICTKV_E2E_REFERENCE runs this test
// against etcd v3.6.8 unchanged). The same port answers /health,
// /version and /metrics as etcd's client URL does.
func TestGatewayCurl(t *testing.T) {
	tg := newKVTarget(t)
	ep := tg.eps[1]

	// A watch from before the writes, open while they happen.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	start := tg.rev(ctx) + 1
	req, err := http.NewRequestWithContext(ctx, "POST", "http://"+tg.eps[2]+"/v3/watch",
		strings.NewReader(fmt.Sprintf(`{"create_request":{"key":%q,"range_end":%q,"start_revision":"%d","prev_kv":true}}`, b64("gw/"), b64("gw0"), start)))
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	watch := bufio.NewScanner(resp.Body)
	watch.Buffer(nil, 1<<20)

	code, b := gw(t, ep, "/v3/kv/put", fmt.Sprintf(`{"key":%q,"value":%q}`, b64("gw/a"), b64("1")))
	require.Equal(t, 200, code, "%s", b)
	assert.Equal(t, header, shape(t, b))
	var put struct {
		Header struct {
			Revision string `json:"revision"`
		} `json:"header"`
	}
	require.NoError(t, json.Unmarshal(b, &put))
	assert.Equal(t, fmt.Sprint(start), put.Header.Revision, "int64s are strings")

	code, b = gw(t, ep, "/v3/kv/put", fmt.Sprintf(`{"key":%q,"value":%q,"prev_kv":true}`, b64("gw/a"), b64("2")))
	require.Equal(t, 200, code, "%s", b)
	assert.Equal(t, withHeader("prev_kv.create_revision", "prev_kv.key", "prev_kv.mod_revision", "prev_kv.value", "prev_kv.version"), shape(t, b))

	code, b = gw(t, ep, "/v3/kv/range", fmt.Sprintf(`{"key":%q,"range_end":%q}`, b64("gw/"), b64("gw0")))
	require.Equal(t, 200, code, "%s", b)
	assert.Equal(t, withHeader("count", "kvs[].create_revision", "kvs[].key", "kvs[].mod_revision", "kvs[].value", "kvs[].version"), shape(t, b))
	var rng struct {
		Kvs []struct {
			Key, Value []byte
		} `json:"kvs"`
		Count string `json:"count"`
	}
	require.NoError(t, json.Unmarshal(b, &rng))
	require.Len(t, rng.Kvs, 1)
	assert.Equal(t, "gw/a", string(rng.Kvs[0].Key))
	assert.Equal(t, "2", string(rng.Kvs[0].Value))
	assert.Equal(t, "1", rng.Count)
	// /v3beta/ is /v3/ (Patroni's older clients).
	code, b = gw(t, ep, "/v3beta/kv/range", fmt.Sprintf(`{"key":%q,"count_only":true}`, b64("gw/a")))
	require.Equal(t, 200, code, "%s", b)
	assert.Equal(t, withHeader("count"), shape(t, b))

	// A compare-and-swap as etcd3gw writes it, then one that fails.
	txn := func(want string) (int, []byte) {
		return gw(t, ep, "/v3/kv/txn", fmt.Sprintf(`{"compare":[{"key":%q,"result":"EQUAL","target":"VALUE","value":%q}],`+
			`"success":[{"request_put":{"key":%q,"value":%q}}],"failure":[{"request_range":{"key":%q}}]}`,
			b64("gw/a"), b64(want), b64("gw/b"), b64("x"), b64("gw/a")))
	}
	code, b = txn("2")
	require.Equal(t, 200, code, "%s", b)
	assert.Equal(t, withHeader("responses[].response_put.header.revision", "succeeded"), shape(t, b))
	code, b = txn("nope")
	require.Equal(t, 200, code, "%s", b)
	assert.Equal(t, withHeader("responses[].response_range.count", "responses[].response_range.header.revision",
		"responses[].response_range.kvs[].create_revision", "responses[].response_range.kvs[].key",
		"responses[].response_range.kvs[].mod_revision", "responses[].response_range.kvs[].value",
		"responses[].response_range.kvs[].version"), shape(t, b), "succeeded false is left out")

	code, b = gw(t, ep, "/v3/kv/deleterange", fmt.Sprintf(`{"key":%q,"prev_kv":true}`, b64("gw/b")))
	require.Equal(t, 200, code, "%s", b)
	assert.Equal(t, withHeader("deleted", "prev_kvs[].create_revision", "prev_kvs[].key", "prev_kvs[].mod_revision",
		"prev_kvs[].value", "prev_kvs[].version"), shape(t, b))

	// The watch saw each change, a response each, then the deletion.
	type event struct {
		Type string `json:"type"`
		Kv   struct {
			Key, Value []byte
		} `json:"kv"`
		PrevKv *struct {
			Value []byte
		} `json:"prev_kv"`
	}
	var lines [][]byte
	var events []string
	for len(events) < 4 && watch.Scan() {
		line := bytes.Clone(watch.Bytes())
		lines = append(lines, line)
		var r struct {
			Result struct {
				Events []event `json:"events"`
			} `json:"result"`
		}
		require.NoError(t, json.Unmarshal(line, &r), "%s", line)
		for _, e := range r.Result.Events {
			s := fmt.Sprintf("%s %s=%s", e.Type, e.Kv.Key, e.Kv.Value)
			if e.PrevKv != nil {
				s += " was " + string(e.PrevKv.Value)
			}
			events = append(events, s)
		}
	}
	require.NoError(t, watch.Err())
	assert.Equal(t, []string{" gw/a=1", " gw/a=2 was 1", " gw/b=x", "DELETE gw/b= was x"}, events, "a PUT's type, 0, is left out")
	require.GreaterOrEqual(t, len(lines), 5)
	assert.Equal(t, prefixed("result.", withHeader(), "result.created"), shape(t, lines[0]), "the first line: created, watch_id 0 left out")
	assert.Equal(t, prefixed("result.", withHeader("events[].kv.create_revision", "events[].kv.key",
		"events[].kv.mod_revision", "events[].kv.value", "events[].kv.version"), "result.events[].prev_kv.create_revision",
		"result.events[].prev_kv.key", "result.events[].prev_kv.mod_revision", "result.events[].prev_kv.value",
		"result.events[].prev_kv.version"), shape(t, lines[2]))
	cancel()

	code, b = gw(t, ep, "/v3/cluster/member/list", `{}`)
	require.Equal(t, 200, code, "%s", b)
	for _, p := range []string{"members[].ID", "members[].clientURLs[]", "members[].name", "members[].peerURLs[]"} {
		assert.Contains(t, shape(t, b), p)
	}
	code, b = gw(t, ep, "/v3/maintenance/status", `{}`)
	require.Equal(t, 200, code, "%s", b)
	for _, p := range []string{"version", "dbSize", "leader", "raftIndex", "raftTerm", "raftAppliedIndex", "dbSizeInUse"} {
		assert.Contains(t, shape(t, b), p, "%s", b)
	}

	// Compaction, and etcd's error for a read below it.
	code, b = gw(t, ep, "/v3/kv/compaction", fmt.Sprintf(`{"revision":"%d","physical":true}`, start+1))
	require.Equal(t, 200, code, "%s", b)
	code, b = gw(t, ep, "/v3/kv/range", fmt.Sprintf(`{"key":%q,"revision":"%d"}`, b64("gw/a"), start))
	assert.Equal(t, http.StatusBadRequest, code)
	assert.JSONEq(t, `{"code":11,"message":"etcdserver: mvcc: required revision has been compacted"}`, string(b))
	code, b = gw(t, ep, "/v3/kv/range", `{"key":`)
	assert.Equal(t, http.StatusBadRequest, code, "%s", b)
	assert.Contains(t, string(b), `"code":3`)
	if tg.name == "edictkv" {
		// etcd grants leases; edictkv answers Unimplemented, as the
		// gateway answers any gRPC error.
		code, b = gw(t, ep, "/v3/lease/grant", `{"TTL":"10"}`)
		assert.Equal(t, http.StatusNotImplemented, code)
		assert.Contains(t, string(b), `"code":12`)
	}

	// What etcd's tools read at a client URL.
	for _, ep := range tg.eps {
		code, b, err := call("GET", "http://"+ep+"/health", "")
		require.NoError(t, err)
		assert.Equal(t, 200, code)
		assert.JSONEq(t, `{"health":"true","reason":""}`, string(b))
		code, b, err = call("GET", "http://"+ep+"/readyz", "")
		require.NoError(t, err)
		assert.Equal(t, 200, code, "%s", b)
		assert.Equal(t, "ok\n", string(b))
		code, b, err = call("GET", "http://"+ep+"/version", "")
		require.NoError(t, err)
		assert.Equal(t, 200, code)
		assert.JSONEq(t, `{"etcdserver":"3.6.8","etcdcluster":"3.6.0","storage":"3.6.0"}`, string(b))
		code, b, err = call("GET", "http://"+ep+"/metrics", "")
		require.NoError(t, err)
		assert.Equal(t, 200, code)
		assert.Contains(t, string(b), "\nprocess_resident_memory_bytes ")
	}
}

// prefixed puts prefix before each path, adds more, and sorts.
func prefixed(prefix string, paths []string, more ...string) []string {
	out := slices.Clone(more)
	for _, p := range paths {
		out = append(out, prefix+p)
	}
	slices.Sort(out)
	return out
}

// etcdctl's checks that read the client URL: endpoint health, and check
// datascale, which writes 10,000 keys of 1 KiB and reads
// process_resident_memory_bytes from /metrics on the client URL. Needs
// EDICTKV_ETCDCTL, as TestEtcdctl does.
func TestEtcdctlClientURL(t *testing.T) {
	bin := os.Getenv("EDICTKV_ETCDCTL")
	if bin == "" {
		t.Skip("EDICTKV_ETCDCTL is not set: build etcdctl with bench/etcd/install.sh and point it there")
	}
	tg := newKVTarget(t)
	run := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, append([]string{"--endpoints=" + strings.Join(tg.eps, ","), "--dial-timeout=5s", "--command-timeout=30s"}, args...)...)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "etcdctl %s:\n%s", strings.Join(args, " "), out)
		return string(out)
	}
	out := run("endpoint", "health", "--cluster")
	assert.Equal(t, 3, strings.Count(out, "is healthy"), "%s", out)
	out = run("check", "datascale", "--load=s")
	t.Logf("etcdctl check datascale against %s:\n%s", tg.name, out)
	assert.Contains(t, out, "PASS: Approximate system memory used", "%s", out)
	assert.NotContains(t, out, "FAIL")
}
