package storage

import (
	"bytes"
	"fmt"
	"log/slog"
	"math/bits"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/edictlog/edictlog/wire"
	"github.com/stretchr/testify/require"
)

// The power-loss test. SIGKILL (crash_test.go) cannot show that a commit
// with one fdatasync is safe: the page cache outlives the process, so every
// write reaches the disk. A power loss is different: of the pages written
// since the last fdatasync, any subset may be on the disk, in any order,
// and a page may be torn at a sector boundary; the file may even be short of
// pages written past its synced size.
//
// So the test takes the file before and after every commit of a random
// history and builds the crash images in between: the old file with any
// subset of the changed pages (the meta page among them) from the new one,
// sometimes one of them torn, sometimes the file cut back to its old size.
// Every image must open — a crash must never leave a store that refuses to
// start — and hold exactly the state before the commit or after it, and
// after it when every page arrived. A store opened from an image must then
// take a commit and reopen. This is the model of ALICE and CrashMonkey
// (Pillai et al., OSDI '14; Mohan et al., OSDI '18) at page granularity.

const sector = 512

// powerLossReport is what one run of the power-loss test found.
type powerLossReport struct {
	commits, images, rolledBack, before, after int
	failures                                   []string
}

func TestPowerLoss(t *testing.T) {
	// EDICTLOG_POWERLOSS=n runs n seeds (the default run takes ~10 s).
	seeds := uint64(2)
	if env := os.Getenv("EDICTLOG_POWERLOSS"); env != "" {
		_, err := fmt.Sscanf(env, "%d", &seeds)
		require.NoError(t, err, "EDICTLOG_POWERLOSS")
	}
	for seed := uint64(1); seed <= seeds; seed++ {
		r := powerLoss(t, seed, 40, 32)
		t.Logf("seed %d: %d commits, %d crash images: %d opened as before the commit (%d of them by rolling back a torn one), %d as after",
			seed, r.commits, r.images, r.before, r.rolledBack, r.after)
		require.Empty(t, r.failures, "seed %d", seed)
		require.Positive(t, r.rolledBack, "seed %d: no image had a meta page ahead of its pages", seed)
	}
}

// TestPowerLossNegativeControls turns off, one at a time, the two things
// that make single-sync commits safe, and requires the test to notice.
func TestPowerLossNegativeControls(t *testing.T) {
	for _, c := range []struct {
		name string
		off  *bool
	}{
		{"no rollback of torn commits", &rollbackTornCommits},
		{"no transaction id check", &checkStateTxid},
	} {
		t.Run(c.name, func(t *testing.T) {
			*c.off = false
			defer func() { *c.off = true }()
			var found []string
			for seed := uint64(1); seed <= 3 && len(found) == 0; seed++ {
				found = powerLoss(t, seed, 40, 32).failures
			}
			require.NotEmpty(t, found, "the power-loss test cannot fail without it")
			t.Logf("caught: %s", found[0])
		})
	}
}

