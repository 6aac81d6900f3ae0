//go:build !linux

package cluster

import (
	"fmt"
	"log/slog"
)

// The kernel throttles are cgroups, which only Linux has
// (cgroup_linux.go).

// ThrottleIO is Linux only.
func (c *Cluster) ThrottleIO(id int, l IOLimit) (string, error) {
	return "", fmt.Errorf("%w: the kernel's I/O throttle is a Linux cgroup", ErrUnsupported)
}

// UnthrottleIO undoes nothing here.
func (c *Cluster) UnthrottleIO(id int) error { return nil }

// LimitCPU is Linux only.
func (c *Cluster) LimitCPU(id int, share float64) (string, error) {
	return "", fmt.Errorf("%w: the kernel's CPU quota is a Linux cgroup", ErrUnsupported)
}

// UnlimitCPU undoes nothing here.
func (c *Cluster) UnlimitCPU(id int) error { return nil }

func (c *Cluster) releaseCgroupLocked(*Node, string) error { return nil }

func cleanupCgroups(*slog.Logger, func(string) bool) {}
