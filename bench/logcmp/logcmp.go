// Package logcmp measures committed writes per second and write latency of
// edictlog.Node and of hashicorp/raft with raft-boltdb, on the same
// machine in one run: three nodes in one process each, fsync on, TCP over
// loopback, 256-byte values, writers calling the leader's Apply and
// waiting for it, hashicorp/raft in its default configuration.
// It lives in the bench module so the library does not depend on raft.
package logcmp

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/fsm/kvfsm"
	"github.com/edictlog/edictlog/storage"
	"github.com/edictlog/edictlog/transport"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

// Result is one measurement.
type Result struct {
	System   string
	Writers  int
	Writes   int
	Elapsed  time.Duration
	P50, P99 time.Duration
}

// PerSecond is committed writes per second.
func (r Result) PerSecond() float64 { return float64(r.Writes) / r.Elapsed.Seconds() }

// ValueSize is the size of each write's value in bytes.
var ValueSize = 256

// cluster is what both systems offer the load generator.
type cluster interface {
	apply(ctx context.Context, cmd []byte) error
	close()
}

// Run measures one system with the given writers for the given time.
func Run(system string, dir string, writers int, d time.Duration) (Result, error) {
	var c cluster
	var err error
	switch system {
	case "edictlog":
		c, err = startEdictlog(dir, false)
	case "edictlog-bolt":
		c, err = startEdictlog(dir, true)
	case "hashicorp-raft":
		c, err = startRaft(dir)
	default:
		return Result{}, fmt.Errorf("unknown system %q", system)
	}
	if err != nil {
		return Result{}, err
	}
	defer c.close()
	return load(system, c, writers, d)
}

func load(system string, c cluster, writers int, d time.Duration) (Result, error) {
	value := string(make([]byte, ValueSize))
	var next atomic.Int64
	var firstErr atomic.Value
	lat := make([][]time.Duration, writers)
	deadline := time.Now().Add(d)
	start := time.Now()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				i := next.Add(1)
				cmd, _ := kvfsm.EncodeCommand(kvfsm.Command{Put: &kvfsm.Put{Key: fmt.Sprintf("k%d", i%1024), Value: value}})
				t0 := time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				err := c.apply(ctx, cmd)
				cancel()
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				lat[w] = append(lat[w], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if e := firstErr.Load(); e != nil {
		return Result{}, fmt.Errorf("%s: %w", system, e.(error))
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	if len(all) == 0 {
		return Result{}, fmt.Errorf("%s: no write completed", system)
	}
	return Result{System: system, Writers: writers, Writes: len(all), Elapsed: elapsed,
		P50: all[len(all)/2], P99: all[len(all)*99/100]}, nil
}

// edictlog: three edictlog.Nodes with WAL stores (bbolt stores for
// "edictlog-bolt"), TCP, the KV state machine.
type edictCluster struct {
	nodes  []*edictlog.Node
	leader *edictlog.Node
	closer []func()
}

func startEdictlog(dir string, bolt bool) (*edictCluster, error) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	c := &edictCluster{}
	peers := map[edict.ProcessID]string{}
	nets := map[edict.ProcessID]*transport.TCP{}
	for id := edict.ProcessID(1); id <= 3; id++ {
		t, err := transport.NewTCP(transport.TCPConfig{ID: id, ClusterID: "logcmp", BindAddr: "127.0.0.1:0", Logger: quiet})
		if err != nil {
			return nil, err
		}
		nets[id], peers[id] = t, t.LocalAddr()
		c.closer = append(c.closer, func() { t.Close() })
	}
	for id := edict.ProcessID(1); id <= 3; id++ {
		var store interface {
			edictlog.Store
			Close() error
		}
		var err error
		if bolt {
			store, err = storage.OpenBolt(filepath.Join(dir, fmt.Sprintf("edict%d.db", id)), nil)
		} else {
			store, err = storage.OpenWAL(filepath.Join(dir, fmt.Sprintf("edict%d.wal", id)), nil)
		}
		if err != nil {
			return nil, err
		}
		snaps, err := storage.NewFileSnapshotStore(filepath.Join(dir, fmt.Sprintf("edictsnap%d", id)), 2)
		if err != nil {
			return nil, err
		}
		n, err := edictlog.Start(context.Background(), edictlog.Config{ID: id, Peers: peers, Store: store, Snapshots: snaps, Transport: nets[id], FSM: kvfsm.NewKV(), Logger: quiet})
		if err != nil {
			return nil, err
		}
		c.nodes = append(c.nodes, n)
		c.closer = append([]func(){func() { _ = n.Shutdown(context.Background()); store.Close() }}, c.closer...)
	}
	for deadline := time.Now().Add(10 * time.Second); c.leader == nil; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			c.close()
			return nil, fmt.Errorf("edictlog: no leader within 10s")
		}
		for _, n := range c.nodes {
			if n.Status().IsLeader {
				c.leader = n
			}
		}
	}
	return c, nil
}

