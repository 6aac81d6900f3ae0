package cluster

import (
	"bufio"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The gray failures: a node whose disk is slow, a host whose
// disk another writer saturates, a host too busy to run a node for tens of
// milliseconds at a time. None of them stops a node, cuts a link or loses
// a write; a healthy leader must keep its lease through them and no write
// may fail for them.

// ErrUnsupported says a fault cannot be injected here (the mode, the
// privileges or the kernel do not allow it); the error that wraps it says
// why.
var ErrUnsupported = errors.New("not supported here")

// Fsync is the slow-disk fault of a node's fault hook (process.FsyncJSON;
// not imported, to keep this package free of the server's dependencies):
// every durable batch of the node's log waits a uniform MinMS..MaxMS
// before it is written. The zero Fsync is none.
type Fsync struct {
	MinMS int `json:"min_ms,omitempty"`
	MaxMS int `json:"max_ms,omitempty"`
}

// SetFsync sets a node's fsync delay (through the test-only hook, in both
// modes); it also holds after a Restart. A paused node gets it when
// resumed, a stopped one when restarted.
func (c *Cluster) SetFsync(id int, d Fsync) error {
	return c.setFault(id, func(n *Node) { n.fsync = d }, "fsync", d)
}

// Stall SIGSTOPs node id's process for d and then SIGCONTs it, as a host
// too busy to schedule it would: the process keeps its sockets and its
// state and notices nothing but the time gone. It SIGCONTs even when ctx
// ends first, and returns once the process runs again; a node paused with
// Pause is refused (its SIGCONT belongs to Resume).
func (c *Cluster) Stall(ctx context.Context, id int, d time.Duration) error {
	c.mu.Lock()
	n, err := c.node(id)
	if err == nil && n.paused {
		err = fmt.Errorf("cluster: node %d is paused", id)
	}
	if err != nil {
		c.mu.Unlock()
		return err
	}
	if _, err := c.signalLocked(id, syscall.SIGSTOP, "stall"); err != nil {
		c.mu.Unlock()
		return err
	}
	// The very process stopped, even if a restart replaces it meanwhile.
	proc := n.cmd.Process
	c.mu.Unlock()
	t := time.NewTimer(d)
	select {
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
	}
	if err := proc.Signal(syscall.SIGCONT); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("cluster: continue node %d after a stall: %w", id, err)
	}
	return nil
}

