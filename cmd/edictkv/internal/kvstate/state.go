package kvstate

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/edictlog/edictlog/cmd/edictkv/internal/mvcc"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/mvcc/backend"
	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/fsm"
)

// The refusals Apply and the reads return. Each is a value the same on
// every replica: the entry is applied (its index recorded) and changes
// nothing else.
var (
	// ErrCompacted, ErrFutureRev and ErrKeyNotFound are the store's, etcd's
	// meaning: a revision compacted away, a revision not made yet, a put
	// with ignore_value or ignore_lease of a key that does not exist.
	ErrCompacted   = mvcc.ErrCompacted
	ErrFutureRev   = mvcc.ErrFutureRev
	ErrKeyNotFound = mvcc.ErrKeyNotFound
	// ErrNoSpace: a Put, or a Txn with puts, while the NOSPACE alarm is
	// active (etcd's capped applier).
	ErrNoSpace = errors.New("kvstate: no space")
	// ErrCorrupt: any KV request while the CORRUPT alarm is active (etcd's
	// corrupt applier).
	ErrCorrupt = errors.New("kvstate: corrupt cluster")
	// ErrDuplicateKey: a Txn that writes one key twice on one path, or
	// puts a key it deletes (etcd's checkIntervals).
	ErrDuplicateKey = errors.New("kvstate: duplicate key given in txn request")
	// ErrInvalid: a request that etcd's API refuses before proposing it
	// (an empty key, a value given with ignore_value, …).
	ErrInvalid = errors.New("kvstate: invalid request")
	// ErrApplied: the entry's index is at or below the state's consistent
	// index, which already holds its effects; it is skipped.
	ErrApplied = errors.New("kvstate: entry already applied")
)

// Options configures a State.
type Options struct {
	// Store configures the MVCC store. A server sets Background: the
	// store commits every BatchInterval and its own goroutine performs
	// physical compaction (see Result.Physical). Without it the caller
	// calls CompactStep (the simulator's way).
	Store mvcc.Options
	// Bolt configures the bbolt file of OpenFile.
	Bolt backend.BoltOptions
}

// State is edictkv's replicated state. It implements fsm.StagingFSM (a
// fsm.DiskFSM) and fsm.Querier; see the package documentation. Its reads are safe for
// concurrent use with Apply and with each other.
type State struct {
	st *mvcc.Store

	// mu guards the in-memory copies of the system namespace; Apply
	// changes them only after the write that records them ended.
	mu      sync.RWMutex
	members map[uint64]map[string]string
	alarms  []*pb.AlarmMember // sorted by member, then alarm
	// stampsFrom is the compaction revision the stamp records were last
	// collected at (-1 before any): see collectStamps. Apply goroutine
	// only.
	stampsFrom int64

	// revMu guards revCh, which AwaitRev's callers wait on and which is
	// closed (and forgotten) whenever the revision may have moved: after
	// every Apply, Restore and InstallStaged.
	revMu sync.Mutex
	revCh chan struct{}
}

// AwaitRev returns once the state is at revision rev or past it, or with
// ctx's error if ctx ends first.
func (s *State) AwaitRev(ctx context.Context, rev int64) error {
	for {
		s.revMu.Lock()
		if s.Rev() >= rev {
			s.revMu.Unlock()
			return nil
		}
		if s.revCh == nil {
			s.revCh = make(chan struct{})
		}
		ch := s.revCh
		s.revMu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// revMoved wakes AwaitRev's callers to look at the revision again. It
// runs after the store's revision changed, so a caller that looked before
// has its channel closed, and one that looks after sees the change.
func (s *State) revMoved() {
	s.revMu.Lock()
	if s.revCh != nil {
		close(s.revCh)
		s.revCh = nil
	}
	s.revMu.Unlock()
}

// OpenFile opens (or creates) the state kept in the bbolt file at path.
func OpenFile(path string, o Options) (*State, error) {
	st, err := mvcc.OpenFile(path, o.Bolt, o.Store)
	if err != nil {
		return nil, fmt.Errorf("kvstate: open %s: %w", path, err)
	}
	s, err := open(st)
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("kvstate: open %s: %w", path, err)
	}
	return s, nil
}

// Open opens the state kept in be (a backend.Memory in the simulator and
// tests). The State owns be from then on.
func Open(be backend.Backend, o Options) (*State, error) {
	st, err := mvcc.Open(be, o.Store)
	if err != nil {
		return nil, fmt.Errorf("kvstate: open: %w", err)
	}
	s, err := open(st)
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("kvstate: open: %w", err)
	}
	return s, nil
}

