package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"time"
)

// checkBoltFile validates the page structure of a bbolt file by reading it
// with ReadAt, before bbolt maps it. bbolt trusts its pages: a damaged page
// id, type, element offset or child pointer makes it panic, or read past the
// end of the mapping and fault, and with NoFreelistSync it walks every page
// at open. This check enforces every structural rule bbolt relies on (the
// rules of bbolt's own Tx.Check, with bounds checks first), so that a
// damaged file is an error naming the file and the page, never a crash.
//
// The layout constants mirror go.etcd.io/bbolt/internal/common (format
// version 2), which bbolt writes in the machine's byte order.

const (
	bPageHeaderSize = 16
	bElementSize    = 16 // branch and leaf elements are both 16 bytes
	bBucketHeader   = 16 // root pgid + sequence
	bMetaSize       = 64
	bBranchPage     = 0x01
	bLeafPage       = 0x02
	bFreelistPage   = 0x10
	bBucketFlag     = 0x01
	bMagic          = 0xED0CDAED
	bVersion        = 2
	bNoFreelist     = ^uint64(0)
	bMaxDepth       = 64
)

var ne = binary.NativeEndian

// boltFileInfo is what checkBoltFile learned about a file.
type boltFileInfo struct {
	pageSize int
	hwm      uint64 // the high-water mark: pages 0..hwm-1 are in use
	txid     uint64
	// damagedMeta is the meta page (0 or 1) that failed validation while
	// the other passed, or -1. olderMetaDamaged says the damaged page
	// provably held the transaction before the valid one (see repairMeta),
	// so nothing is lost by ignoring it; otherwise it may have been the
	// newer one.
	damagedMeta      int
	metaErr          string
	olderMetaDamaged bool
}

type boltMeta struct {
	pageSize           uint32
	root, freelist     uint64
	hwm, txid, sum     uint64
	magic, version     uint32
	computedChecksumOK bool
}

// The meta structure: magic, version, page size, flags (4 bytes each),
// root bucket (root pgid, sequence), freelist pgid, high-water mark, txid,
// then the FNV-64a checksum of the 56 bytes before it.

func parseMeta(b []byte) boltMeta {
	m := boltMeta{
		magic:    ne.Uint32(b[0:]),
		version:  ne.Uint32(b[4:]),
		pageSize: ne.Uint32(b[8:]),
		root:     ne.Uint64(b[16:]),
		freelist: ne.Uint64(b[32:]),
		hwm:      ne.Uint64(b[40:]),
		txid:     ne.Uint64(b[48:]),
		sum:      ne.Uint64(b[56:]),
	}
	h := fnv.New64a()
	h.Write(b[:56])
	m.computedChecksumOK = h.Sum64() == m.sum
	return m
}

func (m boltMeta) problem() string {
	switch {
	case m.magic != bMagic:
		return fmt.Sprintf("magic %#x, want %#x", m.magic, uint32(bMagic))
	case m.version != bVersion:
		return fmt.Sprintf("version %d, want %d", m.version, bVersion)
	case !m.computedChecksumOK:
		return "checksum mismatch"
	}
	return ""
}

// readMeta reads the meta at off, or reports why it cannot be used. It
// also returns the raw meta bytes (nil if unreadable).
func readMeta(f io.ReaderAt, off int64) (boltMeta, string, []byte) {
	buf := make([]byte, bPageHeaderSize+bMetaSize)
	if _, err := f.ReadAt(buf, off); err != nil {
		return boltMeta{}, fmt.Sprintf("unreadable at offset %d: %v", off, err), nil
	}
	raw := buf[bPageHeaderSize:]
	m := parseMeta(raw)
	return m, m.problem(), raw
}

