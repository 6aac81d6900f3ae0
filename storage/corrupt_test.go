package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
)

// These tests damage real bbolt files and require that opening and reading
// them either fails with an error naming the file and wrapping ErrCorrupt,
// or returns exactly what was stored: never a panic, never different data.
// One exception, by design (bolt_rollback.go): damage confined to the pages
// of the newest transaction looks like a commit cut short by a crash, and
// Open may roll that transaction back; it must then hold exactly what the
// transaction before it held, and say so in Stats.RolledBack.

func testStamp(seq uint64) edict.Stamp {
	return edict.Stamp{Epoch: 1, Counter: seq, QT: edict.QT{
		{Process: 1, T: edict.Time{Incarnation: 1, Nanos: int64(seq)}},
		{Process: 2, T: edict.Time{Incarnation: 1, Nanos: int64(seq) + 1}},
	}}
}

func testEntries(from uint64, n, size int) []wire.Entry {
	es := make([]wire.Entry, n)
	for i := range es {
		idx := from + uint64(i)
		d := bytes.Repeat([]byte{byte(idx)}, size)
		copy(d, fmt.Sprint(idx))
		es[i] = wire.Entry{Index: idx, Reign: testStamp(1), Stamp: testStamp(idx), Kind: wire.EntryCommand, Data: d}
	}
	return es
}

// contents is everything a store holds, for comparison.
type contents struct {
	first, last uint64
	lastStamp   edict.Stamp
	entries     []wire.Entry
	stable      map[string]string
}

func readContents(path string) (c contents, err error) {
	c, _, err = readContentsRolledBack(path)
	return c, err
}

// readContentsRolledBack is readContents that also returns the transaction
// Open rolled back, if any.
func readContentsRolledBack(path string) (c contents, rolledBack uint64, err error) {
	s, err := OpenBolt(path, &BoltOptions{Timeout: 100 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return c, 0, err
	}
	defer s.Close()
	st, err := s.Stats()
	if err != nil {
		return c, 0, err
	}
	c, err = storeContents(s)
	return c, st.RolledBack, err
}

// contentStore is what storeContents reads.
type contentStore interface {
	Last() (wire.Position, error)
	FirstIndex() (uint64, error)
	Entries(lo, hi uint64, maxBytes int) ([]wire.Entry, error)
	Keys(prefix string) ([]string, error)
	Get(key string) ([]byte, error)
}

func storeContents(s contentStore) (c contents, err error) {
	p, err := s.Last()
	if err != nil {
		return c, err
	}
	c.last, c.lastStamp = p.Index, p.Stamp
	if c.first, err = s.FirstIndex(); err != nil {
		return c, err
	}
	if c.entries, err = s.Entries(c.first, c.last+1, 0); err != nil {
		return c, err
	}
	keys, err := s.Keys("")
	if err != nil {
		return c, err
	}
	c.stable = map[string]string{}
	for _, k := range keys {
		v, err := s.Get(k)
		if err != nil {
			return c, err
		}
		c.stable[k] = string(v)
	}
	return c, nil
}

// damageable is a store file to damage, what it holds, and what it held
// before its last transaction.
type damageable struct {
	path       string
	want, prev contents
}

// buildDamageable writes a store with several leaf and branch pages, a
// stable bucket too big to be inline, and free pages holding older
// versions of live pages (from truncation, compaction and rewrites), so
// that a damaged pointer can land on plausible stale data. Its last
// transaction appends and sets a key.
func buildDamageable(t *testing.T) damageable {
	t.Helper()
	path := filepath.Join(t.TempDir(), "log.db")
	s, err := OpenBolt(path, &BoltOptions{CompactChunk: 10})
	require.NoError(t, err)
	_, err = s.BumpIncarnation()
	require.NoError(t, err)
	next := uint64(1)
	for i := 0; i < 40; i++ {
		n := 1 + i%9
		require.NoError(t, s.StoreBatch(wire.Batch{Entries: testEntries(next, n, 40+i*7), Stable: map[string][]byte{
			fmt.Sprintf("k%02d", i%25): bytes.Repeat([]byte{byte(i)}, 90),
		}}))
		next += uint64(n)
		if i%10 == 9 {
			require.NoError(t, s.StoreBatch(wire.Batch{TruncateFrom: next - 3}))
			next -= 3
		}
	}
	require.NoError(t, s.CompactPrefix(30))
	d := damageable{path: path}
	d.prev, err = storeContents(s)
	require.NoError(t, err)
	require.NoError(t, s.StoreBatch(wire.Batch{Entries: testEntries(next, 3, 60), Stable: map[string][]byte{"final": []byte("yes")}}))
	require.NoError(t, s.Close())
	d.want, err = readContents(path)
	require.NoError(t, err)
	require.NotEqual(t, d.prev, d.want)
	return d
}

func copyFile(t *testing.T, src, dst string) {
	b, err := os.ReadFile(src)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(dst, b, 0o600))
}

