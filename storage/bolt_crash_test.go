package storage

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edictlog/edictlog/wire"
)

// Crashes at every step of every BoltStore write.
//
// A write is one bbolt transaction: bbolt writes the transaction's dirty
// pages in ascending page order, then its meta page, and the store then
// fdatasyncs once (BoltStore.commit) and, past the pages in use, may
// zero-fill ahead (prealloc.go). A process killed at any moment leaves in
// the page cache, and so in the file, exactly the writes made before it:
// a prefix of that order. So the crash images of a transaction are built
// from the file before and after it: every prefix of its page writes
// (killed before each write), the whole (killed after the meta page, or
// during the zero-fill, the file then cut anywhere past the used pages),
// and, for a power loss, the meta page with every shorter prefix (it may
// reach the disk first) and random subsets with torn pages and a short file
// (crashImages). Every image must open; an image without the meta page must
// hold the state before the transaction, a complete one the state after it,
// and any other one of the two.
//
// crash_test.go kills a real process at random moments, which checks this
// model of what a kill leaves; powerloss_test.go crashes random histories.
// This test goes through every kind of write in turn, each of CompactPrefix's
// transactions separately.

// boltCrashStep is one write to crash.
type boltCrashStep struct {
	name string
	do   func(t *testing.T, s *BoltStore)
}

func boltCrashSteps() []boltCrashStep {
	batch := func(b wire.Batch) func(*testing.T, *BoltStore) {
		return func(t *testing.T, s *BoltStore) { require.NoError(t, s.StoreBatch(b)) }
	}
	val := func(n int, c byte) []byte { return bytes.Repeat([]byte{c}, n) }
	steps := []boltCrashStep{
		{"append with stable keys", batch(wire.Batch{Entries: testEntries(1, 30, 300),
			Stable: map[string][]byte{"grant/1": val(40, 1), "grant/2": val(300, 2)}})},
		{"append one entry", batch(wire.Batch{Entries: testEntries(31, 1, 50)})},
		{"set and delete stable keys", batch(wire.Batch{Stable: map[string][]byte{"grant/3": val(60, 3)}, Delete: []string{"grant/1"}})},
		{"Set", func(t *testing.T, s *BoltStore) { require.NoError(t, s.Set("grant/4", val(20, 4))) }},
		{"Delete", func(t *testing.T, s *BoltStore) { require.NoError(t, s.Delete("grant/3")) }},
		{"truncate", batch(wire.Batch{TruncateFrom: 29})},
		{"truncate and append", batch(wire.Batch{TruncateFrom: 25, Entries: testEntries(25, 16, 200),
			Stable: map[string][]byte{"grant/1": val(10, 5)}})},
		{"bump the incarnation", func(t *testing.T, s *BoltStore) {
			_, err := s.BumpIncarnation()
			require.NoError(t, err)
		}},
	}
	// CompactPrefix is one transaction per chunk (CompactChunk 4 here);
	// each is crashed on its own.
	for _, upTo := range []uint64{4, 8, 12, 14} {
		steps = append(steps, boltCrashStep{fmt.Sprintf("compaction step to %d", upTo), func(t *testing.T, s *BoltStore) {
			done, err := s.compactStep(14)
			require.NoError(t, err)
			first, err := s.FirstIndex()
			require.NoError(t, err)
			require.Equal(t, upTo+1, first)
			require.Equal(t, upTo == 14, done)
		}})
	}
	return append(steps,
		boltCrashStep{"reset to a snapshot", batch(wire.Batch{Reset: &wire.Position{Index: 100, Stamp: testStamp(100)},
			Stable: map[string][]byte{"grant/2": val(30, 6)}})},
		boltCrashStep{"append after a reset", batch(wire.Batch{Entries: testEntries(101, 5, 100)})},
		boltCrashStep{"reset and append", batch(wire.Batch{Reset: &wire.Position{Index: 200, Stamp: testStamp(200)},
			Entries: testEntries(201, 10, 100)})},
		// Overflow pages, the file growing past the zero-filled region,
		// and a zero-fill after the commit.
		boltCrashStep{"append that grows the file", batch(wire.Batch{Entries: testEntries(211, 20, 5000)})},
		boltCrashStep{"append after growing", batch(wire.Batch{Entries: testEntries(231, 3, 100)})},
		boltCrashStep{"truncate to empty and append", batch(wire.Batch{TruncateFrom: 201, Entries: testEntries(201, 2, 100)})},
	)
}

