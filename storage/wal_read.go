package storage

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/edictlog/edictlog/wire"
)

// Entries implements LogStore. Each entry is read with its own pread and
// checked against its CRC.
func (s *WALStore) Entries(lo, hi uint64, maxBytes int) ([]wire.Entry, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, ErrClosed
	}
	if err := checkRange(s.b, lo, hi); err != nil {
		return nil, err
	}
	if lo == hi {
		return nil, nil
	}
	out := make([]wire.Entry, 0, min(hi-lo, 1024))
	size := 0
	for i := lo; i < hi; i++ {
		size += int(s.locs[i-s.b.first].n)
		if maxBytes > 0 && size > maxBytes && len(out) > 0 {
			break
		}
		e, err := s.readEntry(i)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// Get implements StableStore.
func (s *WALStore) Get(key string) ([]byte, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, ErrClosed
	}
	v, ok := s.stable[key]
	if !ok {
		return nil, fmt.Errorf("storage: %s: stable key %q: %w", s.dir, key, wire.ErrNotFound)
	}
	return append([]byte{}, v...), nil
}

// Keys implements StableStore.
func (s *WALStore) Keys(prefix string) ([]string, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, ErrClosed
	}
	var keys []string
	for k := range maps.Keys(s.stable) {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys, nil
}