func (c *edictCluster) apply(ctx context.Context, cmd []byte) error {
	_, err := c.leader.Apply(ctx, cmd)
	return err
}

func (c *edictCluster) close() {
	for _, f := range c.closer {
		f()
	}
}

// hashicorp/raft: three nodes with raft-boltdb and TCP transports, the
// default configuration, an FSM that stores the command.
type raftCluster struct {
	rafts  []*raft.Raft
	leader *raft.Raft
	closer []func()
}

type raftFSM struct {
	mu   sync.Mutex
	last []byte
}

func (f *raftFSM) Apply(l *raft.Log) any {
	f.mu.Lock()
	f.last = l.Data
	f.mu.Unlock()
	return nil
}
func (f *raftFSM) Snapshot() (raft.FSMSnapshot, error) { return raftSnap{}, nil }
func (f *raftFSM) Restore(r io.ReadCloser) error       { return r.Close() }

type raftSnap struct{}

func (raftSnap) Persist(s raft.SnapshotSink) error { return s.Close() }
func (raftSnap) Release()                          {}

func startRaft(dir string) (*raftCluster, error) {
	c := &raftCluster{}
	var servers []raft.Server
	var trans []*raft.NetworkTransport
	for i := 1; i <= 3; i++ {
		t, err := raft.NewTCPTransport("127.0.0.1:0", nil, 3, 10*time.Second, io.Discard)
		if err != nil {
			return nil, err
		}
		trans = append(trans, t)
		servers = append(servers, raft.Server{ID: raft.ServerID(fmt.Sprint(i)), Address: t.LocalAddr()})
		c.closer = append(c.closer, func() { t.Close() })
	}
	for i := 1; i <= 3; i++ {
		store, err := raftboltdb.NewBoltStore(filepath.Join(dir, fmt.Sprintf("raft%d.db", i)))
		if err != nil {
			return nil, err
		}
		snaps, err := raft.NewFileSnapshotStore(filepath.Join(dir, fmt.Sprintf("raftsnap%d", i)), 2, io.Discard)
		if err != nil {
			return nil, err
		}
		cfg := raft.DefaultConfig()
		cfg.LocalID = raft.ServerID(fmt.Sprint(i))
		cfg.LogOutput = io.Discard
		r, err := raft.NewRaft(cfg, &raftFSM{}, store, store, snaps, trans[i-1])
		if err != nil {
			return nil, err
		}
		if i == 1 {
			if err := r.BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil {
				return nil, err
			}
		}
		c.rafts = append(c.rafts, r)
		c.closer = append([]func(){func() { _ = r.Shutdown().Error(); store.Close() }}, c.closer...)
	}
	for deadline := time.Now().Add(20 * time.Second); c.leader == nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			c.close()
			return nil, fmt.Errorf("hashicorp-raft: no leader within 20s")
		}
		for _, r := range c.rafts {
			if r.State() == raft.Leader {
				c.leader = r
			}
		}
	}
	return c, nil
}

func (c *raftCluster) apply(ctx context.Context, cmd []byte) error {
	timeout := 10 * time.Second
	if d, ok := ctx.Deadline(); ok {
		timeout = time.Until(d)
	}
	return c.leader.Apply(cmd, timeout).Error()
}

func (c *raftCluster) close() {
	for _, f := range c.closer {
		f()
	}
}
