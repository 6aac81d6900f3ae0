package storage

import (
	"fmt"
	"os"
)

// Preallocation keeps file blocks written with zeros ahead of the pages
// bbolt uses. bbolt grows its file with ftruncate, which leaves holes, and
// most commits of an append-only log write a page or two past the old
// high-water mark; writing into a hole makes the filesystem allocate the
// block, and the commit's fdatasync then also has to commit that allocation
// through the journal (about 50µs, a quarter of a small commit, on ext4 on
// the benchmark machine). Zero-filling ahead, in large steps outside the
// commits, takes that cost off the commit path.
//
// Safety: the zeros go only past the high-water mark of the last commit,
// which bbolt never reads, and only while wmu is held, when no commit can be
// allocating those pages. The verifier and bbolt both ignore bytes past the
// high-water mark, so a crash during a fill leaves nothing to repair.

// prealloc extends the zero-filled region if fewer than ahead bytes are
// left past the pages in use. The caller holds wmu.
func (s *BoltStore) prealloc() {
	if s.opts.Preallocate <= 0 || s.preallocErr != nil {
		return
	}
	tx, err := s.db.Begin(false)
	if err != nil {
		return
	}
	used := tx.Size() // the high-water mark of the last commit
	tx.Rollback()
	ahead := int64(s.opts.Preallocate)
	if s.pf == nil {
		f, err := os.OpenFile(s.path, os.O_WRONLY, 0)
		if err != nil {
			s.stopPrealloc(err)
			return
		}
		// Past the used pages, a run without holes was allocated by an
		// earlier fill (or by a commit that never completed): bbolt grows
		// the file with ftruncate, which leaves holes. What it holds does
		// not matter, only that writing there allocates nothing.
		s.pf, s.zeroedTo = f, allocatedUpTo(f, used)
	}
	if s.zeroedTo >= used+ahead/4 {
		return
	}
	from := max(s.zeroedTo, used)
	to := used + ahead
	if err := s.zeroFill(from, to); err != nil {
		s.stopPrealloc(err)
		return
	}
	s.zeroedTo = to
}

// stopPrealloc gives up preallocating. It is only an optimisation: commits
// still work, in holes. Say so once.
func (s *BoltStore) stopPrealloc(err error) {
	s.preallocErr = err
	s.opts.Logger.Warn("storage: preallocation stopped", "path", s.path, "error", err)
}

var zeros = make([]byte, 1<<20)

func (s *BoltStore) zeroFill(from, to int64) error {
	for off := from; off < to; {
		n := min(int64(len(zeros)), to-off)
		if _, err := s.pf.WriteAt(zeros[:n], off); err != nil {
			return fmt.Errorf("zero-fill at %d: %w", off, err)
		}
		off += n
	}
	// Start writing the zeros back now, so that the next commit's fdatasync
	// finds them on their way rather than still to write.
	return startWriteback(s.pf, from, to-from)
}