// repairMeta undoes a single flipped bit in a damaged meta, if one does:
// the 64-bit checksum then tells the one right candidate. Its txid says
// whether the damaged page held the older or the newer transaction; the
// txid field as read cannot be trusted for that, since one flipped bit can
// turn T+1 into T-1.
func repairMeta(raw []byte) (boltMeta, bool) {
	if raw == nil {
		return boltMeta{}, false
	}
	b := append([]byte(nil), raw...)
	for bit := range len(b) * 8 {
		b[bit/8] ^= 1 << (bit % 8)
		if m := parseMeta(b); m.problem() == "" {
			return m, true
		}
		b[bit/8] ^= 1 << (bit % 8)
	}
	return boltMeta{}, false
}

// olderDamaged reports whether the damaged meta raw provably held the
// transaction before valid's.
func olderDamaged(raw []byte, valid boltMeta) bool {
	r, ok := repairMeta(raw)
	return ok && r.txid+1 == valid.txid
}

func checkBoltFile(path string, f io.ReaderAt, size int64) (boltFileInfo, error) {
	info := boltFileInfo{damagedMeta: -1}
	m0, p0, raw0 := readMeta(f, 0)
	var m1 boltMeta
	var p1 string
	var raw1 []byte
	if p0 == "" {
		m1, p1, raw1 = readMeta(f, int64(m0.pageSize))
	} else {
		// Like bbolt, find meta 1 by trying the page sizes it may have.
		p1 = "not found at any page size"
		for sz := int64(1024); sz <= 1<<24 && sz+bPageHeaderSize+bMetaSize <= size; sz <<= 1 {
			if m, p, _ := readMeta(f, sz); p == "" && int64(m.pageSize) == sz {
				m1, p1 = m, ""
				break
			}
		}
	}
	var m boltMeta
	switch {
	case p0 != "" && p1 != "":
		return info, corruptf(path, "both bbolt meta pages are damaged (page 0: %s; page 1: %s): not a bbolt file, or destroyed", p0, p1)
	case p0 == "" && p1 == "":
		if m0.pageSize != m1.pageSize {
			return info, corruptf(path, "bbolt meta pages disagree on the page size (%d, %d)", m0.pageSize, m1.pageSize)
		}
		m = m0
		if m1.txid > m0.txid {
			m = m1
		}
	case p0 != "":
		m, info.damagedMeta, info.metaErr = m1, 0, p0
		info.olderMetaDamaged = olderDamaged(raw0, m1)
	default:
		m, info.damagedMeta, info.metaErr = m0, 1, p1
		info.olderMetaDamaged = olderDamaged(raw1, m0)
	}
	ps := uint64(m.pageSize)
	info.pageSize, info.hwm, info.txid = int(ps), m.hwm, m.txid
	if ps < 512 || ps > 1<<24 || ps&(ps-1) != 0 {
		return info, corruptf(path, "bbolt page size %d is impossible", ps)
	}
	if m.hwm < 3 || m.hwm > uint64(size)/ps {
		return info, corruptf(path, "file is %d bytes but the database uses %d pages of %d bytes (truncated?)", size, m.hwm, ps)
	}
	w := &boltWalker{path: path, f: f, ps: ps, hwm: m.hwm, seen: make([]uint64, (m.hwm+63)/64)}
	w.seen[0] |= 3 // the meta pages
	if m.root < 2 || m.root >= m.hwm {
		return info, corruptf(path, "root page %d outside the file's pages 2..%d", m.root, m.hwm-1)
	}
	if err := w.page(m.root, nil, nil, 0, "root bucket"); err != nil {
		return info, err
	}
	if m.freelist != bNoFreelist {
		if err := w.freelist(m.freelist); err != nil {
			return info, err
		}
	}
	return info, nil
}

// boltWalker walks the page tree; seen marks the pages reached so far.
type boltWalker struct {
	path string
	f    io.ReaderAt
	ps   uint64
	hwm  uint64
	seen []uint64
	free []uint64 // freelist page ids, checked after the walk
}

func (w *boltWalker) errf(format string, args ...any) error {
	return corruptf(w.path, "bbolt structure: "+format, args...)
}

