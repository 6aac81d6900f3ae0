package workload

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/edictlog/edictlog/jepsen/history"
)

// SetPrefix holds the set workload's elements: one key per element.
const SetPrefix = "s/"

// Set is the set workload: clients add unique elements (a put of
// SetPrefix+element); at the end, every node's final read lists the
// elements it holds (through its etcd API, a serializable range), and the
// checker compares them with the acknowledged adds.
type Set struct {
	Config
}

// Run adds elements until ctx ends.
func (w *Set) Run(ctx context.Context, rec *history.Recorder) {
	w.defaults()
	a := newAPI(w.Timeout)
	var next atomic.Int64
	var wg sync.WaitGroup
	for c := range w.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			process := c
			for ctx.Err() == nil {
				t, ok := bound(c, w.Targets())
				if !ok {
					sleep(ctx, 50*time.Millisecond)
					continue
				}
				v := next.Add(1)
				op := history.Op{Process: process, Type: history.Invoke, F: history.FAdd, Value: history.Int(v), Node: t.ID}
				rec.Add(op)
				out := a.write(context.WithoutCancel(ctx), t.Addr, SetPrefix+strconv.FormatInt(v, 10), v, nil)
				op.Type, op.Error = out.typ, out.err
				rec.Add(op)
				if out.typ == history.Info {
					process += w.Clients
				}
				if out.unreachable {
					sleep(ctx, unreachablePause)
				}
			}
		}()
	}
	wg.Wait()
}

// GRPCTarget is a node's etcd API address, for the final reads.
type GRPCTarget struct {
	ID   int
	Addr string
}

// FinalReads records, for each node, every element it holds: a
// serializable (local) range over SetPrefix, retried until ctx ends if the
// node does not answer.
func (w *Set) FinalReads(ctx context.Context, rec *history.Recorder, nodes []GRPCTarget, process int) error {
	for _, n := range nodes {
		op := history.Op{Process: process, Type: history.Invoke, F: history.FFinalRead, Node: n.ID, Level: "stale"}
		rec.Add(op)
		vals, err := readSet(ctx, n.Addr)
		if err != nil {
			op.Type, op.Error = history.Fail, err.Error()
		} else {
			op.Type, op.Values = history.OK, vals
		}
		rec.Add(op)
	}
	return nil
}

func readSet(ctx context.Context, addr string) ([]int64, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	var last error
	for ctx.Err() == nil {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		resp, err := cli.Get(rctx, SetPrefix, clientv3.WithPrefix(), clientv3.WithSerializable())
		cancel()
		if err == nil {
			out := make([]int64, 0, len(resp.Kvs))
			for _, kv := range resp.Kvs {
				v, err := strconv.ParseInt(strings.TrimPrefix(string(kv.Key), SetPrefix), 10, 64)
				if err != nil {
					return nil, fmt.Errorf("set element key %q: %w", kv.Key, err)
				}
				out = append(out, v)
			}
			slices.Sort(out)
			return out, nil
		}
		last = err
		sleep(ctx, 200*time.Millisecond)
	}
	return nil, fmt.Errorf("final read at %s: %w", addr, last)
}
