//go:build linux

package cluster

// The kernel's own throttles, through cgroups: ThrottleIO bounds a node's
// writes to the disk under its data directory, LimitCPU its share of the
// CPUs. Both need root, so both need netns mode (whose namespaces need
// root too; portable mode is for running without it). A cgroup v2
// hierarchy is used where it has the controller (io, cpu), else cgroup
// v1's (blkio, cpu). Each throttle is a cgroup of its own in the
// hierarchy's root, named ejepsen-<tag>-n<id>-<io|cpu> after the run's
// netns tag; the process moves in, moves back to the group it came from
// when the throttle is undone, and the cgroup is removed. Start removes
// the cgroups of crashed runs with their namespaces (cleanupLeftovers).
//
// Under cgroup v1 the blkio throttle bounds only the I/O a process issues
// itself — the data its fsyncs write, which is what a log waits for — not
// the page cache's background writeback, which v1 charges to no group.

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cgroupPrefix starts the name of every cgroup the harness makes.
const cgroupPrefix = "ejepsen-"

// cgroupMount is where a controller's hierarchy is mounted.
type cgroupMount struct {
	path string
	v2   bool
	// v1name is the controller's name in cgroup v1 (blkio for io).
	v1name string
}

func (m cgroupMount) String() string {
	if m.v2 {
		return "cgroup v2"
	}
	return "cgroup v1 " + m.v1name
}

// cgroupFor finds the hierarchy of controller ctl ("io" or "cpu"): the
// cgroup v2 one if ctl is among its controllers, else cgroup v1's.
func cgroupFor(ctl string) (cgroupMount, error) {
	v1name := ctl
	if ctl == "io" {
		v1name = "blkio"
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return cgroupMount{}, fmt.Errorf("%w: %v", ErrUnsupported, err)
	}
	var v2, v1 string
	for _, line := range strings.Split(string(mi), "\n") {
		// "id parent maj:min root mountpoint opts [optional...] - fstype source superopts"
		f := strings.Fields(line)
		sep := slices.Index(f, "-")
		if sep < 5 || len(f) < sep+4 {
			continue
		}
		switch f[sep+1] {
		case "cgroup2":
			v2 = f[4]
		case "cgroup":
			if slices.Contains(strings.Split(f[sep+3], ","), v1name) {
				v1 = f[4]
			}
		}
	}
	if v2 != "" {
		if b, err := os.ReadFile(filepath.Join(v2, "cgroup.controllers")); err == nil && slices.Contains(strings.Fields(string(b)), ctl) {
			return cgroupMount{path: v2, v2: true, v1name: v1name}, nil
		}
	}
	if v1 != "" {
		return cgroupMount{path: v1, v1name: v1name}, nil
	}
	return cgroupMount{}, fmt.Errorf("%w: no cgroup v2 hierarchy with the %s controller and no cgroup v1 %s hierarchy is mounted",
		ErrUnsupported, ctl, v1name)
}

// currentGroup is the group of pid in m's hierarchy, from /proc/PID/cgroup.
func currentGroup(pid int, m cgroupMount) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		// "hierarchy-id:controllers:path"; v2's is "0::path".
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		if m.v2 && f[0] == "0" && f[1] == "" || !m.v2 && slices.Contains(strings.Split(f[1], ","), m.v1name) {
			return f[2], nil
		}
	}
	return "", fmt.Errorf("cluster: process %d is in no %s group", pid, m)
}

