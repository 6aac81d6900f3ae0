//go:build !linux

package main

import "os/exec"

// dieWithTest: only Linux has a parent-death signal; elsewhere a killed
// test run may leave its servers behind.
func dieWithTest(*exec.Cmd) {}