func open(st *mvcc.Store) (*State, error) {
	s := &State{st: st}
	if err := s.load(); err != nil {
		return nil, err
	}
	return s, nil
}

// load reads the system namespace into memory, checking every record.
func (s *State) load() error {
	sys, err := loadSystem(s.st)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.members, s.alarms = sys.members, sys.alarms
	s.mu.Unlock()
	s.stampsFrom = sys.stampsFrom
	return nil
}

// Close commits what is pending and closes the store.
func (s *State) Close() error { return s.st.Close() }

// Store is the MVCC store under the state, for what the state does not
// wrap (sizes, HashKV). Never write to it.
func (s *State) Store() *mvcc.Store { return s.st }

// Rev is the current revision: etcd's header revision.
func (s *State) Rev() int64 { return s.st.Rev() }

// CompactRev is the revision of the last compaction, -1 before any.
func (s *State) CompactRev() int64 { return s.st.CompactRev() }

// AppliedIndex is the log index of the last entry applied.
func (s *State) AppliedIndex() uint64 { return s.st.ConsistentIndex() }

// RevisionIndex is the log index of the entry that made revision rev
// (ErrCompacted below CompactRev, ErrFutureRev above Rev).
func (s *State) RevisionIndex(rev int64) (uint64, error) { return s.st.RevisionIndex(rev) }

// CompactStep performs one step of the pending physical compaction, for a
// state opened without Options.Store.Background. It reports whether work
// remains.
func (s *State) CompactStep() (bool, error) { return s.st.CompactStep() }

// DurableIndex implements fsm.DiskFSM: the consistent index committed to
// the store.
func (s *State) DurableIndex() (uint64, error) { return s.st.DurableIndex(), nil }

// Sync implements fsm.DiskFSM: it commits every change pending.
func (s *State) Sync() (uint64, error) {
	d, err := s.st.Commit()
	if err != nil {
		return d, fmt.Errorf("kvstate: sync: %w", err)
	}
	return d, nil
}

// Snapshot implements fsm.FSM: it commits what is pending and captures the
// store's file (mvcc.Store.Snapshot), which Persist streams while entries
// go on being applied.
func (s *State) Snapshot() (fsm.Snapshot, error) {
	sn, err := s.st.Snapshot()
	if err != nil {
		return nil, fmt.Errorf("kvstate: snapshot: %w", err)
	}
	return snapshot{sn}, nil
}

type snapshot struct{ sn *mvcc.Snapshot }

var (
	_ fsm.StagingFSM    = (*State)(nil)
	_ fsm.SizedSnapshot = snapshot{}
)

func (sn snapshot) Persist(w io.Writer) error {
	_, err := sn.sn.WriteTo(w)
	return err
}

// Size implements fsm.SizedSnapshot: the log streams the snapshot to a
// peer straight from Persist, as etcd streams its database.
func (sn snapshot) Size() int64 { return sn.sn.Size() }

func (sn snapshot) Release() { sn.sn.Close() }

// Restore implements fsm.FSM: the store's checked restore (it installs the
// new file only once it is read whole and checked), then the system
// namespace is read from it. On error before the install the previous
// state is intact; a system record the store accepted but this package
// cannot read fails the restore after it, naming the record (a stream no
// replica could have written).
func (s *State) Restore(r io.Reader) error {
	sys, err := func() (*system, error) {
		if err := s.st.Restore(r); err != nil {
			return nil, err
		}
		return loadSystem(s.st)
	}()
	defer s.revMoved()
	if err != nil {
		return fmt.Errorf("kvstate: restore: %w", err)
	}
	s.mu.Lock()
	s.members, s.alarms = sys.members, sys.alarms
	s.mu.Unlock()
	s.stampsFrom = sys.stampsFrom
	return nil
}

// Stage implements fsm.StagingFSM: the store stages the snapshot
// (mvcc.Store.Stage: for a bbolt file, written once, fsynced, checked page
// by page and as a start checks a store, and renamed to the staged file),
// its system namespace checked as a start reads it; the state in use is
// untouched.
func (s *State) Stage(index uint64, r io.Reader) error {
	if err := s.st.Stage(index, r, checkSystem); err != nil {
		return fmt.Errorf("kvstate: stage: %w", err)
	}
	return nil
}