// powerLoss runs commits random commits and opens up to perCommit crash
// images of each.
func powerLoss(t *testing.T, seed uint64, commits, perCommit int) powerLossReport {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	dir := t.TempDir()
	path := filepath.Join(dir, "log.db")
	s, err := OpenBolt(path, &BoltOptions{CompactChunk: 1 << 20, Preallocate: 64 << 10, Logger: quietLogger()})
	require.NoError(t, err)
	defer func() { s.Close() }()
	var r powerLossReport
	next := uint64(1)
	for i := range commits {
		pre := readAll(t, path)
		preC, err := storeContents(s)
		require.NoError(t, err)
		what := randomCommit(t, rng, s, &next)
		post := readAll(t, path)
		postC, err := storeContents(s)
		require.NoError(t, err)
		r.commits++
		ps := s.db.Info().PageSize
		changed := changedPages(pre, post, ps)
		for _, img := range crashImages(rng, pre, post, changed, ps, perCommit) {
			r.images++
			name := fmt.Sprintf("seed %d commit %d (%s), %s", seed, i, what, img.what)
			ip := filepath.Join(dir, "image.db")
			require.NoError(t, os.WriteFile(ip, img.b, 0o600))
			got, rb, err := readContentsRolledBack(ip)
			switch {
			case err != nil:
				r.failures = append(r.failures, fmt.Sprintf("%s: does not open: %v", name, err))
			case img.complete && !equalContents(got, postC):
				r.failures = append(r.failures, fmt.Sprintf("%s: every page arrived, yet the commit is not there", name))
			case equalContents(got, postC) && rb == 0:
				r.after++
			case equalContents(got, preC):
				r.before++
				if rb != 0 {
					r.rolledBack++
				}
			default:
				r.failures = append(r.failures, fmt.Sprintf("%s: opened (rolled back %d) holding neither the state before the commit nor after it: %s", name, rb, describe(got, preC, postC)))
			}
			if err == nil && r.images%16 == 1 {
				if err := commitAndReopen(ip); err != nil {
					r.failures = append(r.failures, fmt.Sprintf("%s: opened, but then: %v", name, err))
				}
			}
			if len(r.failures) > 0 {
				return r
			}
		}
	}
	return r
}

// randomCommit makes one transaction: an append (sometimes after a
// truncation) with stable changes, a compaction step or an incarnation.
func randomCommit(t *testing.T, rng *rand.Rand, s committer, next *uint64) string {
	t.Helper()
	first, err := s.FirstIndex()
	require.NoError(t, err)
	switch k := rng.IntN(10); {
	case k == 0 && *next-first > 10:
		upTo := first + uint64(rng.IntN(8))
		require.NoError(t, s.CompactPrefix(upTo))
		return fmt.Sprintf("compact to %d", upTo)
	case k == 1:
		_, err := s.BumpIncarnation()
		require.NoError(t, err)
		return "incarnation"
	default:
		var b wire.Batch
		if k == 2 && *next-first > 3 {
			b.TruncateFrom = *next - uint64(1+rng.IntN(3))
			*next = b.TruncateFrom
		}
		n := 1 + rng.IntN(20)
		b.Entries = testEntries(*next, n, 30+rng.IntN(300))
		for i := range b.Entries {
			b.Entries[i].Data[len(b.Entries[i].Data)-1] = byte(rng.Uint32())
		}
		*next += uint64(n)
		set := rng.IntN(12)
		b.Stable = map[string][]byte{fmt.Sprintf("grant/%d", set): bytes.Repeat([]byte{byte(rng.Uint32())}, 20+rng.IntN(200))}
		if del := rng.IntN(12); del != set && rng.IntN(4) == 0 {
			b.Delete = []string{fmt.Sprintf("grant/%d", del)}
		}
		require.NoError(t, s.StoreBatch(b))
		return fmt.Sprintf("append %d, truncate from %d", n, b.TruncateFrom)
	}
}

// committer is what randomCommit writes to.
type committer interface {
	FirstIndex() (uint64, error)
	CompactPrefix(upTo uint64) error
	BumpIncarnation() (uint64, error)
	StoreBatch(b wire.Batch) error
}

type crashImage struct {
	b        []byte
	what     string
	complete bool // every changed page arrived, whole
}

// changedPages lists the pages that differ between pre and post, a missing
// page reading as zeros.
func changedPages(pre, post []byte, ps int) []int {
	var out []int
	for p := 0; p*ps < max(len(pre), len(post)); p++ {
		if !bytes.Equal(page(pre, p, ps), page(post, p, ps)) {
			out = append(out, p)
		}
	}
	return out
}

func page(b []byte, p, ps int) []byte {
	z := make([]byte, ps)
	if p*ps < len(b) {
		copy(z, b[p*ps:min(len(b), (p+1)*ps)])
	}
	return z
}