// outcome is what opening a damaged file did.
type outcome int

const (
	intact     outcome = iota // the damage changed nothing that is read
	reported                  // an ErrCorrupt error naming the file
	rolledBack                // taken for a torn last commit and rolled back
)

// requireIntactOrReported opens path and requires an ErrCorrupt error that
// names it, exactly d.want, or — rolled back, and saying so — exactly
// d.prev. It returns which.
func requireIntactOrReported(t *testing.T, path string, d damageable, what string) outcome {
	t.Helper()
	got, rb, err := readContentsRolledBack(path)
	if err != nil {
		require.ErrorIs(t, err, ErrCorrupt, "%s: %v", what, err)
		require.Contains(t, err.Error(), path, what)
		return reported
	}
	if rb != 0 {
		require.Equal(t, d.prev, got, "%s: rolled back transaction %d, but the data is not the transaction before it", what, rb)
		return rolledBack
	}
	require.Equal(t, d.want, got, "%s: damage went unnoticed and changed the data", what)
	return intact
}

func usedBytes(t *testing.T, path string) (int, int64) {
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	fi, err := f.Stat()
	require.NoError(t, err)
	info, err := checkBoltFile(path, f, fi.Size())
	require.NoError(t, err)
	return info.pageSize, int64(info.hwm) * int64(info.pageSize)
}

func TestBoltTruncatedFile(t *testing.T) {
	d := buildDamageable(t)
	ps, used := usedBytes(t, d.path)
	full, err := os.ReadFile(d.path)
	require.NoError(t, err)
	require.Greater(t, used, int64(8*ps), "the test needs a file of several pages")
	sizes := []int64{0, 1, 100, int64(ps) - 1, int64(ps) + 100, used / 2, used - 1, used, int64(len(full))}
	for off := int64(0); off < used; off += int64(ps) {
		sizes = append(sizes, off)
	}
	dmg := filepath.Join(t.TempDir(), "damaged.db")
	for _, n := range sizes {
		require.NoError(t, os.WriteFile(dmg, full[:n], 0o600))
		// A commit writes pages past the synced file size (into space
		// zero-filled since), so a torn one can leave the file short of
		// its pages: rolling back is an answer too.
		got := requireIntactOrReported(t, dmg, d, fmt.Sprintf("truncated to %d bytes", n))
		if n < used {
			require.NotEqual(t, intact, got, "truncation to %d of %d used bytes must be reported or rolled back", n, used)
		}
	}
	require.NoError(t, os.WriteFile(dmg, nil, 0o600))
	_, err = readContents(dmg)
	require.ErrorContains(t, err, "file is empty")
}

