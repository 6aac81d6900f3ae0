package main

import (
	"os"
	"strings"
	"testing"
	"time"
)

// --profile names the lease timings; a flag given beside it wins, and an
// unknown profile is refused before anything starts.
func TestLeaseProfiles(t *testing.T) {
	lan := leaseProfiles["lan"]
	if lan.renewInterval != 150*time.Millisecond || lan.maxLease != 620*time.Millisecond || lan.roundTrip != 0 {
		t.Fatalf("lan = %+v", lan)
	}
	if got := lan.override(0, 0, 0); got != lan {
		t.Fatalf("no flags: %+v, want the profile's %+v", got, lan)
	}
	got := lan.override(5*time.Millisecond, 200*time.Millisecond, time.Second)
	if want := (leaseTimings{roundTrip: 5 * time.Millisecond, renewInterval: 200 * time.Millisecond, maxLease: time.Second}); got != want {
		t.Fatalf("flags over lan: %+v, want %+v", got, want)
	}
	if d := leaseProfiles["default"]; d != (leaseTimings{}) {
		t.Fatalf("default = %+v: the library's defaults are zero here", d)
	}

	dir := t.TempDir()
	base := []string{"--id", "1", "--data-dir", dir, "--peers", "1=127.0.0.1:1/127.0.0.1:2"}
	err := runServe(append(base, "--profile", "wan"), os.Stdout, os.Stderr)
	if err == nil || !strings.Contains(err.Error(), "--profile") {
		t.Fatalf("--profile wan: %v, want an error naming --profile", err)
	}
	// The timings reach the library, which refuses a longest lease shorter
	// than one renewal's.
	err = runServe(append(base, "--raft-addr", freePort(t), "--http-addr", freePort(t), "--profile", "lan", "--renew-interval", "700ms",
		"--log-level", "error"), os.Stdout, os.Stderr)
	if err == nil || !strings.Contains(err.Error(), "MaxLease") {
		t.Fatalf("--profile lan --renew-interval 700ms (longer than lan's 620ms lease): %v, want the library's refusal", err)
	}
}
