package cluster

import "syscall"

// sysProcAttr puts a node in its own process group (a ^C to the harness
// does not reach it) and kills it if the harness dies, so that a crashed
// harness leaves no processes behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
