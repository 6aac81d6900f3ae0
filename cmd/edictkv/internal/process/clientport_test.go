package process

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/edictlog/edictlog/cmd/edictkv/internal/etcdapi"
	"github.com/edictlog/edictlog/cmd/edictkv/kvjson"
)

// The etcd API's port serves, as etcd's client URL does, gRPC and etcd's
// HTTP endpoints: the JSON gateway over the same services (a write through
// a follower's gateway is forwarded as a gRPC client's is), /health,
// /livez, /readyz, /version and /metrics with the process's resident
// memory; a gateway watch streams. A graceful shutdown with a gateway
// watch and an HTTP API watch open ends both streams and returns cleanly.
func TestClientPort(t *testing.T) {
	c := startCluster(t, 3, func(cfg *Config) { cfg.GRPCAddr = "127.0.0.1:0" })
	leader := c.leader()
	f := c.follower(leader)
	fp := c.procs[f]
	base := "http://" + fp.GRPCAddr()

	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{fp.GRPCAddr()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	require.NoError(t, err)
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var put *clientv3.PutResponse
	eventually(t, "a put through the follower's gRPC API", func() bool {
		put, err = cli.Put(ctx, "a", "1")
		return err == nil
	})

	// The gateway, as curl uses it: etcd's JSON, int64s as strings,
	// bytes in base64.
	a := do(t, "POST", base+"/v3/kv/put", `{"key":"YQ==","value":"Mg=="}`)
	mustStatus(t, a, 200)
	var pr struct {
		Header struct {
			Revision string `json:"revision"`
			MemberID string `json:"member_id"`
		} `json:"header"`
	}
	a.json(t, &pr)
	assert.Equal(t, jsonInt(put.Header.Revision+1), pr.Header.Revision, "%s", a.body)
	a = do(t, "POST", base+"/v3beta/kv/range", `{"key":"YQ=="}`)
	mustStatus(t, a, 200)
	assert.Contains(t, string(a.body), `"value":"Mg=="`)
	assert.Contains(t, string(a.body), `"count":"1"`)
	assert.Equal(t, "*", a.header.Get("Access-Control-Allow-Origin"))
	a = do(t, "POST", base+"/v3/lease/grant", `{"TTL":"5"}`)
	assert.Equal(t, http.StatusNotImplemented, a.status, "%s", a.body)
	assert.Contains(t, string(a.body), `"code":12`)

	// What etcd's tools read at a client URL.
	a = do(t, "GET", base+"/health", "")
	mustStatus(t, a, 200)
	assert.JSONEq(t, `{"health":"true","reason":""}`, string(a.body))
	mustStatus(t, do(t, "GET", base+"/health?serializable=true", ""), 200)
	a = do(t, "GET", base+"/readyz?verbose", "")
	mustStatus(t, a, 200)
	assert.Equal(t, "[+]data_corruption ok\n[+]serializable_read ok\n[+]linearizable_read ok\n[+]non_learner ok\nok\n", string(a.body))
	a = do(t, "GET", base+"/livez", "")
	mustStatus(t, a, 200)
	assert.Equal(t, "ok\n", string(a.body))
	a = do(t, "GET", base+"/version", "")
	mustStatus(t, a, 200)
	assert.JSONEq(t, `{"etcdserver":"`+etcdapi.Version+`","etcdcluster":"3.6.0","storage":"3.6.0"}`, string(a.body))
	a = do(t, "GET", base+"/metrics", "")
	mustStatus(t, a, 200)
	assert.Contains(t, string(a.body), "\nprocess_resident_memory_bytes ")
	assert.Contains(t, string(a.body), "\nedictkv_applied_index ")
	// The HTTP API's own port keeps its endpoints.
	mustStatus(t, do(t, "GET", c.url(f, "/v1/kv/a"), ""), 200)

	// A gateway watch: a POST whose answer streams {"result": ...}.
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	req, err := http.NewRequestWithContext(wctx, "POST", base+"/v3/watch",
		strings.NewReader(`{"create_request":{"key":"YQ==","start_revision":"`+jsonInt(put.Header.Revision)+`"}}`))
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	lines := bufio.NewScanner(resp.Body)
	type result struct {
		Result struct {
			Created bool `json:"created"`
			Events  []struct {
				Kv struct {
					Value       []byte `json:"value"`
					ModRevision string `json:"mod_revision"`
				} `json:"kv"`
			} `json:"events"`
		} `json:"result"`
		Error json.RawMessage `json:"error"`
	}
	var values []string
	for len(values) < 2 && lines.Scan() {
		var r result
		require.NoError(t, json.Unmarshal(lines.Bytes(), &r), "%s", lines.Bytes())
		require.Nil(t, r.Error, "%s", lines.Bytes())
		for _, e := range r.Result.Events {
			values = append(values, string(e.Kv.Value))
		}
	}
	assert.Equal(t, []string{"1", "2"}, values)

	// An HTTP API watch on the same process.
	hreq, err := http.NewRequestWithContext(wctx, "GET", c.url(f, "/v1/watch/a"), nil)
	require.NoError(t, err)
	hresp, err := http.DefaultClient.Do(hreq)
	require.NoError(t, err)
	defer hresp.Body.Close()
	hlines := kvjson.NewWatchDecoder(hresp.Body, 0)
	first, err := hlines.Next()
	require.NoError(t, err)
	assert.True(t, first.Progress)

	// A graceful shutdown ends both streams.
	sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer scancel()
	require.NoError(t, fp.Shutdown(sctx))
	for lines.Scan() {
		var r result
		require.NoError(t, json.Unmarshal(lines.Bytes(), &r), "%s", lines.Bytes())
		if r.Error != nil {
			assert.Contains(t, string(r.Error), "shutting down", "the gateway's last line")
		}
	}
	last, err := hlines.Next()
	require.NoError(t, err)
	require.NotNil(t, last.Error)
	assert.Equal(t, kvjson.CodeShuttingDown, last.Error.Code)
	delete(c.procs, f)
	_ = fp.Close()
}

func jsonInt(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}