// InstallStaged implements fsm.StagingFSM: the store installs what it
// staged (for a bbolt file, renamed over the file), then the system
// namespace is read from it. On error the state is as it was.
func (s *State) InstallStaged(index uint64) error {
	defer s.revMoved()
	if err := s.st.InstallStaged(index, checkSystem); err != nil {
		return fmt.Errorf("kvstate: install: %w", err)
	}
	sys, err := loadSystem(s.st)
	if err != nil {
		return fmt.Errorf("kvstate: install: %w", err)
	}
	s.mu.Lock()
	s.members, s.alarms = sys.members, sys.alarms
	s.mu.Unlock()
	s.stampsFrom = sys.stampsFrom
	return nil
}

// DiscardStaged implements fsm.StagingFSM.
func (s *State) DiscardStaged() error {
	if err := s.st.DiscardStaged(); err != nil {
		return fmt.Errorf("kvstate: %w", err)
	}
	return nil
}

// Query implements fsm.Querier for the log's read barrier (edictlog.Node.Read):
// the empty query answers the current revision, 8 big-endian bytes. Reads
// themselves are served by Range once the barrier returns.
func (s *State) Query(q []byte) ([]byte, error) {
	if len(q) != 0 {
		return nil, fmt.Errorf("%w: the state answers only the empty query (a read barrier); read with Range", ErrInvalid)
	}
	return binary.BigEndian.AppendUint64(nil, uint64(s.Rev())), nil
}

// Range answers etcd's RangeRequest from the applied state: at
// r.Revision (0: the current one) with every option, as etcd's
// executeRange. The response's header carries the revision the state was
// at. Stamps holds the edict stamp of each kv's mod_revision, where known.
// It refuses a revision below CompactRev (ErrCompacted) or above Rev
// (ErrFutureRev), and every read while the CORRUPT alarm is active.
func (s *State) Range(ctx context.Context, r *pb.RangeRequest) (*pb.RangeResponse, map[int64]edict.Stamp, error) {
	return s.rangeRead(ctx, r, true)
}

// RangeUnstamped answers as Range does, without the stamps: the etcd API's
// read, whose response has no field for them, costs one read view of the
// store and no stamp record.
func (s *State) RangeUnstamped(ctx context.Context, r *pb.RangeRequest) (*pb.RangeResponse, error) {
	resp, _, err := s.rangeRead(ctx, r, false)
	return resp, err
}

func (s *State) rangeRead(ctx context.Context, r *pb.RangeRequest, withStamps bool) (*pb.RangeResponse, map[int64]edict.Stamp, error) {
	if s.alarmed(pb.AlarmType_CORRUPT) {
		return nil, nil, ErrCorrupt
	}
	if len(r.Key) == 0 {
		return nil, nil, fmt.Errorf("%w: range of the empty key", ErrInvalid)
	}
	tr, err := s.st.Read()
	if err != nil {
		return nil, nil, fmt.Errorf("kvstate: range: %w", err)
	}
	defer tr.End()
	resp, err := executeRange(ctx, tr, r)
	if err != nil || !withStamps {
		return resp, nil, err
	}
	// The view holds off compaction: every revision the answer names
	// still has its stamp record (see collectStamps).
	st := stamps{}
	if err := st.collect(s.st, appendKVs(nil, resp.Kvs)); err != nil {
		return nil, nil, err
	}
	return resp, st, nil
}

// Stamps returns the edict stamp of each revision of revs whose stamp
// record the state still holds: every revision from the compaction
// revision on (a watch's events are there), and below it the
// mod_revisions of the keys alive at it (see collectStamps).
func (s *State) Stamps(revs []int64) (map[int64]edict.Stamp, error) {
	st := stamps{}
	if err := st.collect(s.st, revs); err != nil {
		return nil, err
	}
	return st, nil
}

// Member returns the attributes recorded for member id (nil: none).
func (s *State) Member(id uint64) map[string]string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if m, ok := s.members[id]; ok {
		out := make(map[string]string, len(m))
		for k, v := range m {
			out[k] = v
		}
		return out
	}
	return nil
}

// Members returns the ids that have a record, in order.
func (s *State) Members() []uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	ids := make([]uint64, 0, len(s.members))
	for id := range s.members {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Alarms returns the active alarms of type t (NONE: every one), as etcd's
// AlarmStore.Get, in member then type order.
func (s *State) Alarms(t pb.AlarmType) []*pb.AlarmMember {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []*pb.AlarmMember
	for _, a := range s.alarms {
		if t == pb.AlarmType_NONE || a.Alarm == t {
			out = append(out, &pb.AlarmMember{MemberID: a.MemberID, Alarm: a.Alarm})
		}
	}
	return out
}

func (s *State) alarmed(t pb.AlarmType) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, a := range s.alarms {
		if a.Alarm == t {
			return true
		}
	}
	return false
}
