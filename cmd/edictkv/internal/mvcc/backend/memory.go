package backend

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"slices"
	"sync"

	"github.com/google/btree"
)

// Memory is a [Backend] in memory, for tests and the simulator. What it
// holds after a Commit returns is its durable state: [Memory.Crash] keeps
// exactly that and nothing else. It is deterministic: nothing in it depends
// on time, scheduling or map order, and its sizes are a function of its
// content and history.
//
// Its snapshot stream is its own format (a magic, the buckets and pairs in
// order, a CRC-32C trailer), not a bbolt file.
type Memory struct {
	mu      sync.Mutex
	buckets map[string]*btree.BTreeG[memItem]
	// staged is the staged database, which survives a Crash.
	staged    *memRestored
	crashed   bool
	commitErr error
	inUse     int64
	highWater int64
	commits   int64
}

type memItem struct{ k, v []byte }

func memLess(a, b memItem) bool { return bytes.Compare(a.k, b.k) < 0 }

func newMemTree() *btree.BTreeG[memItem] { return btree.NewG(32, memLess) }

// memBase and memItemOverhead make Memory's sizes resemble a bbolt file's:
// a fixed header and a per-pair cost beside the bytes themselves.
const (
	memBase         = 4 * 4096
	memItemOverhead = 16
)

// NewMemory returns an empty Memory backend.
func NewMemory() *Memory {
	return &Memory{buckets: map[string]*btree.BTreeG[memItem]{}, inUse: memBase, highWater: memBase}
}

// Crash simulates a crash and restart: m stops working (every later call
// returns ErrClosed; views already begun keep reading), and the returned
// backend holds what m had committed.
func (m *Memory) Crash() *Memory {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.crashed = true
	n := &Memory{buckets: cloneBuckets(m.buckets), inUse: m.inUse, highWater: m.highWater}
	if m.staged != nil {
		n.staged = &memRestored{m: n, buckets: cloneBuckets(m.staged.buckets), staged: true}
	}
	return n
}

func cloneBuckets(buckets map[string]*btree.BTreeG[memItem]) map[string]*btree.BTreeG[memItem] {
	out := make(map[string]*btree.BTreeG[memItem], len(buckets))
	for name, t := range buckets {
		out[name] = t.Clone()
	}
	return out
}

// SetCommitError makes every later Commit fail with err and change
// nothing, until it is called with nil: a disk that refuses writes.
func (m *Memory) SetCommitError(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.commitErr = err
}

// Commits is the number of successful commits so far.
func (m *Memory) Commits() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.commits
}

// Begin implements Backend.
func (m *Memory) Begin() (ReadTx, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.crashed {
		return nil, ErrClosed
	}
	return newMemTx(m.buckets), nil
}

// newMemTx clones every tree: a clone is O(1) and later writes to the
// original copy the nodes they touch, so the view never changes.
func newMemTx(buckets map[string]*btree.BTreeG[memItem]) *memTx {
	v := &memTx{buckets: make(map[string]*btree.BTreeG[memItem], len(buckets))}
	for name, t := range buckets {
		v.buckets[name] = t.Clone()
	}
	return v
}

// Commit implements Backend.
func (m *Memory) Commit(b *Batch) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.crashed {
		return ErrClosed
	}
	if m.commitErr != nil {
		return fmt.Errorf("backend: commit: %w", m.commitErr)
	}
	created := map[string]bool{}
	for _, o := range b.ops {
		switch o.kind {
		case opCreateBucket:
			created[string(o.bucket)] = true
		case opPut:
			if _, ok := m.buckets[string(o.bucket)]; !ok && !created[string(o.bucket)] {
				return fmt.Errorf("backend: commit: put into missing bucket %q", o.bucket)
			}
		}
	}
	for _, o := range b.ops {
		switch o.kind {
		case opCreateBucket:
			if _, ok := m.buckets[string(o.bucket)]; !ok {
				m.buckets[string(o.bucket)] = newMemTree()
			}
		case opPut:
			it := memItem{k: slices.Clone(o.key), v: slices.Clone(o.value)}
			if it.v == nil {
				it.v = []byte{}
			}
			if old, ok := m.buckets[string(o.bucket)].ReplaceOrInsert(it); ok {
				m.inUse -= int64(len(old.k) + len(old.v) + memItemOverhead)
			}
			m.inUse += int64(len(it.k) + len(it.v) + memItemOverhead)
		case opDelete:
			if t, ok := m.buckets[string(o.bucket)]; ok {
				if old, ok := t.Delete(memItem{k: o.key}); ok {
					m.inUse -= int64(len(old.k) + len(old.v) + memItemOverhead)
				}
			}
		}
	}
	m.highWater = max(m.highWater, m.inUse)
	m.commits++
	return nil
}

// Size implements Backend: like a file, it never shrinks.
func (m *Memory) Size() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.highWater
}

