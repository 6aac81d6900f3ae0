//go:build linux

package edict

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Readers that race for the clock must never make it report a suspend
// that did not happen. Before the pair of readings was taken under the
// clock's lock, two goroutines reading at once made a "suspend" appear
// within tens of milliseconds on a two-core machine, and a leader gave up
// a healthy lease.
func TestNoFalseSuspendUnderConcurrentReaders(t *testing.T) {
	c, err := NewSystemClock(1, 1e-3)
	if err != nil {
		t.Fatal(err)
	}
	since := c.Now()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var reads atomic.Int64
	// More readers than cores, so that a reader is preempted between its
	// readings and the lock.
	for range 2 * runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				c.Now()
				reads.Add(1)
			}
		}()
	}
	deadline := time.Now().Add(time.Second)
	var suspended bool
	for time.Now().Before(deadline) && !suspended {
		c.Now()
		suspended = c.Suspended(since)
		time.Sleep(time.Millisecond)
	}
	close(stop)
	wg.Wait()
	if suspended {
		t.Fatalf("a suspend was reported after %d concurrent readings, with none", reads.Load())
	}
	t.Logf("%d concurrent readings, no suspend", reads.Load())
}