func TestBoltBitFlips(t *testing.T) {
	// Damage one byte at a time anywhere in the used part of the file.
	d := buildDamageable(t)
	ps, used := usedBytes(t, d.path)
	full, err := os.ReadFile(d.path)
	require.NoError(t, err)
	// EDICTLOG_BITFLIPS=n[,seed] runs more flips (the default run takes
	// well under a second).
	flips, seed := 2000, uint64(1)
	if env := os.Getenv("EDICTLOG_BITFLIPS"); env != "" {
		_, err := fmt.Sscanf(env, "%d,%d", &flips, &seed)
		if err != nil {
			_, err = fmt.Sscanf(env, "%d", &flips)
		}
		require.NoError(t, err, "EDICTLOG_BITFLIPS")
	}
	rng := rand.New(rand.NewPCG(seed, 2))
	type damage struct {
		pos  int64
		mask byte
	}
	var damages []damage
	for i := int64(0); i < 16+bMetaSize; i++ { // every bit of both meta pages' header and meta
		for bit := range 8 {
			damages = append(damages, damage{i, 1 << bit}, damage{int64(ps) + i, 1 << bit})
		}
	}
	for range flips {
		// Mostly single bits; every third time a whole random byte.
		mask := byte(1) << rng.IntN(8)
		if rng.IntN(3) == 0 {
			mask = byte(1 + rng.IntN(255))
		}
		damages = append(damages, damage{rng.Int64N(used), mask})
	}
	// Past the used pages the file holds only preallocated zeros (and the
	// truncation test shows they may go); damage there must change nothing.
	tail := int64(len(full)) - used
	require.Greater(t, tail, int64(0), "the file is preallocated")
	for range 10 {
		damages = append(damages, damage{used + rng.Int64N(tail), 0xff})
	}
	dmg := filepath.Join(t.TempDir(), "damaged.db")
	var outcomes [3]int
	for _, dm := range damages {
		pos, mask := dm.pos, dm.mask
		// Copy only the used part (and the damaged byte) to keep the test fast.
		b := bytes.Clone(full[:max(used, pos+1)])
		b[pos] ^= mask
		require.NoError(t, os.WriteFile(dmg, b, 0o600))
		outcomes[requireIntactOrReported(t, dmg, d, fmt.Sprintf("byte %d (page %d) xor %#x", pos, pos/int64(ps), mask))]++
	}
	t.Logf("%d flips in %d used bytes: %d reported, %d rolled back (in the newest transaction's pages), %d changed nothing that is read",
		len(damages), used, outcomes[reported], outcomes[rolledBack], outcomes[intact])
	require.Greater(t, outcomes[reported], len(damages)/4)
}

// metaPages returns the offsets of the newer and the older meta structure.
func metaPages(t *testing.T, path string, ps int) (newer, older int64) {
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	tx0 := binary.NativeEndian.Uint64(b[16+48:])
	tx1 := binary.NativeEndian.Uint64(b[ps+16+48:])
	if tx0 > tx1 {
		return 16, int64(ps) + 16
	}
	return int64(ps) + 16, 16
}

func flipByte(t *testing.T, path string, off int64) {
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	b[off] ^= 0x40
	require.NoError(t, os.WriteFile(path, b, 0o600))
}

func TestBoltDamagedMetaPages(t *testing.T) {
	d := buildDamageable(t)
	path, want := d.path, d.want
	ps, _ := usedBytes(t, path)
	newer, older := metaPages(t, path, ps)
	dir := t.TempDir()

	p := filepath.Join(dir, "older.db")
	copyFile(t, path, p)
	flipByte(t, p, older+20) // in the root pgid, under the checksum
	var logged bytes.Buffer
	s, err := OpenBolt(p, &BoltOptions{Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	require.NoError(t, err, "a damaged older meta page loses nothing")
	require.NoError(t, s.Close())
	require.Contains(t, logged.String(), "damaged bbolt meta page")
	got, err := readContents(p)
	require.NoError(t, err)
	require.Equal(t, want, got)

	p = filepath.Join(dir, "newer.db")
	copyFile(t, path, p)
	flipByte(t, p, newer+20)
	_, err = OpenBolt(p, nil)
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorContains(t, err, p)
	require.ErrorContains(t, err, "AllowMetaRollback")
	s, err = OpenBolt(p, &BoltOptions{AllowMetaRollback: true, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err, "the operator may accept losing the last transaction")
	require.NoError(t, s.Close())

	// One flipped bit can make the newer meta's txid read as the one
	// before the valid meta's (T+1 → T-1 when bit 1 of T+1 is set); that
	// must not pass for a damaged older page.
	p = filepath.Join(dir, "masquerade.db")
	copyFile(t, path, p)
	for {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		n, _ := metaPages(t, p, ps)
		if binary.NativeEndian.Uint64(b[n+48:])&2 != 0 {
			break
		}
		s, err := OpenBolt(p, nil)
		require.NoError(t, err)
		require.NoError(t, s.Set("tick", nil))
		require.NoError(t, s.Close())
	}
	mNewer, _ := metaPages(t, p, ps)
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	b[mNewer+48] ^= 2
	require.NoError(t, os.WriteFile(p, b, 0o600))
	_, err = OpenBolt(p, nil)
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorContains(t, err, "may be the newer one")

	p = filepath.Join(dir, "both.db")
	copyFile(t, path, p)
	flipByte(t, p, newer+20)
	flipByte(t, p, older+20)
	_, err = OpenBolt(p, &BoltOptions{AllowMetaRollback: true})
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorContains(t, err, "both bbolt meta pages are damaged")
}

func TestBoltNotAStore(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "random")
	junk := make([]byte, 64<<10)
	rand.NewChaCha8([32]byte{7}).Read(junk)
	require.NoError(t, os.WriteFile(p, junk, 0o600))
	_, err := OpenBolt(p, nil)
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorContains(t, err, p)

	// A valid bbolt file of someone else's.
	p = filepath.Join(dir, "other.db")
	db, err := bolt.Open(p, 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket([]byte("things"))
		if err != nil {
			return err
		}
		return b.Put([]byte("a"), []byte("b"))
	}))
	require.NoError(t, db.Close())
	_, err = OpenBolt(p, nil)
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorContains(t, err, `bucket "log" is missing`)

	_, err = OpenBolt(dir, nil)
	require.ErrorContains(t, err, "not a regular file")
}

