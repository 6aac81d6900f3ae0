//go:build unix

package storage

import (
	"errors"
	"os"
	"syscall"
	"time"
)

var errLockTimeout = errors.New("timed out waiting for the file lock")

// lockShared takes a shared flock on f, polling until timeout. bbolt holds
// an exclusive flock on its file for as long as it has it open, so this
// excludes every bbolt writer. The lock goes when f is closed.
func lockShared(f *os.File, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return err
		}
		if time.Now().After(deadline) {
			return errLockTimeout
		}
		time.Sleep(10 * time.Millisecond)
	}
}