// SizeInUse implements Backend.
func (m *Memory) SizeInUse() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.inUse
}

// Close implements Backend. A closed Memory keeps its committed state for
// nobody: use Crash to model a restart.
func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.crashed = true
	return nil
}

// Restore implements Backend.
func (m *Memory) Restore(r io.Reader) (Restored, error) {
	m.mu.Lock()
	crashed := m.crashed
	m.mu.Unlock()
	if crashed {
		return nil, ErrClosed
	}
	buckets, err := decodeMemorySnapshot(r)
	if err != nil {
		return nil, err
	}
	return &memRestored{m: m, buckets: buckets}, nil
}

type memRestored struct {
	m       *Memory
	buckets map[string]*btree.BTreeG[memItem]
	// staged: it is m.staged; done: installed or discarded.
	staged bool
	done   bool
}

// Staged implements Backend.
func (m *Memory) Staged() (Restored, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.crashed:
		return nil, ErrClosed
	case m.staged == nil:
		return nil, ErrNotStaged
	}
	return m.staged, nil
}

// DiscardStaged implements Backend.
func (m *Memory) DiscardStaged() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.crashed {
		return ErrClosed
	}
	if m.staged != nil {
		m.staged.staged, m.staged.done = false, true
		m.staged = nil
	}
	return nil
}

func (r *memRestored) Begin() (ReadTx, error) {
	if r.done {
		return nil, ErrClosed
	}
	return newMemTx(r.buckets), nil
}

func (r *memRestored) Stage() error {
	m := r.m
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case r.done:
		return errors.New("backend: restore already installed or discarded")
	case m.crashed:
		return ErrClosed
	}
	if m.staged != nil && m.staged != r {
		m.staged.staged, m.staged.done = false, true
	}
	m.staged, r.staged = r, true
	return nil
}

func (r *memRestored) Install() error {
	m := r.m
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case r.done:
		return errors.New("backend: restore already installed or discarded")
	case m.crashed:
		if !r.staged {
			r.done = true
		}
		return ErrClosed
	}
	r.done = true
	if m.staged == r {
		m.staged, r.staged = nil, false
	}
	m.buckets = r.buckets
	m.inUse = memBase
	for _, t := range m.buckets {
		t.Ascend(func(it memItem) bool {
			m.inUse += int64(len(it.k) + len(it.v) + memItemOverhead)
			return true
		})
	}
	m.highWater = max(m.highWater, m.inUse)
	m.commits++
	return nil
}

func (r *memRestored) Discard() {
	m := r.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if r.done {
		return
	}
	r.done = true
	if m.staged == r {
		m.staged, r.staged = nil, false
	}
}

type memTx struct {
	buckets map[string]*btree.BTreeG[memItem]
}

func (t *memTx) HasBucket(bucket []byte) bool {
	_, ok := t.buckets[string(bucket)]
	return ok
}

func (t *memTx) Get(bucket, key []byte) []byte {
	tr, ok := t.buckets[string(bucket)]
	if !ok {
		return nil
	}
	it, ok := tr.Get(memItem{k: key})
	if !ok {
		return nil
	}
	return it.v
}

func (t *memTx) Ascend(bucket, from, to []byte, fn func(k, v []byte) bool) {
	tr, ok := t.buckets[string(bucket)]
	if !ok {
		return
	}
	iter := func(it memItem) bool { return fn(it.k, it.v) }
	switch {
	case to == nil:
		tr.AscendGreaterOrEqual(memItem{k: from}, iter)
	default:
		tr.AscendRange(memItem{k: from}, memItem{k: to}, iter)
	}
}