// rewriteValue replaces the stored value of a log entry, keeping its
// checksum and the state digest consistent, as a future (or buggy) writer
// that knew the framing would.
func rewriteValue(t *testing.T, path string, idx uint64, f func(payload []byte) []byte) {
	db, err := bolt.Open(path, 0o600, nil)
	require.NoError(t, err)
	defer db.Close()
	require.NoError(t, db.Update(func(tx *bolt.Tx) error {
		k := indexKey(nil, idx)
		lb := tx.Bucket(bucketLog)
		old := lb.Get(k)
		p, _, err := unframe(k, old)
		require.NoError(t, err)
		nv := frame(nil, k, f(bytes.Clone(p)))
		st, err := decodeState(tx.Bucket(bucketMeta).Get(keyState))
		require.NoError(t, err)
		st.logDigest ^= trailer(old) ^ trailer(nv)
		st.txid = uint64(tx.ID())
		if err := tx.Bucket(bucketMeta).Put(keyState, st.encode(nil)); err != nil {
			return err
		}
		return lb.Put(k, nv)
	}))
}

// restamp sets the state record's transaction id to tx's, so that the
// damage a test does with a bbolt transaction of its own is what Open
// finds, not the mismatched id (which it would take for a torn commit).
func restamp(t *testing.T, tx *bolt.Tx) {
	st, err := decodeState(tx.Bucket(bucketMeta).Get(keyState))
	require.NoError(t, err)
	st.txid = uint64(tx.ID())
	require.NoError(t, tx.Bucket(bucketMeta).Put(keyState, st.encode(nil)))
}

func TestBoltUnknownEntryVersion(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log.db")
	s, err := OpenBolt(path, nil)
	require.NoError(t, err)
	require.NoError(t, s.StoreBatch(wire.Batch{Entries: testEntries(1, 10, 20)}))
	require.NoError(t, s.Close())
	rewriteValue(t, path, 5, func(p []byte) []byte { p[0] = 9; return p })

	s, err = OpenBolt(path, nil)
	require.NoError(t, err, "the checksum is right, so only decoding can tell")
	defer s.Close()
	es, err := s.Entries(1, 5, 0)
	require.NoError(t, err)
	require.Len(t, es, 4)
	for _, r := range [][2]uint64{{5, 6}, {1, 11}, {4, 8}} {
		es, err = s.Entries(r[0], r[1], 0)
		require.ErrorIs(t, err, ErrCorrupt, "entries %v: nothing is skipped", r)
		require.Nil(t, es)
		require.ErrorContains(t, err, path)
		require.ErrorContains(t, err, "log entry 5")
		require.ErrorContains(t, err, "unknown version byte 9")
	}
}

