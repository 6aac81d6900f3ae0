package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/edictlog/edictlog/jepsen/cluster"
)

// slowMember is the slow-disk companion: one process whose disk is slow
// (the hook's fsync delay, and the kernel's I/O throttle where there is
// one), killed and restarted at once at random moments. Its restarts hold
// op, and so does a removal of it, so that a restart never races the
// removal: a process removed is never started again. Kills do not wait
// for op: a kill during the removal is one of the moments aimed at.
type slowMember struct {
	c    Cluster
	rng  *rand.Rand
	step func(string, ...any)
	ms   func() int64

	op     sync.Mutex
	mu     sync.Mutex // guards the fields below; never held across a call to c
	id     int        // 0 until known (the newcomer)
	gone   bool       // removed: not restarted
	down   bool       // killed and not started again
	failed bool       // a restart failed: the cluster recorded it
	kills  []string

	watching context.CancelFunc
	watched  sync.WaitGroup
}

func (s *slowMember) target() int {
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.id
}

func (s *slowMember) isDown() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.down
}

func (s *slowMember) killsString() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.kills) == 0 {
		return "not killed"
	}
	return "killed " + strings.Join(s.kills, ", ")
}

// slowDown slows id's disk and says how.
func (s *slowMember) slowDown(id int) (string, error) {
	s.mu.Lock()
	s.id = id
	s.mu.Unlock()
	if err := s.c.SetFsync(id, slowDiskSpec); err != nil {
		return "", err
	}
	what := fmt.Sprintf("%d's durable batches %d–%d ms late", id, slowDiskSpec.MinMS, slowDiskSpec.MaxMS)
	return what + s.throttle(id), nil
}

// throttle puts id's process under the kernel's I/O throttle (a process
// started anew is not), and says how, or why not.
func (s *slowMember) throttle(id int) string {
	desc, err := s.c.ThrottleIO(id, slowDiskIO)
	if err != nil {
		return "; no kernel I/O throttle: " + errString(err)
	}
	return "; " + desc
}

// kill kills the member and leaves it down.
func (s *slowMember) kill() error {
	s.op.Lock()
	defer s.op.Unlock()
	s.mu.Lock()
	id, gone := s.id, s.gone
	s.mu.Unlock()
	if id == 0 || gone {
		return errors.New("no slow member to kill")
	}
	if err := s.c.Kill(id); err != nil {
		return err
	}
	s.mu.Lock()
	s.down = true
	s.kills = append(s.kills, fmt.Sprintf("at +%dms", s.ms()))
	s.mu.Unlock()
	return nil
}

// restart starts the member again (if it is down and not removed), slow
// as before.
func (s *slowMember) restart(why string) error {
	s.op.Lock()
	defer s.op.Unlock()
	return s.restartLocked(why)
}

// restartLocked is restart with op held.
func (s *slowMember) restartLocked(why string) error {
	s.mu.Lock()
	id, skip := s.id, !s.down || s.gone || s.failed
	s.mu.Unlock()
	if skip {
		return nil
	}
	err := s.c.Restart(id)
	s.mu.Lock()
	if err != nil {
		s.failed = true // the product's failure, and the cluster's record
	} else {
		s.down = false
	}
	s.mu.Unlock()
	if err != nil {
		s.step("%d did not start again %s at +%dms: %s", id, why, s.ms(), errString(err))
		return fmt.Errorf("restart %d: %w", id, err)
	}
	s.step("restarted %d %s at +%dms%s", id, why, s.ms(), s.throttle(id))
	return nil
}

// killAndRestart SIGKILLs the member and starts it again at once, unless
// it is removed meanwhile (or not started yet, or down already).
func (s *slowMember) killAndRestart(during string) {
	s.mu.Lock()
	id, skip := s.id, s.id == 0 || s.gone || s.down
	s.mu.Unlock()
	if skip {
		return
	}
	err := s.c.Kill(id)
	at := s.ms()
	s.step("killed %d (slow disk) at +%dms, %s: %s", id, at, during, errString(err))
	if err != nil {
		return
	}
	s.op.Lock()
	defer s.op.Unlock()
	s.mu.Lock()
	s.down = true
	s.kills = append(s.kills, fmt.Sprintf("at +%dms (%s)", at, during))
	s.mu.Unlock()
	_ = s.restartLocked("after the kill")
}

// watch kills the member once while a snapshot stream is held at it or
// while it installs one (a stream handed to it), until stopWatching.
func (s *slowMember) watch(ctx context.Context) {
	wctx, cancel := context.WithCancel(ctx)
	s.mu.Lock()
	s.watching = cancel
	id := s.id
	// During the stream, or some time after it was handed over: while
	// the snapshot is being written to the slow disk.
	installing := s.rng.IntN(2) == 1
	after := time.Duration(s.rng.Int64N(int64(200 * time.Millisecond)))
	s.mu.Unlock()
	if id == 0 {
		cancel()
		return
	}
	// Streams to it are held, so that one is in flight long enough to be
	// seen (and the change's other steps go on meanwhile).
	if err := s.c.SetDelay(id, cluster.Delay{SnapshotMS: snapshotHoldMS}); err != nil {
		s.step("holding snapshot streams to %d: %s", id, errString(err))
	}
	s.watched.Add(1)
	go func() {
		defer s.watched.Done()
		var base uint64
		known := false
		for sleepCtx(wctx, 10*time.Millisecond) {
			st, err := s.c.HookStats(wctx, id)
			if err != nil {
				known = false // down, or a new process: its counts start again
				continue
			}
			if !known {
				base, known = st.SnapshotsReceived, true
			}
			switch {
			case !installing && st.SnapshotsHolding > 0:
				s.killAndRestart("while a snapshot stream to it was held there")
				return
			case installing && st.SnapshotsReceived > base:
				if !sleepCtx(wctx, after) {
					return
				}
				s.killAndRestart(fmt.Sprintf("%v after a snapshot was handed to it (installing)", after.Round(time.Millisecond)))
				return
			}
		}
	}()
}

func (s *slowMember) stopWatching() {
	s.mu.Lock()
	cancel := s.watching
	s.watching = nil
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	s.watched.Wait()
}

// heal starts the member again if a kill left it down, and lifts its slow
// disk, its throttle and the hold of snapshot streams (also on a process
// removed, whose cgroup must go); it says what it did.
func (s *slowMember) heal() (string, error) {
	s.op.Lock()
	defer s.op.Unlock()
	s.mu.Lock()
	id, restart, kills := s.id, s.down && !s.gone && !s.failed, slices.Clone(s.kills)
	s.mu.Unlock()
	if id == 0 {
		return "", nil
	}
	var errs []error
	var did []string
	if restart {
		err := s.c.Restart(id)
		s.mu.Lock()
		if err != nil {
			s.failed = true
		} else {
			s.down = false
		}
		s.mu.Unlock()
		if err != nil {
			errs = append(errs, err)
		} else {
			did = append(did, fmt.Sprintf("restarted %d", id))
		}
	}
	errs = append(errs, s.c.SetFsync(id, cluster.Fsync{}), s.c.UnthrottleIO(id), s.c.SetDelay(id, cluster.Delay{}))
	did = append(did, fmt.Sprintf("%d's disk fast again", id))
	if len(kills) > 0 {
		did = append(did, fmt.Sprintf("%d killed %s", id, strings.Join(kills, ", ")))
	}
	return strings.Join(did, "; "), errors.Join(errs...)
}