func TestBoltCrashAtEveryStep(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	dir := t.TempDir()
	path := filepath.Join(dir, "log.db")
	s, err := OpenBolt(path, &BoltOptions{CompactChunk: 4, Preallocate: 64 << 10, Logger: quietLogger()})
	require.NoError(t, err)
	defer s.Close()
	total := 0
	for _, st := range boltCrashSteps() {
		pre := readAll(t, path)
		preC, err := storeContents(s)
		require.NoError(t, err)
		st.do(t, s)
		post := readAll(t, path)
		postC, err := storeContents(s)
		require.NoError(t, err)
		require.False(t, equalContents(preC, postC), "%s changed nothing", st.name)
		ps := s.db.Info().PageSize
		imgs := boltStepImages(rng, pre, post, ps)
		for _, img := range imgs {
			name := fmt.Sprintf("%s: %s", st.name, img.what)
			ip := filepath.Join(dir, "image.db")
			require.NoError(t, os.WriteFile(ip, img.b, 0o600))
			got, rb, err := readContentsRolledBack(ip)
			if !assert.NoError(t, err, "%s: does not open", name) {
				continue
			}
			isPre, isPost := equalContents(got, preC), equalContents(got, postC) && rb == 0
			switch img.want {
			case wantBefore:
				assert.True(t, isPre, "%s: must hold the state before the write: %s", name, describe(got, preC, postC))
			case wantAfter:
				assert.True(t, isPost, "%s: must hold the state after the write (rolled back %d): %s", name, rb, describe(got, preC, postC))
			default:
				assert.True(t, isPre || isPost, "%s: holds neither the state before the write nor after it (rolled back %d): %s", name, rb, describe(got, preC, postC))
			}
			if img.writeAfter {
				assert.NoError(t, commitAndReopen(ip), "%s: opened, but then", name)
			}
		}
		total += len(imgs)
	}
	t.Logf("%d crash images of %d writes", total, len(boltCrashSteps()))
}

type wantState int

const (
	wantEither wantState = iota
	wantBefore
	wantAfter
)

type boltStepImage struct {
	b    []byte
	what string
	want wantState
	// writeAfter asks to show that the store opened from the image takes
	// a write and reopens holding it (commitAndReopen).
	writeAfter bool
}

// boltStepImages returns the crash images of the transaction that turned
// the file pre into post (see the top of this file).
func boltStepImages(rng *rand.Rand, pre, post []byte, ps int) []boltStepImage {
	changed := changedPages(pre, post, ps)
	var pages, meta []int // in the order bbolt writes them: pages ascending, then the meta page
	for _, p := range changed {
		if p < 2 {
			meta = append(meta, p)
		} else {
			pages = append(pages, p)
		}
	}
	with := func(arrived []int) []byte {
		b := bytes.Clone(pre)
		if len(post) > len(b) {
			b = append(b, make([]byte, len(post)-len(b))...)
		}
		for _, p := range arrived {
			copy(b[p*ps:], page(post, p, ps))
		}
		return b
	}
	var out []boltStepImage
	for j := 0; j <= len(pages); j++ {
		out = append(out, boltStepImage{with(pages[:j]), fmt.Sprintf("killed after %d of %d page writes", j, len(pages)), wantBefore, false})
	}
	out = append(out, boltStepImage{with(changed), "killed after the meta page", wantAfter, true})
	// Killed during a zero-fill after the commit: the file ends anywhere
	// past the pages in use.
	if used := usedSize(post, ps); len(post) > used {
		for _, end := range []int{used, used + ps, (used + len(post)) / 2 / ps * ps} {
			out = append(out, boltStepImage{with(changed)[:end], fmt.Sprintf("killed after the meta page, the file cut at %d of %d bytes past the pages in use", end, len(post)), wantAfter, false})
		}
	}
	for j := range len(pages) {
		out = append(out, boltStepImage{with(append(pages[:j:j], meta...)), fmt.Sprintf("power loss: the meta page and %d of %d pages arrived", j, len(pages)), wantBefore, j == 0})
	}
	for _, img := range crashImages(rng, pre, post, changed, ps, 6) {
		w := wantEither
		if img.complete {
			w = wantAfter
		}
		out = append(out, boltStepImage{img.b, "power loss: " + img.what, w, false})
	}
	return out
}

// usedSize is the size of the pages in use in the bbolt file b: up to the
// high-water mark of its newer meta page.
func usedSize(b []byte, ps int) int {
	r := bytes.NewReader(b)
	m0, _, _ := readMeta(r, 0)
	m1, _, _ := readMeta(r, int64(ps))
	if m1.txid > m0.txid {
		m0 = m1
	}
	return int(m0.hwm) * ps
}

// TestBoltCreateCrash stops the creation of a store file at every step:
// the file is there exactly when the link was made, and the next open
// creates it or finds the complete empty store.
func TestBoltCreateCrash(t *testing.T) {
	create := func(path string) func() {
		return func() {
			s, err := OpenBolt(path, nil)
			require.NoError(t, err)
			require.NoError(t, s.Close())
		}
	}
	all, _ := runCrashingAt(-1, create(filepath.Join(t.TempDir(), "log.db")))
	require.Equal(t, []string{
		"create log.db: temporary file",
		"create log.db: initialise",
		"create log.db: link",
		"create log.db: fsync folder",
		"create log.db: remove temporary file",
	}, all)
	for k := range all {
		path := filepath.Join(t.TempDir(), "log.db")
		steps, at := runCrashingAt(k, create(path))
		require.Equal(t, all[k], at)
		_, err := os.Stat(path)
		require.Equal(t, slices.Contains(steps, "create log.db: link"), err == nil, "the file exists after a crash before %q", at)
		c, err := readContents(path)
		require.NoError(t, err, "open after a crash before %q", at)
		require.Equal(t, uint64(1), c.first)
		require.Equal(t, uint64(0), c.last)
		require.Empty(t, c.stable)
		require.NoError(t, commitAndReopen(path), "after a crash before %q", at)
	}
}

// TestBoltRollbackCrash stops Open's rollback of a torn transaction at
// every step: the next open still holds the transaction before it. And
// when the transaction before it does not verify either (damage, not a
// crash), every step of the rollback and of putting the file back leaves a
// file that is refused.
func TestBoltRollbackCrash(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "log.db")
	s, err := OpenBolt(path, &BoltOptions{Logger: quietLogger()})
	require.NoError(t, err)
	require.NoError(t, s.StoreBatch(wire.Batch{Entries: testEntries(1, 20, 200)}))
	pre := readAll(t, path)
	preC, err := storeContents(s)
	require.NoError(t, err)
	require.NoError(t, s.StoreBatch(wire.Batch{Entries: testEntries(21, 20, 200)}))
	post := readAll(t, path)
	ps := s.db.Info().PageSize
	require.NoError(t, s.Close())

	// The meta page arrived, one of the pages it points to did not.
	changed := changedPages(pre, post, ps)
	torn := bytes.Clone(post)
	lost := changed[len(changed)-1]
	require.GreaterOrEqual(t, lost, 2)
	copy(torn[lost*ps:], page(pre, lost, ps))
	// The same, and an entry of the transaction before it damaged.
	damaged := bytes.Clone(torn)
	i := bytes.Index(damaged, testEntries(3, 1, 200)[0].Data)
	require.Positive(t, i)
	damaged[i+50] ^= 0xff

	for _, c := range []struct {
		name    string
		img     []byte
		corrupt bool
	}{{"torn", torn, false}, {"torn and damaged", damaged, true}} {
		open := func(ip string) func() {
			return func() {
				s, err := OpenBolt(ip, &BoltOptions{Logger: quietLogger()})
				if err == nil {
					s.Close()
				}
			}
		}
		ip := filepath.Join(dir, "image.db")
		require.NoError(t, os.WriteFile(ip, c.img, 0o600))
		all, _ := runCrashingAt(-1, open(ip))
		want := []string{"roll back: overwrite the newer meta", "roll back: reopen"}
		if c.corrupt {
			want = append(want, "roll back: restore the newer meta")
		}
		require.Equal(t, want, all, c.name)
		for k := range all {
			require.NoError(t, os.WriteFile(ip, c.img, 0o600))
			_, at := runCrashingAt(k, open(ip))
			require.Equal(t, all[k], at)
			got, err := readContents(ip)
			if c.corrupt {
				require.ErrorIs(t, err, ErrCorrupt, "%s, after a crash before %q", c.name, at)
				continue
			}
			require.NoError(t, err, "%s, after a crash before %q", c.name, at)
			require.True(t, equalContents(got, preC), "%s, after a crash before %q: %s", c.name, at, describe(got, preC, preC))
			require.NoError(t, commitAndReopen(ip))
		}
	}
}