// diskDevice is "major:minor" of the whole disk that holds path: the
// throttles take disks, not partitions.
func diskDevice(path string) (string, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return "", fmt.Errorf("cluster: %s: %w", path, err)
	}
	dev := uint64(st.Dev) // a uint32 on some architectures
	major := (dev>>8)&0xfff | (dev>>32)&^uint64(0xfff)
	minor := dev&0xff | (dev>>12)&^uint64(0xff)
	sys := fmt.Sprintf("/sys/dev/block/%d:%d", major, minor)
	if _, err := os.Stat(sys); err != nil {
		return "", fmt.Errorf("%w: %s is on device %d:%d, which is not a block device (tmpfs, overlay or a network filesystem?)",
			ErrUnsupported, path, major, minor)
	}
	if _, err := os.Stat(sys + "/partition"); err == nil {
		// The kernel resolves the symlink before "..": the disk's
		// directory. (filepath.Join would clean the ".." away first.)
		b, err := os.ReadFile(sys + "/../dev")
		if err != nil {
			return "", fmt.Errorf("cluster: the disk of partition %d:%d: %w", major, minor, err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	return fmt.Sprintf("%d:%d", major, minor), nil
}

// ThrottleIO puts node id's process in a cgroup of its own that bounds its
// writes to the disk holding its data directory (cgroup v2 io.max, or
// cgroup v1 blkio.throttle.write_bps_device and write_iops_device), until
// UnthrottleIO; a process started anew (Restart, Bounce) is not throttled.
// It describes what it did. An error wrapping ErrUnsupported says why it
// cannot: portable mode, no such controller, or a data directory on no
// block device.
func (c *Cluster) ThrottleIO(id int, l IOLimit) (string, error) {
	return c.holdCgroup(id, "io", func(n *Node, m cgroupMount, dir string) (string, error) {
		dev, err := diskDevice(n.DataDir)
		if err != nil {
			return "", err
		}
		if m.v2 {
			v := func(x uint64) string {
				if x == 0 {
					return "max"
				}
				return strconv.FormatUint(x, 10)
			}
			if err := writeCgroup(dir, "io.max", fmt.Sprintf("%s wbps=%s wiops=%s", dev, v(l.WriteBPS), v(l.WriteIOPS))); err != nil {
				return "", err
			}
		} else {
			if _, err := os.Stat(filepath.Join(dir, "blkio.throttle.write_bps_device")); err != nil {
				return "", fmt.Errorf("%w: this kernel's blkio controller has no throttle (CONFIG_BLK_DEV_THROTTLING)", ErrUnsupported)
			}
			if l.WriteBPS > 0 {
				if err := writeCgroup(dir, "blkio.throttle.write_bps_device", fmt.Sprintf("%s %d", dev, l.WriteBPS)); err != nil {
					return "", err
				}
			}
			if l.WriteIOPS > 0 {
				if err := writeCgroup(dir, "blkio.throttle.write_iops_device", fmt.Sprintf("%s %d", dev, l.WriteIOPS)); err != nil {
					return "", err
				}
			}
		}
		return fmt.Sprintf("writes to disk %s bounded to %d KiB/s and %d IOPS (%s)", dev, l.WriteBPS>>10, l.WriteIOPS, m), nil
	})
}

// UnthrottleIO undoes ThrottleIO (nothing if none is in force).
func (c *Cluster) UnthrottleIO(id int) error { return c.releaseCgroup(id, "io") }

// cpuPeriod is the CPU quota's period: short, so that the process runs in
// slices of a few milliseconds, stopped for the rest of each period.
const cpuPeriod = 100 * time.Millisecond

// LimitCPU puts node id's process in a cgroup of its own that lets it run
// share of one CPU (0.1: 10 ms in every 100 ms period, all its threads
// together), until UnlimitCPU: a host too busy to run it. It describes
// what it did; an error wrapping ErrUnsupported says why it cannot.
func (c *Cluster) LimitCPU(id int, share float64) (string, error) {
	if !(share > 0 && share < 64) {
		return "", fmt.Errorf("cluster: CPU share %g", share)
	}
	period := cpuPeriod.Microseconds()
	quota := max(int64(share*float64(period)), 1000) // the kernel's least
	return c.holdCgroup(id, "cpu", func(_ *Node, m cgroupMount, dir string) (string, error) {
		if m.v2 {
			if err := writeCgroup(dir, "cpu.max", fmt.Sprintf("%d %d", quota, period)); err != nil {
				return "", err
			}
		} else {
			if err := writeCgroup(dir, "cpu.cfs_period_us", strconv.FormatInt(period, 10)); err != nil {
				return "", err
			}
			if err := writeCgroup(dir, "cpu.cfs_quota_us", strconv.FormatInt(quota, 10)); err != nil {
				return "", err
			}
		}
		return fmt.Sprintf("CPU quota %.1f ms per %v (%s)", float64(quota)/1000, cpuPeriod, m), nil
	})
}

// UnlimitCPU undoes LimitCPU (nothing if none is in force).
func (c *Cluster) UnlimitCPU(id int) error { return c.releaseCgroup(id, "cpu") }

func writeCgroup(dir, file, value string) error {
	if err := os.WriteFile(filepath.Join(dir, file), []byte(value), 0); err != nil {
		return fmt.Errorf("cluster: %s ← %q: %w", filepath.Join(dir, file), value, err)
	}
	return nil
}

// holdCgroup makes node id's cgroup for controller ctl, lets apply set its
// limits, and moves the node's process into it.
func (c *Cluster) holdCgroup(id int, ctl string, apply func(*Node, cgroupMount, string) (string, error)) (string, error) {
	if c.net == nil {
		return "", fmt.Errorf("%w: portable mode runs without root, and the kernel's throttles need it (netns mode)", ErrUnsupported)
	}
	m, err := cgroupFor(ctl)
	if err != nil {
		return "", err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	n, err := c.node(id)
	if err != nil {
		return "", err
	}
	if !n.running() {
		return "", fmt.Errorf("cluster: node %d is not running", id)
	}
	if err := c.releaseCgroupLocked(n, ctl); err != nil {
		return "", err
	}
	pid := n.cmd.Process.Pid
	from, err := currentGroup(pid, m)
	if err != nil {
		return "", err
	}
	if m.v2 {
		// Children of the root get the controller only once the root
		// hands it down; enabling it again is harmless.
		if err := writeCgroup(m.path, "cgroup.subtree_control", "+"+ctl); err != nil {
			return "", err
		}
	}
	dir := filepath.Join(m.path, fmt.Sprintf("%s%s-n%d-%s", cgroupPrefix, c.net.tag, id, ctl))
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("cluster: %w", err)
	}
	what, err := apply(n, m, dir)
	if err == nil {
		err = writeCgroup(dir, "cgroup.procs", strconv.Itoa(pid))
	}
	if err != nil {
		_ = os.Remove(dir)
		return "", err
	}
	if n.cgroups == nil {
		n.cgroups = map[string]*cgroupHold{}
	}
	n.cgroups[ctl] = &cgroupHold{dir: dir, back: filepath.Join(m.path, from, "cgroup.procs"), pid: pid}
	c.log.Info("node throttled", "node", id, "cgroup", dir, "what", what)
	return what, nil
}

func (c *Cluster) releaseCgroup(id int, ctl string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, err := c.node(id)
	if err != nil {
		return err
	}
	return c.releaseCgroupLocked(n, ctl)
}

// releaseCgroupLocked moves the process back to the group it came from, if
// it still runs, and removes the cgroup; c.mu is held.
func (c *Cluster) releaseCgroupLocked(n *Node, ctl string) error {
	h := n.cgroups[ctl]
	if h == nil {
		return nil
	}
	delete(n.cgroups, ctl)
	var errs []error
	if err := os.WriteFile(h.back, []byte(strconv.Itoa(h.pid)), 0); err != nil && !errors.Is(err, syscall.ESRCH) {
		errs = append(errs, fmt.Errorf("cluster: node %d back to %s: %w", n.ID, h.back, err))
	}
	// A process that just died may linger in the group for a moment.
	var err error
	for deadline := time.Now().Add(2 * time.Second); ; {
		if err = os.Remove(h.dir); err == nil || errors.Is(err, os.ErrNotExist) || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, fmt.Errorf("cluster: remove %s: %w", h.dir, err))
	}
	c.log.Info("node unthrottled", "node", n.ID, "cgroup", h.dir)
	return errors.Join(errs...)
}

// cleanupCgroups removes the cgroups of runs whose owner is gone (their
// processes died with them).
func cleanupCgroups(log *slog.Logger, isDead func(tag string) bool) {
	for _, ctl := range []string{"io", "cpu"} {
		m, err := cgroupFor(ctl)
		if err != nil {
			continue
		}
		ents, err := os.ReadDir(m.path)
		if err != nil {
			continue
		}
		for _, e := range ents {
			name := e.Name()
			if !e.IsDir() || !strings.HasPrefix(name, cgroupPrefix) || len(name) < len(cgroupPrefix)+8 {
				continue
			}
			if !isDead(name[len(cgroupPrefix) : len(cgroupPrefix)+8]) {
				continue
			}
			if err := os.Remove(filepath.Join(m.path, name)); err == nil {
				log.Info("removed a leftover cgroup", "cgroup", filepath.Join(m.path, name))
			}
		}
	}
}
