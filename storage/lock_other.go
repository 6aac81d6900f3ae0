//go:build !unix

package storage

import (
	"errors"
	"os"
	"time"
)

var errLockTimeout = errors.New("timed out waiting for the file lock")

// lockShared is a no-op where flock does not exist; bbolt's own lock still
// keeps two writers apart, only the pre-open check is unguarded.
func lockShared(*os.File, time.Duration) error { return nil }

// lockExclusive is a no-op where flock does not exist.
func lockExclusive(*os.File, time.Duration) error { return nil }

func unlock(*os.File) {}