// mark records pages id..id+n-1 as reached and refuses a page reached twice.
func (w *boltWalker) mark(id, n uint64) error {
	for p := id; p < id+n; p++ {
		if w.seen[p/64]&(1<<(p%64)) != 0 {
			return w.errf("page %d is referenced twice", p)
		}
		w.seen[p/64] |= 1 << (p % 64)
	}
	return nil
}

// read returns the page id with its overflow pages, checking the header.
func (w *boltWalker) read(id uint64, wantFlags ...uint16) (buf []byte, flags uint16, count int, err error) {
	if id < 2 || id >= w.hwm {
		return nil, 0, 0, w.errf("page %d outside the file's pages 2..%d", id, w.hwm-1)
	}
	var hdr [bPageHeaderSize]byte
	if _, err := w.f.ReadAt(hdr[:], int64(id*w.ps)); err != nil {
		return nil, 0, 0, fmt.Errorf("storage: %s: read page %d: %w", w.path, id, err)
	}
	if got := ne.Uint64(hdr[0:]); got != id {
		return nil, 0, 0, w.errf("page %d says it is page %d", id, got)
	}
	flags, count = ne.Uint16(hdr[8:]), int(ne.Uint16(hdr[10:]))
	overflow := uint64(ne.Uint32(hdr[12:]))
	ok := false
	for _, f := range wantFlags {
		ok = ok || flags == f
	}
	if !ok {
		return nil, 0, 0, w.errf("page %d has type %#x, want one of %#x", id, flags, wantFlags)
	}
	if overflow >= w.hwm-id {
		return nil, 0, 0, w.errf("page %d has %d overflow pages, past the high-water mark %d", id, overflow, w.hwm)
	}
	if err := w.mark(id, overflow+1); err != nil {
		return nil, 0, 0, err
	}
	buf = make([]byte, (overflow+1)*w.ps)
	if _, err := w.f.ReadAt(buf, int64(id*w.ps)); err != nil {
		return nil, 0, 0, fmt.Errorf("storage: %s: read page %d: %w", w.path, id, err)
	}
	return buf, flags, count, nil
}

// page checks the branch or leaf page id, whose keys must lie in [lo, hi).
func (w *boltWalker) page(id uint64, lo, hi []byte, depth int, where string) error {
	if depth > bMaxDepth {
		return w.errf("tree deeper than %d at page %d", bMaxDepth, id)
	}
	buf, flags, count, err := w.read(id, bBranchPage, bLeafPage)
	if err != nil {
		return err
	}
	return w.node(buf, flags, count, lo, hi, depth, fmt.Sprintf("page %d (%s)", id, where))
}

// node checks the elements of a page (or an inline bucket's page) in p.
func (w *boltWalker) node(p []byte, flags uint16, count int, lo, hi []byte, depth int, where string) error {
	if bPageHeaderSize+count*bElementSize > len(p) {
		return w.errf("%s: %d elements do not fit in %d bytes", where, count, len(p))
	}
	if flags == bBranchPage && count == 0 {
		return w.errf("%s: branch page without elements", where)
	}
	var prev []byte
	keys := make([][]byte, count)
	for i := range count {
		e := bPageHeaderSize + i*bElementSize
		var pos, ksize, vsize uint64
		if flags == bBranchPage {
			pos, ksize = uint64(ne.Uint32(p[e:])), uint64(ne.Uint32(p[e+4:]))
		} else {
			if fl := ne.Uint32(p[e:]); fl&^bBucketFlag != 0 {
				return w.errf("%s: element %d has unknown flags %#x", where, i, fl)
			}
			pos, ksize, vsize = uint64(ne.Uint32(p[e+4:])), uint64(ne.Uint32(p[e+8:])), uint64(ne.Uint32(p[e+12:]))
		}
		start := uint64(e) + pos
		if ksize == 0 || start+ksize+vsize > uint64(len(p)) {
			return w.errf("%s: element %d (key of %d bytes at %d, value of %d) lies outside the page", where, i, ksize, start, vsize)
		}
		k := p[start : start+ksize]
		switch {
		case i == 0 && lo != nil && bytes.Compare(k, lo) < 0:
			return w.errf("%s: first key %x is below its parent's key %x", where, k, lo)
		case i > 0 && bytes.Compare(prev, k) >= 0:
			return w.errf("%s: key %d (%x) is not above the key before it (%x)", where, i, k, prev)
		case hi != nil && bytes.Compare(k, hi) >= 0:
			return w.errf("%s: key %x is not below the next key of its parent (%x)", where, k, hi)
		}
		prev, keys[i] = k, k
		if flags == bLeafPage && ne.Uint32(p[e:])&bBucketFlag != 0 {
			if err := w.bucket(p[start+ksize:start+ksize+vsize], depth, fmt.Sprintf("bucket %q", k)); err != nil {
				return err
			}
		}
	}
	if flags == bBranchPage {
		for i := range count {
			next := hi
			if i+1 < count {
				next = keys[i+1]
			}
			child := ne.Uint64(p[bPageHeaderSize+i*bElementSize+8:])
			if err := w.page(child, keys[i], next, depth+1, where); err != nil {
				return err
			}
		}
	}
	return nil
}