func (t *memTx) sortedNames() []string {
	names := make([]string, 0, len(t.buckets))
	for name := range t.buckets {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// The memory snapshot format: memMagic; then per bucket, in name order,
// tagBucket and the name, and per pair, in key order, tagPair, the key and
// the value, each byte string as a uvarint length and the bytes; then
// tagEnd and the CRC-32C (Castagnoli) of everything before it, big-endian.
const (
	memMagic  = "edictkv-mvcc-memory/1\n"
	tagBucket = 'B'
	tagPair   = 'P'
	tagEnd    = 'E'
	// maxMemField bounds one decoded byte string.
	maxMemField = 64 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func (t *memTx) WriteTo(w io.Writer) (int64, error) {
	cw := &countWriter{w: w}
	h := crc32.New(castagnoli)
	bw := bufio.NewWriter(io.MultiWriter(cw, h))
	var scratch [binary.MaxVarintLen64]byte
	putBytes := func(b []byte) {
		n := binary.PutUvarint(scratch[:], uint64(len(b)))
		bw.Write(scratch[:n])
		bw.Write(b)
	}
	bw.WriteString(memMagic)
	for _, name := range t.sortedNames() {
		bw.WriteByte(tagBucket)
		putBytes([]byte(name))
		t.buckets[name].Ascend(func(it memItem) bool {
			bw.WriteByte(tagPair)
			putBytes(it.k)
			putBytes(it.v)
			return cw.err == nil
		})
	}
	bw.WriteByte(tagEnd)
	if err := bw.Flush(); err != nil {
		return cw.n, err
	}
	var sum [4]byte
	binary.BigEndian.PutUint32(sum[:], h.Sum32())
	_, err := cw.Write(sum[:])
	return cw.n, err
}

func (t *memTx) Size() int64 {
	uv := func(n int) int64 {
		var s [binary.MaxVarintLen64]byte
		return int64(binary.PutUvarint(s[:], uint64(n)) + n)
	}
	size := int64(len(memMagic)) + 1 + 4
	for name, tr := range t.buckets {
		size += 1 + uv(len(name))
		tr.Ascend(func(it memItem) bool {
			size += 1 + uv(len(it.k)) + uv(len(it.v))
			return true
		})
	}
	return size
}

func (t *memTx) Release() {}

type countWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	if err != nil && c.err == nil {
		c.err = err
	}
	return n, err
}

// crcReader feeds what it reads to a hash, so that the trailer can be
// checked against exactly the bytes before it.
type crcReader struct {
	r *bufio.Reader
	h hash.Hash32
}

func (c *crcReader) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err == nil {
		c.h.Write([]byte{b})
	}
	return b, err
}

func (c *crcReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.h.Write(p[:n])
	return n, err
}

// decodeMemorySnapshot decodes a stream written by a Memory view's WriteTo,
// to its end. Any deviation (bad magic, unordered or duplicate buckets or
// keys, a field over 64 MiB, a bad checksum, bytes after the trailer) is an
// error.
func decodeMemorySnapshot(r io.Reader) (map[string]*btree.BTreeG[memItem], error) {
	cr := &crcReader{r: bufio.NewReader(r), h: crc32.New(castagnoli)}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("backend: memory snapshot: "+format, args...)
	}
	eof := func(err error) error {
		if errors.Is(err, io.EOF) {
			return io.ErrUnexpectedEOF
		}
		return err
	}
	magic := make([]byte, len(memMagic))
	if _, err := io.ReadFull(cr, magic); err != nil {
		return nil, bad("reading the magic: %w", eof(err))
	}
	if string(magic) != memMagic {
		return nil, bad("bad magic %q", magic)
	}
	readBytes := func(what string) ([]byte, error) {
		n, err := binary.ReadUvarint(cr)
		if err != nil {
			return nil, bad("reading the length of a %s: %w", what, eof(err))
		}
		if n > maxMemField {
			return nil, bad("a %s of %d bytes is over the %d-byte bound", what, n, maxMemField)
		}
		b := make([]byte, n)
		if _, err := io.ReadFull(cr, b); err != nil {
			return nil, bad("reading a %s: %w", what, eof(err))
		}
		return b, nil
	}
	buckets := map[string]*btree.BTreeG[memItem]{}
	var cur *btree.BTreeG[memItem]
	var lastName string
	var lastKey []byte
	for {
		tag, err := cr.ReadByte()
		if err != nil {
			return nil, bad("reading a tag: %w", eof(err))
		}
		switch tag {
		case tagBucket:
			name, err := readBytes("bucket name")
			if err != nil {
				return nil, err
			}
			if cur != nil && string(name) <= lastName {
				return nil, bad("bucket %q follows bucket %q: out of order", name, lastName)
			}
			lastName, lastKey = string(name), nil
			cur = newMemTree()
			buckets[lastName] = cur
		case tagPair:
			if cur == nil {
				return nil, bad("a pair before any bucket")
			}
			k, err := readBytes("key")
			if err != nil {
				return nil, err
			}
			v, err := readBytes("value")
			if err != nil {
				return nil, err
			}
			if lastKey != nil && bytes.Compare(k, lastKey) <= 0 {
				return nil, bad("key %x follows key %x in bucket %q: out of order", k, lastKey, lastName)
			}
			lastKey = k
			cur.ReplaceOrInsert(memItem{k: k, v: v})
		case tagEnd:
			want := cr.h.Sum32()
			var sum [4]byte
			if _, err := io.ReadFull(cr.r, sum[:]); err != nil {
				return nil, bad("reading the checksum: %w", eof(err))
			}
			if got := binary.BigEndian.Uint32(sum[:]); got != want {
				return nil, bad("checksum %08x, content sums to %08x", got, want)
			}
			if _, err := cr.r.ReadByte(); !errors.Is(err, io.EOF) {
				if err != nil {
					return nil, bad("after the trailer: %w", err)
				}
				return nil, bad("bytes after the trailer")
			}
			return buckets, nil
		default:
			return nil, bad("unknown tag %#x", tag)
		}
	}
}
