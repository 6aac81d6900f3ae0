package mvcc

import (
	"errors"
	"fmt"

	"github.com/edictlog/edictlog/cmd/edictkv/internal/mvcc/backend"
)

// Defrag defragments the backend (etcd's Maintenance.Defragment): the
// space that compaction freed is given back, so that Size falls to about
// SizeInUse. The store's content, revisions and indexes do not change,
// nor does anything a read sees: see backend.Defragmenter for what the
// backend guarantees. Commits and new reads wait while it runs (as in
// etcd); writes go on into the store's buffer until a batch is full. It
// fails, wrapping errors.ErrUnsupported, on a backend that cannot.
func (s *Store) Defrag() error {
	d, ok := s.be.(backend.Defragmenter)
	if !ok {
		return fmt.Errorf("mvcc: defragment: %w: the backend (%T) cannot", errors.ErrUnsupported, s.be)
	}
	if err := d.Defrag(); err != nil {
		return fmt.Errorf("mvcc: %w", err)
	}
	return nil
}
