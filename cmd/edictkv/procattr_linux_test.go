package main

import (
	"os/exec"
	"syscall"
)

// dieWithTest makes a server the tests start die with the test binary: a
// run that go test's own timeout kills never reaches the clusters'
// cleanups, and must not leave servers holding ports and data dirs.
func dieWithTest(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
