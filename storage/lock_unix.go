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
	return lock(f, syscall.LOCK_SH, timeout)
}

// lockExclusive takes an exclusive flock on f, as bbolt does while open,
// polling until timeout.
func lockExclusive(f *os.File, timeout time.Duration) error {
	return lock(f, syscall.LOCK_EX, timeout)
}

func lock(f *os.File, how int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
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

// unlock drops f's flock.
func unlock(f *os.File) { syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }
