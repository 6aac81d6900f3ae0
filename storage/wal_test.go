package storage

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/edictlog/edictlog/wire"
)

func openTestWAL(t testing.TB, dir string, segment int64) *WALStore {
	t.Helper()
	s, err := OpenWAL(dir, &WALOptions{SegmentSize: segment, Logger: quietLogger()})
	require.NoError(t, err)
	return s
}

func walContents(t testing.TB, dir string, segment int64) contents {
	t.Helper()
	s := openTestWAL(t, dir, segment)
	defer s.Close()
	c, err := storeContents(s)
	require.NoError(t, err)
	return c
}

func segmentNames(t testing.TB, dir string) []string {
	t.Helper()
	seqs, err := walSegments(dir)
	require.NoError(t, err)
	var names []string
	for _, q := range seqs {
		names = append(names, walSegmentName(q))
	}
	return names
}

// TestWALSegments: records roll into new segments, each reopen rebuilds
// the same state from them, and compaction and a reset remove the
// segments that hold only dead entries, never one that holds a live one.
func TestWALSegments(t *testing.T) {
	dir := t.TempDir()
	const seg = 8 << 10
	s := openTestWAL(t, dir, seg)
	for i := uint64(1); i <= 200; i += 10 {
		require.NoError(t, s.StoreBatch(wire.Batch{Entries: testEntries(i, 10, 200), Stable: map[string][]byte{"k": []byte(fmt.Sprint(i))}}))
	}
	// A record larger than a segment gets one of its own.
	require.NoError(t, s.StoreBatch(wire.Batch{Entries: testEntries(201, 1, 3*seg)}))
	want, err := storeContents(s)
	require.NoError(t, err)
	names := segmentNames(t, dir)
	require.Greater(t, len(names), 5, "200 entries of 200 bytes in 8 KiB segments")
	require.NoError(t, s.Close())
	require.Equal(t, want, walContents(t, dir, seg))

	s = openTestWAL(t, dir, seg)
	require.NoError(t, s.CompactPrefix(150))
	loc := s.locs[0]
	require.NoError(t, s.Close())
	after := segmentNames(t, dir)
	require.Equal(t, walSegmentName(loc.seg.seq), after[0], "the segment holding entry 151 is the oldest left")
	require.Less(t, len(after), len(names))
	c := walContents(t, dir, seg)
	require.Equal(t, uint64(151), c.first)
	require.Equal(t, want.entries[150:], c.entries)
	require.Equal(t, want.stable, c.stable)

	// Everything compacted: only the newest segment is left.
	s = openTestWAL(t, dir, seg)
	require.NoError(t, s.CompactPrefix(201))
	require.NoError(t, s.Close())
	require.Len(t, segmentNames(t, dir), 1)
	c = walContents(t, dir, seg)
	require.Equal(t, uint64(202), c.first)
	require.Equal(t, uint64(201), c.last)
	require.Equal(t, want.lastStamp, c.lastStamp, "the stamp of the last entry outlives it")

	// A reset drops the segments before it.
	s = openTestWAL(t, dir, seg)
	for i := uint64(202); i < 400; i += 10 {
		require.NoError(t, s.StoreBatch(wire.Batch{Entries: testEntries(i, 10, 200)}))
	}
	require.Greater(t, len(segmentNames(t, dir)), 3)
	require.NoError(t, s.StoreBatch(wire.Batch{Reset: &wire.Position{Index: 1000, Stamp: testStamp(1000)}}))
	require.NoError(t, s.Close())
	require.Len(t, segmentNames(t, dir), 1)
	c = walContents(t, dir, seg)
	require.Equal(t, uint64(1001), c.first)
	require.Equal(t, uint64(1000), c.last)
	require.True(t, c.lastStamp.Equal(testStamp(1000)))
}

// TestWALLocked: a second open of the same folder fails while the first
// holds it.
func TestWALLocked(t *testing.T) {
	dir := t.TempDir()
	s := openTestWAL(t, dir, 0)
	defer s.Close()
	_, err := OpenWAL(dir, &WALOptions{Timeout: 50e6})
	require.ErrorContains(t, err, "another process")
}

// walImage is a folder's files (LOCK aside).
type walImage map[string][]byte

func readWALImage(t testing.TB, dir string) walImage {
	t.Helper()
	des, err := os.ReadDir(dir)
	require.NoError(t, err)
	img := walImage{}
	for _, de := range des {
		if de.Name() == walLockName {
			continue
		}
		img[de.Name()] = readAll(t.(*testing.T), filepath.Join(dir, de.Name()))
	}
	return img
}

func (img walImage) write(t testing.TB, dir string) {
	t.Helper()
	require.NoError(t, os.RemoveAll(dir))
	require.NoError(t, os.MkdirAll(dir, 0o750))
	for name, b := range img {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), b, 0o640))
	}
}

// walCrashImages returns up to n images of what a power loss during the
// commit from pre to post can leave, in the order the store makes things
// durable: the record's sectors (any subset, as written by one pwrite
// before one fdatasync), or a new segment (absent, a partial temporary
// file, or renamed into place whole), then the removals of dead segments,
// oldest first, each synced before the next.
func walCrashImages(rng *rand.Rand, pre, post walImage, n int) []crashImage2 {
	var added, removed, changed []string
	for name := range post {
		if old, ok := pre[name]; !ok {
			added = append(added, name)
		} else if !bytes.Equal(old, post[name]) {
			changed = append(changed, name)
		}
	}
	for name := range pre {
		if _, ok := post[name]; !ok {
			removed = append(removed, name)
		}
	}
	slices.Sort(removed)
	type sectorRef struct {
		file string
		off  int
	}
	var sectors []sectorRef
	for _, name := range changed {
		a, b := pre[name], post[name]
		for off := 0; off < max(len(a), len(b)); off += sector {
			if !bytes.Equal(page(a, off/sector, sector), page(b, off/sector, sector)) {
				sectors = append(sectors, sectorRef{name, off})
			}
		}
	}
	var out []crashImage2
	full := func() walImage {
		img := maps.Clone(pre)
		for _, name := range changed {
			img[name] = post[name]
		}
		for _, name := range added {
			img[name] = post[name]
		}
		return img
	}
	// The record's sectors: any subset.
	for range n / 2 {
		img := maps.Clone(pre)
		var m []int
		for i, sr := range sectors {
			if rng.IntN(2) == 0 {
				continue
			}
			b := bytes.Clone(img[sr.file])
			copy(b[sr.off:], page(post[sr.file], sr.off/sector, sector))
			img[sr.file] = b
			m = append(m, i)
		}
		what := fmt.Sprintf("sectors %v of %d", m, len(sectors))
		if len(added) > 0 && rng.IntN(2) == 0 {
			// The new segment under its temporary name, part written.
			b := post[added[0]]
			img[walTempName] = append(bytes.Clone(b[:rng.IntN(len(b))]), make([]byte, 0)...)
			what += ", a partial " + walTempName
		}
		out = append(out, crashImage2{img: img, what: what, complete: len(m) == len(sectors) && len(added) == 0 && len(removed) == 0})
	}
	// Everything written, some of the removals done.
	for k := 0; k <= len(removed); k++ {
		img := full()
		for _, name := range removed[:k] {
			delete(img, name)
		}
		out = append(out, crashImage2{img: img, what: fmt.Sprintf("written, %d of %d removals", k, len(removed)), complete: k == len(removed)})
	}
	return out
}

type crashImage2 struct {
	img      walImage
	what     string
	complete bool
}

// TestWALPowerLoss crashes every commit of random histories at the places
// walCrashImages lists, and requires every image to open holding the
// state before the commit or after it (after it when everything arrived),
// and then to take a commit.
func TestWALPowerLoss(t *testing.T) {
	seeds := uint64(3)
	if env := os.Getenv("EDICTLOG_POWERLOSS"); env != "" {
		_, err := fmt.Sscanf(env, "%d", &seeds)
		require.NoError(t, err, "EDICTLOG_POWERLOSS")
	}
	for seed := uint64(1); seed <= seeds; seed++ {
		failures, images, torn := walPowerLoss(t, seed, 120, 8)
		t.Logf("seed %d: %d crash images, %d with a record cut short", seed, images, torn)
		require.Empty(t, failures, "seed %d", seed)
		require.Positive(t, torn, "seed %d: no image had a record cut short", seed)
	}
}

func walPowerLoss(t *testing.T, seed uint64, commits, perCommit int) (failures []string, images, torn int) {
	const seg = 8 << 10
	rng := rand.New(rand.NewPCG(seed, 11))
	dir := filepath.Join(t.TempDir(), "wal")
	s := openTestWAL(t, dir, seg)
	defer func() { s.Close() }()
	next := uint64(1)
	imgDir := filepath.Join(t.TempDir(), "image")
	for i := range commits {
		pre := readWALImage(t, dir)
		preC, err := storeContents(s)
		require.NoError(t, err)
		var what string
		if rng.IntN(25) == 0 {
			next += uint64(rng.IntN(40))
			require.NoError(t, s.StoreBatch(wire.Batch{Reset: &wire.Position{Index: next, Stamp: testStamp(next)}}))
			next++
			what = fmt.Sprintf("reset to %d", next-1)
		} else {
			what = randomCommit(t, rng, s, &next)
		}
		post := readWALImage(t, dir)
		postC, err := storeContents(s)
		require.NoError(t, err)
		for _, img := range walCrashImages(rng, pre, post, perCommit) {
			images++
			name := fmt.Sprintf("seed %d commit %d (%s), %s", seed, i, what, img.what)
			img.img.write(t, imgDir)
			got, tb, err := func() (contents, int64, error) {
				s, err := OpenWAL(imgDir, &WALOptions{SegmentSize: seg, Logger: quietLogger()})
				if err != nil {
					return contents{}, 0, err
				}
				defer s.Close()
				st, err := s.Stats()
				if err != nil {
					return contents{}, 0, err
				}
				c, err := storeContents(s)
				return c, st.TornBytes, err
			}()
			if tb > 0 {
				torn++
			}
			switch {
			case err != nil:
				failures = append(failures, fmt.Sprintf("%s: does not open: %v", name, err))
			case img.complete && !equalContents(got, postC):
				failures = append(failures, fmt.Sprintf("%s: everything arrived, yet the commit is not there: %s", name, describe(got, preC, postC)))
			case equalContents(got, postC), equalContents(got, preC):
			default:
				failures = append(failures, fmt.Sprintf("%s: opened holding neither the state before the commit nor after it: %s", name, describe(got, preC, postC)))
			}
			if err == nil && images%8 == 1 {
				if err := walCommitAndReopen(imgDir, seg); err != nil {
					failures = append(failures, fmt.Sprintf("%s: opened, but then: %v", name, err))
				}
			}
			if len(failures) > 0 {
				return failures, images, torn
			}
		}
	}
	return failures, images, torn
}

func walCommitAndReopen(dir string, seg int64) error {
	return commitAndReopenWith(func() (reopened, error) {
		return OpenWAL(dir, &WALOptions{SegmentSize: seg, Logger: quietLogger()})
	})
}

// TestWALDamage damages acknowledged records and requires Open (or the
// read) to report it, naming the file, or to hold exactly what was
// stored. Damage past the last record of the newest segment looks like a
// write cut short, and is cleared; damage to the last record itself may
// make Open drop it, as a write cut short: it then holds the state before.
func TestWALDamage(t *testing.T) {
	const seg = 8 << 10
	build := func(t *testing.T) (dir string, want, prev contents) {
		dir = filepath.Join(t.TempDir(), "wal")
		s := openTestWAL(t, dir, seg)
		defer s.Close()
		for i := uint64(1); i <= 100; i += 5 {
			require.NoError(t, s.StoreBatch(wire.Batch{Entries: testEntries(i, 5, 150), Stable: map[string][]byte{"k": []byte(fmt.Sprint(i))}}))
		}
		require.NoError(t, s.CompactPrefix(12))
		var err error
		prev, err = storeContents(s)
		require.NoError(t, err)
		require.NoError(t, s.StoreBatch(wire.Batch{Entries: testEntries(101, 2, 150), Delete: []string{"k"}}))
		want, err = storeContents(s)
		require.NoError(t, err)
		return dir, want, prev
	}
	dir, want, prev := build(t)
	names := segmentNames(t, dir)
	require.Greater(t, len(names), 2)
	pristine := readWALImage(t, dir)
	check := func(t *testing.T, what string) (reported, dropped bool) {
		s, err := OpenWAL(dir, &WALOptions{SegmentSize: seg, Logger: quietLogger()})
		if err == nil {
			var c contents
			c, err = storeContents(s)
			s.Close()
			if err == nil {
				if equalContents(c, prev) && !equalContents(c, want) {
					return false, true
				}
				require.True(t, equalContents(c, want), "%s: opened with different contents: %s", what, describe(c, prev, want))
				return false, false
			}
		}
		require.ErrorIs(t, err, ErrCorrupt, "%s", what)
		require.Contains(t, err.Error(), dir, "%s: the error names the store", what)
		return true, false
	}

	t.Run("bit flips", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(1, 2))
		reported, dropped := 0, 0
		for _, name := range names {
			b := pristine[name]
			used := lastNonZero(b)
			for range 150 {
				off := rng.IntN(used)
				img := maps.Clone(pristine)
				d := bytes.Clone(b)
				d[off] ^= 1 << rng.IntN(8)
				img[name] = d
				img.write(t, dir)
				r, dr := check(t, fmt.Sprintf("%s byte %d", name, off))
				if r {
					reported++
				}
				if dr {
					dropped++
					require.Equal(t, names[len(names)-1], name, "only the newest segment's last record can be dropped")
				}
			}
		}
		t.Logf("%d flips reported, %d dropped the last record", reported, dropped)
		require.Positive(t, reported)
	})
	t.Run("a sector zeroed before a record", func(t *testing.T) {
		img := maps.Clone(pristine)
		newest := names[len(names)-1]
		d := bytes.Clone(img[newest])
		require.Greater(t, lastNonZero(d), 2*sector, "the newest segment holds more than a sector")
		copy(d[sector:2*sector], make([]byte, sector))
		img[newest] = d
		img.write(t, dir)
		r, _ := check(t, "zeroed sector")
		require.True(t, r)
	})
	t.Run("segment truncated", func(t *testing.T) {
		img := maps.Clone(pristine)
		img[names[0]] = img[names[0]][:seg/2]
		img.write(t, dir)
		r, _ := check(t, "truncated")
		require.True(t, r)
	})
	t.Run("segment missing", func(t *testing.T) {
		img := maps.Clone(pristine)
		delete(img, names[1])
		img.write(t, dir)
		r, _ := check(t, "missing")
		require.True(t, r)
	})
	t.Run("oldest segment missing", func(t *testing.T) {
		// Its entries are live: the next segment's checkpoint says the log
		// starts before its first entry.
		img := maps.Clone(pristine)
		delete(img, names[0])
		img.write(t, dir)
		r, _ := check(t, "oldest missing")
		require.True(t, r)
	})
	t.Run("an entry read back is checked", func(t *testing.T) {
		pristine.write(t, dir)
		s := openTestWAL(t, dir, seg)
		defer s.Close()
		l := s.locs[3]
		f, err := os.OpenFile(l.seg.path, os.O_RDWR, 0)
		require.NoError(t, err)
		_, err = f.WriteAt([]byte{0xff}, l.off+int64(l.n)-1)
		require.NoError(t, err)
		f.Close()
		_, err = s.Entries(s.b.first, s.b.last+1, 0)
		require.ErrorIs(t, err, ErrCorrupt)
		require.Contains(t, err.Error(), l.seg.path)
	})
}