// bucket checks a bucket's value: its root page, or its inline page.
func (w *boltWalker) bucket(v []byte, depth int, where string) error {
	if len(v) < bBucketHeader {
		return w.errf("%s: bucket header of %d bytes", where, len(v))
	}
	root := ne.Uint64(v)
	if root != 0 {
		return w.page(root, nil, nil, depth+1, where)
	}
	inline := v[bBucketHeader:]
	if len(inline) < bPageHeaderSize {
		return w.errf("%s: inline page of %d bytes", where, len(inline))
	}
	if fl := ne.Uint16(inline[8:]); fl != bLeafPage {
		return w.errf("%s: inline page has type %#x, want a leaf", where, fl)
	}
	return w.node(inline, bLeafPage, int(ne.Uint16(inline[10:])), nil, nil, depth+1, where+" (inline)")
}

// freelist checks a persisted freelist page (files written without
// NoFreelistSync, and new files until their first commit).
func (w *boltWalker) freelist(id uint64) error {
	buf, _, count, err := w.read(id, bFreelistPage)
	if err != nil {
		return err
	}
	idx := 0
	if count == 0xFFFF {
		if len(buf) < bPageHeaderSize+8 {
			return w.errf("freelist page %d is too short", id)
		}
		c := ne.Uint64(buf[bPageHeaderSize:])
		if c > uint64(len(buf)) {
			return w.errf("freelist page %d claims %d ids", id, c)
		}
		idx, count = 1, int(c)
	}
	if bPageHeaderSize+(idx+count)*8 > len(buf) {
		return w.errf("freelist page %d: %d ids do not fit", id, count)
	}
	for i := range count {
		p := ne.Uint64(buf[bPageHeaderSize+(idx+i)*8:])
		if p < 2 || p >= w.hwm {
			return w.errf("freelist page %d lists page %d, outside 2..%d", id, p, w.hwm-1)
		}
		if w.seen[p/64]&(1<<(p%64)) != 0 {
			return w.errf("freelist page %d lists page %d, which is in use", id, p)
		}
	}
	return nil
}

// checkBoltFileLocked runs checkBoltFile holding a shared lock on the file,
// so that no bbolt writer in another process changes it meanwhile; it gives
// up after timeout if one holds it.
func checkBoltFileLocked(path string, timeout time.Duration) (boltFileInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return boltFileInfo{}, fmt.Errorf("storage: %s: %w", path, err)
	}
	defer f.Close()
	if err := lockShared(f, timeout); err != nil {
		if errors.Is(err, errLockTimeout) {
			return boltFileInfo{}, fmt.Errorf("storage: %s: file is locked by another process (waited %v): %w", path, timeout, err)
		}
		return boltFileInfo{}, fmt.Errorf("storage: %s: lock: %w", path, err)
	}
	fi, err := f.Stat()
	if err != nil {
		return boltFileInfo{}, fmt.Errorf("storage: %s: %w", path, err)
	}
	return checkBoltFile(path, f, fi.Size())
}
