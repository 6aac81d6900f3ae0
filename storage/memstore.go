package storage

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/edictlog/edictlog/wire"
)

// MemStore is a Store in memory, for tests and the simulator. It accepts and
// refuses exactly what BoltStore does and keeps entries in their encoded
// form, so sizes, copies and decoding behave the same; it just forgets
// everything when dropped.
type MemStore struct {
	mu      sync.RWMutex
	closed  bool
	b       bounds
	entries [][]byte // encoded; entries[i] has index b.first+i
	stable  map[string][]byte
}

// NewMemStore returns an empty store.
func NewMemStore() *MemStore {
	return &MemStore{b: newBounds(), stable: map[string][]byte{}}
}

// StoreBatch implements LogStore.
func (m *MemStore) StoreBatch(b wire.Batch) error {
	if b.Empty() {
		return m.check()
	}
	// Encode before taking the lock, as BoltStore does before its
	// transaction; plan re-checks the entries under the lock.
	enc := make([][]byte, len(b.Entries))
	for i := range b.Entries {
		var err error
		if enc[i], err = wire.AppendEntry(nil, &b.Entries[i]); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalid, err)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	next, err := plan(m.b, &b)
	if err != nil {
		return err
	}
	if b.Reset != nil {
		m.entries = nil
	}
	if b.TruncateFrom != 0 {
		// plan refuses Reset with TruncateFrom, so m.b.first still applies.
		m.entries = m.entries[:b.TruncateFrom-m.b.first]
		if len(b.Entries) == 0 && next.last >= next.first {
			e, err := wire.DecodeEntry(m.entries[len(m.entries)-1])
			if err != nil {
				return fmt.Errorf("storage: memory: entry %d: %w", next.last, err)
			}
			next.lastStamp = e.Stamp
		}
	}
	m.entries = append(m.entries, enc...)
	for k, v := range b.Stable {
		m.stable[k] = append([]byte{}, v...)
	}
	for _, k := range b.Delete {
		delete(m.stable, k)
	}
	m.b = next
	return nil
}

func (m *MemStore) check() error {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return ErrClosed
	}
	return nil
}

// Entries implements LogStore.
func (m *MemStore) Entries(lo, hi uint64, maxBytes int) ([]wire.Entry, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return nil, ErrClosed
	}
	if err := checkRange(m.b, lo, hi); err != nil {
		return nil, err
	}
	var out []wire.Entry
	size := 0
	for i := lo; i < hi; i++ {
		raw := m.entries[i-m.b.first]
		size += len(raw)
		if maxBytes > 0 && size > maxBytes && len(out) > 0 {
			break
		}
		e, err := wire.DecodeEntry(raw)
		if err != nil {
			return nil, fmt.Errorf("storage: memory: entry %d: %w", i, err)
		}
		out = append(out, e)
	}
	return out, nil
}

// FirstIndex implements LogStore.
func (m *MemStore) FirstIndex() (uint64, error) {
	p, err := m.bounds()
	return p.first, err
}

// LastIndex implements LogStore.
func (m *MemStore) LastIndex() (uint64, error) {
	p, err := m.bounds()
	return p.last, err
}

// Last implements LogStore.
func (m *MemStore) Last() (wire.Position, error) {
	p, err := m.bounds()
	return p.position(), err
}

func (m *MemStore) bounds() (bounds, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return bounds{}, ErrClosed
	}
	return m.b, nil
}

// CompactPrefix implements LogStore.
func (m *MemStore) CompactPrefix(upTo uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	if err := checkCompact(m.b, upTo); err != nil {
		return err
	}
	if upTo < m.b.first {
		return nil
	}
	n := upTo + 1 - m.b.first
	e, err := wire.DecodeEntry(m.entries[n-1])
	if err != nil {
		return fmt.Errorf("storage: memory: entry %d: %w", upTo, err)
	}
	// Copy rather than reslice so the compacted entries can be collected.
	m.entries = slices.Clone(m.entries[n:])
	m.b.first = upTo + 1
	m.b.base = e.Stamp
	return nil
}

// Stats implements LogStore.
func (m *MemStore) Stats() (Stats, error) {
	b, err := m.bounds()
	if err != nil {
		return Stats{}, err
	}
	return Stats{FirstIndex: b.first, LastIndex: b.last, Entries: b.count()}, nil
}

// Close implements LogStore.
func (m *MemStore) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	m.closed = true
	return nil
}

// Get implements StableStore.
func (m *MemStore) Get(key string) ([]byte, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return nil, ErrClosed
	}
	v, ok := m.stable[key]
	if !ok {
		return nil, fmt.Errorf("storage: memory: stable key %q: %w", key, wire.ErrNotFound)
	}
	return append([]byte{}, v...), nil
}

// Set implements StableStore.
func (m *MemStore) Set(key string, value []byte) error {
	return m.StoreBatch(wire.Batch{Stable: map[string][]byte{key: value}})
}

// Delete implements StableStore.
func (m *MemStore) Delete(key string) error {
	return m.StoreBatch(wire.Batch{Delete: []string{key}})
}

// Keys implements StableStore.
func (m *MemStore) Keys(prefix string) ([]string, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return nil, ErrClosed
	}
	var keys []string
	for k := range m.stable {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys, nil
}

// BumpIncarnation implements StableStore.
func (m *MemStore) BumpIncarnation() (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return 0, ErrClosed
	}
	var cur uint64
	if v, ok := m.stable[wire.KeyIncarnation]; ok {
		var err error
		if cur, err = wire.DecodeUint64(wire.KeyIncarnation, v); err != nil {
			return 0, err
		}
	}
	if cur+1 == 0 {
		return 0, fmt.Errorf("storage: memory: incarnation overflow")
	}
	m.stable[wire.KeyIncarnation] = wire.EncodeUint64(cur + 1)
	return cur + 1, nil
}