// TestWALTornTail: a write cut short at the end of the newest segment is
// cleared at open, counted, and the store goes on from the record before.
func TestWALTornTail(t *testing.T) {
	dir := t.TempDir()
	s := openTestWAL(t, dir, 0)
	require.NoError(t, s.StoreBatch(wire.Batch{Entries: testEntries(1, 3, 100)}))
	before, err := storeContents(s)
	require.NoError(t, err)
	tail := s.tail
	require.NoError(t, s.StoreBatch(wire.Batch{Entries: testEntries(4, 20, 100)}))
	path := s.segments[0].path
	require.NoError(t, s.Close())
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	// The record's second sector never arrived.
	copy(b[tail+sector:], make([]byte, sector))
	require.NoError(t, os.WriteFile(path, b, 0o640))
	s = openTestWAL(t, dir, 0)
	st, err := s.Stats()
	require.NoError(t, err)
	require.Positive(t, st.TornBytes)
	c, err := storeContents(s)
	require.NoError(t, err)
	require.Equal(t, before, c)
	require.NoError(t, s.Close())
	b, err = os.ReadFile(path)
	require.NoError(t, err)
	require.Zero(t, lastNonZero(b[tail:]), "the torn record is cleared")
}

// FuzzWALRecord: decoding never panics, says where it failed, and what
// decodes as a batch re-encodes to the same bytes.
func FuzzWALRecord(f *testing.F) {
	var salt [walSaltSize]byte
	b := wire.Batch{Entries: testEntries(5, 2, 20), TruncateFrom: 5, Stable: map[string][]byte{"a": []byte("b")}, Delete: []string{"c"}}
	body, _, err := appendBatch(nil, &b, nil)
	require.NoError(f, err)
	f.Add(body)
	body, _, err = appendBatch(nil, &wire.Batch{Reset: &wire.Position{Index: 9, Stamp: testStamp(9)}}, nil)
	require.NoError(f, err)
	f.Add(body)
	body, err = appendCompact(nil, 7, testStamp(7))
	require.NoError(f, err)
	f.Add(body)
	body, err = appendCheckpoint(nil, salt[:], 3, 1<<20, bounds{first: 4, last: 9, base: testStamp(3)}, map[string][]byte{"x": {1}})
	require.NoError(f, err)
	f.Add(body)
	f.Fuzz(func(t *testing.T, body []byte) {
		rec, err := decodeWALRecord(body)
		if err != nil {
			if !strings.Contains(err.Error(), "record") && !strings.Contains(err.Error(), "at byte") {
				t.Fatalf("error does not say where: %v", err)
			}
			return
		}
		if rec.kind != walBatch {
			return
		}
		wb := wire.Batch{Reset: rec.reset, TruncateFrom: rec.truncateFrom, Stable: rec.set, Delete: rec.del}
		for _, e := range rec.entries {
			d, err := wire.DecodeEntry(body[e.off : e.off+e.len])
			require.NoError(t, err)
			wb.Entries = append(wb.Entries, d)
		}
		again, _, err := appendBatch(nil, &wb, nil)
		require.NoError(t, err)
		require.Equal(t, body, again, "a record has one encoding")
	})
}

// TestWALFullDisk: a segment that cannot be allocated for want of space
// fails the write that needed it, with the cause, and leaves the store as
// it was before that write, with no temporary segment behind. It mounts a
// small tmpfs, so it runs only as root.
func TestWALFullDisk(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs")
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", mnt).Run() })
	dir := filepath.Join(mnt, "wal")
	const seg = 4 << 20
	s := openTestWAL(t, dir, seg)
	next := uint64(1)
	var err error
	for ; err == nil && next < 100000; next += 10 {
		err = s.StoreBatch(wire.Batch{Entries: testEntries(next, 10, 1000)})
	}
	require.Error(t, err, "a second 4 MiB segment does not fit in 6 MiB")
	require.ErrorIs(t, err, syscall.ENOSPC)
	last := next - 11 // the last batch acknowledged
	require.Error(t, s.StoreBatch(wire.Batch{Entries: testEntries(last+1, 1, 10)}), "a store whose write failed refuses more until reopened")
	require.NoError(t, s.Close())
	_, statErr := os.Stat(filepath.Join(dir, walTempName))
	require.ErrorIs(t, statErr, os.ErrNotExist, "no temporary segment left behind")
	c := walContents(t, dir, seg)
	require.Equal(t, last, c.last, "every acknowledged batch, nothing of the failed one")
}