// Metrics reads node id's /metrics: each sample's name with its labels, as
// the Prometheus text format writes them (edictkv_leases_lost_total{cause="expired"}),
// to its value. The gray nemeses read the lease statistics there to say
// what a fault cost the leader.
func (c *Cluster) Metrics(ctx context.Context, id int) (map[string]float64, error) {
	c.mu.Lock()
	n, err := c.node(id)
	c.mu.Unlock()
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.URL()+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("cluster: node %d metrics: %w", id, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("cluster: node %d metrics: %s", id, resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("cluster: node %d metrics: %w", id, err)
	}
	return out, nil
}

// DiskHogSpec describes the disk hog: a writer beside the nodes, on the
// filesystem of their data directories, that writes a file of FileMB MiB
// in blocks of 1 MiB, fsyncs it, removes it and starts again, as `dd
// if=/dev/zero of=F bs=1M count=FileMB conv=fsync` in a loop would.
type DiskHogSpec struct {
	FileMB int
}

// DiskHogStats is what the disk hog did.
type DiskHogStats struct {
	Dir string
	// Files counts the files written and fsynced in full; MB the MiB
	// written in all (a file cut short by the stop included).
	Files int
	MB    int64
	// FsyncMax is the longest fsync of a whole file; FsyncTime all of
	// them.
	FsyncMax, FsyncTime time.Duration
}

type diskHog struct {
	cancel context.CancelFunc
	done   chan struct{}
	stats  DiskHogStats
	err    error
}

var errNoHog = errors.New("cluster: no disk hog runs")

// StartDiskHog starts the disk hog in Dir/hog, on the filesystem of the
// nodes' data directories, until StopDiskHog. It runs in the harness's own
// process (a goroutine), so that it stops when asked and dies with the
// harness.
func (c *Cluster) StartDiskHog(spec DiskHogSpec) error {
	if spec.FileMB <= 0 {
		return fmt.Errorf("cluster: disk hog of %d MiB files", spec.FileMB)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.hog != nil {
		return errors.New("cluster: a disk hog runs already")
	}
	dir := filepath.Join(c.cfg.Dir, "hog")
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("cluster: disk hog: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &diskHog{cancel: cancel, done: make(chan struct{}), stats: DiskHogStats{Dir: dir}}
	c.hog = h
	go func() {
		defer close(h.done)
		h.err = h.run(ctx, dir, spec)
	}()
	c.log.Info("disk hog started", "dir", dir, "file_mb", spec.FileMB)
	return nil
}

// StopDiskHog stops the disk hog and removes its files. A file cut short
// is removed without its fsync, so that the stop leaves no writeback
// behind it; a fsync under way when the stop comes is waited for.
func (c *Cluster) StopDiskHog() (DiskHogStats, error) {
	c.mu.Lock()
	h := c.hog
	c.hog = nil
	c.mu.Unlock()
	if h == nil {
		return DiskHogStats{}, errNoHog
	}
	h.cancel()
	<-h.done
	err := h.err
	if rerr := os.RemoveAll(h.stats.Dir); rerr != nil {
		err = errors.Join(err, fmt.Errorf("cluster: disk hog: %w", rerr))
	}
	c.log.Info("disk hog stopped", "files", h.stats.Files, "mb", h.stats.MB, "fsync_max", h.stats.FsyncMax)
	return h.stats, err
}

// run writes files until ctx ends; h.stats is its own until done closes.
func (h *diskHog) run(ctx context.Context, dir string, spec DiskHogSpec) error {
	// Random blocks: a filesystem that compresses or deduplicates would
	// make zeros cheap.
	block := make([]byte, 1<<20)
	if _, err := rand.Read(block); err != nil {
		return err
	}
	for i := 0; ctx.Err() == nil; i++ {
		name := filepath.Join(dir, fmt.Sprintf("hog-%d", i))
		f, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o640)
		if err != nil {
			return fmt.Errorf("cluster: disk hog: %w", err)
		}
		whole := true
		for range spec.FileMB {
			if ctx.Err() != nil {
				whole = false
				break
			}
			if _, err := f.Write(block); err != nil {
				f.Close()
				os.Remove(name)
				return fmt.Errorf("cluster: disk hog: %w", err)
			}
			h.stats.MB++
		}
		if whole {
			start := time.Now()
			if err := f.Sync(); err != nil {
				f.Close()
				os.Remove(name)
				return fmt.Errorf("cluster: disk hog: %w", err)
			}
			d := time.Since(start)
			h.stats.FsyncTime += d
			h.stats.FsyncMax = max(h.stats.FsyncMax, d)
			h.stats.Files++
		}
		f.Close()
		// Removing a file drops its dirty pages: what was not synced is
		// never written.
		if err := os.Remove(name); err != nil {
			return fmt.Errorf("cluster: disk hog: %w", err)
		}
	}
	return nil
}

// IOLimit bounds a process's writes to one disk; 0 leaves a bound off.
type IOLimit struct {
	WriteBPS  uint64 // bytes per second
	WriteIOPS uint64 // write operations per second
}

// cgroupHold is a kernel throttle on one node's process (cgroup_linux.go):
// the cgroup made for it and the group the process came from, to go back
// to. Node.cgroups keeps them, under Cluster.mu.
type cgroupHold struct {
	dir  string // the throttle's cgroup
	back string // cgroup.procs of the group the process came from
	pid  int
}