func TestBoltEntryChecksum(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log.db")
	s, err := OpenBolt(path, nil)
	require.NoError(t, err)
	require.NoError(t, s.StoreBatch(wire.Batch{Entries: testEntries(1, 10, 20)}))
	require.NoError(t, s.Close())
	// Change a data byte without fixing the checksum.
	db, err := bolt.Open(path, 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bolt.Tx) error {
		lb := tx.Bucket(bucketLog)
		v := bytes.Clone(lb.Get(indexKey(nil, 7)))
		v[len(v)-10] ^= 1
		restamp(t, tx)
		return lb.Put(indexKey(nil, 7), v)
	}))
	require.NoError(t, db.Close())
	_, err = OpenBolt(path, nil)
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorContains(t, err, path)
	require.ErrorContains(t, err, "log entry 7: checksum mismatch")
}

func TestBoltLostTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log.db")
	s, err := OpenBolt(path, nil)
	require.NoError(t, err)
	require.NoError(t, s.StoreBatch(wire.Batch{Entries: testEntries(1, 10, 20)}))
	require.NoError(t, s.Close())
	db, err := bolt.Open(path, 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bolt.Tx) error {
		restamp(t, tx)
		return tx.Bucket(bucketLog).Delete(indexKey(nil, 10))
	}))
	require.NoError(t, db.Close())
	_, err = OpenBolt(path, nil)
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorContains(t, err, "entries were lost")
}

func TestSnapshotCorruption(t *testing.T) {
	dir := t.TempDir()
	s, err := NewFileSnapshotStore(dir, 5)
	require.NoError(t, err)
	data := bytes.Repeat([]byte("snapshot "), 10000)
	write := func() (string, string, string) {
		sink, err := s.Create(wire.SnapshotMeta{Index: 9, Stamp: testStamp(9), Config: wire.EpochConfig{Epoch: 1, Members: []edict.ProcessID{1}}})
		require.NoError(t, err)
		_, err = sink.Write(data)
		require.NoError(t, err)
		require.NoError(t, sink.Close())
		return sink.ID(), filepath.Join(dir, sink.ID(), snapDataFile), filepath.Join(dir, sink.ID(), snapMetaFile)
	}

	id, dataPath, _ := write()
	flipByte(t, dataPath, 12345)
	_, r, err := s.Open(id)
	require.NoError(t, err, "same size: only the digest can tell")
	_, err = io.ReadAll(r)
	require.NoError(t, r.Close())
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorContains(t, err, dataPath)
	require.ErrorContains(t, err, "SHA-256")
	require.ErrorIs(t, s.Verify(id), ErrCorrupt)
	require.NoError(t, s.Delete(id))

	id, dataPath, _ = write()
	require.NoError(t, os.Truncate(dataPath, int64(len(data)-1)))
	_, _, err = s.Open(id)
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorContains(t, err, dataPath)
	require.NoError(t, s.Delete(id))

	id, _, metaPath := write()
	flipByte(t, metaPath, 20)
	_, err = s.List()
	require.ErrorIs(t, err, ErrCorrupt, "a damaged snapshot is reported, not left out")
	require.ErrorContains(t, err, metaPath)
	_, _, err = s.Open(id)
	require.ErrorIs(t, err, ErrCorrupt)
	require.NoError(t, s.Delete(id))

	id, _, metaPath = write()
	b, err := os.ReadFile(metaPath)
	require.NoError(t, err)
	p, _, err := unframe(snapMetaKey, b)
	require.NoError(t, err)
	p[0] = 7
	require.NoError(t, os.WriteFile(metaPath, frame(nil, snapMetaKey, p), 0o600))
	_, _, err = s.Open(id)
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorContains(t, err, "unknown version byte 7")
	require.NoError(t, os.Remove(metaPath))
	_, err = s.List()
	require.ErrorContains(t, err, "snapshot metadata is missing")
	require.NoError(t, s.Delete(id))

	ms, err := s.List()
	require.NoError(t, err)
	require.Empty(t, ms)
	require.False(t, errors.Is(err, ErrCorrupt))
	names, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, n := range names {
		require.False(t, strings.HasSuffix(n.Name(), snapTmpExt))
	}
}