// crashImages returns up to n images: every subset of the changed pages
// when there are few, else the empty and the full subset and random ones.
func crashImages(rng *rand.Rand, pre, post []byte, changed []int, ps, n int) []crashImage {
	var subsets []uint64
	if len(changed) <= 6 && 1<<len(changed) <= n {
		for m := range uint64(1) << len(changed) {
			subsets = append(subsets, m)
		}
	} else {
		all := uint64(1)<<min(len(changed), 63) - 1
		subsets = append(subsets, 0, all)
		for len(subsets) < n {
			subsets = append(subsets, rng.Uint64()&all)
		}
	}
	var out []crashImage
	for _, m := range subsets {
		img := bytes.Clone(pre)
		if len(post) > len(img) {
			img = append(img, make([]byte, len(post)-len(img))...)
		}
		var arrived []int
		torn := -1
		if m != 0 && rng.IntN(3) == 0 {
			torn = rng.IntN(bits.OnesCount64(m)) // the torn one among those that arrived
		}
		what := ""
		for i, p := range changed {
			if m&(1<<i) == 0 {
				continue
			}
			src := page(post, p, ps)
			if len(arrived) == torn {
				// A prefix of its sectors, the rest as before.
				k := rng.IntN(ps/sector-1) + 1
				copy(img[p*ps:], src[:k*sector])
				what = fmt.Sprintf(", page %d torn after %d sectors", p, k)
			} else {
				copy(img[p*ps:], src)
			}
			arrived = append(arrived, p)
		}
		complete := len(arrived) == len(changed) && torn < 0
		if len(post) > len(pre) && rng.IntN(4) == 0 {
			img = img[:len(pre)] // the new size did not reach the disk
			complete = false
			what += ", file back to its old size"
		}
		out = append(out, crashImage{b: img, complete: complete,
			what: fmt.Sprintf("pages %v of %v arrived%s", arrived, changed, what)})
	}
	return out
}

// commitAndReopen shows that a store opened from a crash image works: it
// takes a commit, and reopens holding it.
func commitAndReopen(path string) error {
	return commitAndReopenWith(func() (reopened, error) { return OpenBolt(path, &BoltOptions{Logger: quietLogger()}) })
}

// reopened is a store commitAndReopenWith opens.
type reopened interface {
	contentStore
	LastIndex() (uint64, error)
	StoreBatch(wire.Batch) error
	Close() error
}

// commitAndReopenWith is commitAndReopen for the store open opens.
func commitAndReopenWith(open func() (reopened, error)) error {
	s, err := open()
	if err != nil {
		return err
	}
	last, err := s.LastIndex()
	if err == nil {
		err = s.StoreBatch(wire.Batch{Entries: testEntries(last+1, 5, 100), Stable: map[string][]byte{"after": []byte("crash")}})
	}
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	s, err = open()
	if err != nil {
		return fmt.Errorf("reopen: %w", err)
	}
	defer s.Close()
	c, err := storeContents(s)
	if err != nil {
		return fmt.Errorf("reopen: %w", err)
	}
	if c.last != last+5 || c.stable["after"] != "crash" {
		return fmt.Errorf("reopen: the commit is missing (last %d, want %d)", c.last, last+5)
	}
	return nil
}

func readAll(t *testing.T, path string) []byte {
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}

func equalContents(a, b contents) bool { return reflect.DeepEqual(a, b) }

func describe(got, pre, post contents) string {
	keys := func(c contents) []string {
		var ks []string
		for k := range c.stable {
			ks = append(ks, k)
		}
		slices.Sort(ks)
		return ks
	}
	return fmt.Sprintf("entries %d..%d (before %d..%d, after %d..%d), stable keys %v (before %v, after %v)",
		got.first, got.last, pre.first, pre.last, post.first, post.last, keys(got), keys(pre), keys(post))
}

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
