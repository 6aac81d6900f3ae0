//go:build unix && !linux

package cluster

import "syscall"

// sysProcAttr puts a node in its own process group (a ^C to the harness
// does not reach it).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