// TestWALRemovalFailureIsNotTheWrites: a compaction whose record is
// durable stands even when the segments it killed cannot be removed (here
// the folder is made immutable): CompactPrefix succeeds, the segments
// stay, and the next compaction removes them. It needs root and chattr.
func TestWALRemovalFailureIsNotTheWrites(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for chattr +i")
	}
	if _, err := exec.LookPath("chattr"); err != nil {
		t.Skip("no chattr")
	}
	dir := filepath.Join(t.TempDir(), "wal")
	const seg = 8 << 10
	s := openTestWAL(t, dir, seg)
	defer s.Close()
	for i := uint64(1); i <= 200; i += 10 {
		require.NoError(t, s.StoreBatch(wire.Batch{Entries: testEntries(i, 10, 200)}))
	}
	before := segmentNames(t, dir)
	require.Greater(t, len(before), 3)
	if out, err := exec.Command("chattr", "+i", dir).CombinedOutput(); err != nil {
		t.Skipf("chattr +i: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("chattr", "-i", dir).Run() })
	require.NoError(t, s.CompactPrefix(150), "the compaction's record is durable: its removals are not its outcome")
	require.Equal(t, before, segmentNames(t, dir), "nothing could be removed")
	first, err := s.FirstIndex()
	require.NoError(t, err)
	require.Equal(t, uint64(151), first)
	require.NoError(t, exec.Command("chattr", "-i", dir).Run())
	require.NoError(t, s.CompactPrefix(160))
	require.Less(t, len(segmentNames(t, dir)), len(before), "the next compaction removes them")
	require.NoError(t, s.Close())
	c := walContents(t, dir, seg)
	require.Equal(t, uint64(161), c.first)
	require.Equal(t, uint64(200), c.last)
}

// TestWALNegativeControls turns off, one at a time, the two checks that
// tell a write cut short from damage, and requires the tests to notice.
func TestWALNegativeControls(t *testing.T) {
	t.Run("no clearing of a record cut short", func(t *testing.T) {
		clearTornTail = false
		defer func() { clearTornTail = true }()
		failures, _, _ := walPowerLoss(t, 1, 120, 8)
		require.NotEmpty(t, failures, "the power-loss test cannot fail without it")
		t.Logf("caught: %s", failures[0])
	})
	t.Run("no scan past a failed record", func(t *testing.T) {
		// Acknowledged records after a zeroed sector: damage, which
		// without the scan looks like a write cut short and is dropped.
		dir := t.TempDir()
		s := openTestWAL(t, dir, 0)
		for i := uint64(1); i <= 60; i += 5 {
			require.NoError(t, s.StoreBatch(wire.Batch{Entries: testEntries(i, 5, 150)}))
		}
		path := s.segments[0].path
		require.NoError(t, s.Close())
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		copy(b[2*sector:3*sector], make([]byte, sector))
		require.NoError(t, os.WriteFile(path, b, 0o640))
		_, err = OpenWAL(dir, &WALOptions{Logger: quietLogger()})
		require.ErrorIs(t, err, ErrCorrupt, "with the scan")
		scanPastFailure = false
		defer func() { scanPastFailure = true }()
		s2, err := OpenWAL(dir, &WALOptions{Logger: quietLogger()})
		require.NoError(t, err, "without it the damage is taken for a crash")
		last, _ := s2.LastIndex()
		s2.Close()
		t.Logf("caught: without the scan, Open drops acknowledged entries %d..60", last+1)
		require.Less(t, last, uint64(60))
	})
}
