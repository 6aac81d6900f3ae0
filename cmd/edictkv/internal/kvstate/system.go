package kvstate

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/edictlog/edictlog/cmd/edictkv/internal/mvcc"
	"github.com/edictlog/edictlog/edict"
)

// The system namespace lives in the store's application records
// (mvcc.TxnWrite.PutRecord), outside the keyspace that user requests
// read and write: no key of theirs can name it, no range sees it, no
// revision counts it. Its records:
//
//	"m" member(8) name   a member directory attribute's value
//	"a" member(8) type(4)  an active alarm (empty value)
//	"s" revision(8)      the log index (uvarint) and edict stamp
//	                     (edict.EncodeStamp, absent if the entry had
//	                     none) of the entry that made the revision
//	"g"                  the compaction revision the stamp records were
//	                     last collected at (8 bytes)
//
// Numbers are big-endian, so that records sort by them.
const (
	tagMember = 'm'
	tagAlarm  = 'a'
	tagStamp  = 's'
	tagGC     = 'g'
)

func memberKey(id uint64, name string) []byte {
	k := binary.BigEndian.AppendUint64([]byte{tagMember}, id)
	return append(k, name...)
}

func alarmKey(a *pb.AlarmMember) []byte {
	k := binary.BigEndian.AppendUint64([]byte{tagAlarm}, a.MemberID)
	return binary.BigEndian.AppendUint32(k, uint32(a.Alarm))
}

func stampKey(rev int64) []byte { return appendStampKey(nil, rev) }

func appendStampKey(dst []byte, rev int64) []byte {
	return binary.BigEndian.AppendUint64(append(dst, tagStamp), uint64(rev))
}

var gcKey = []byte{tagGC}

// appendStampRecord appends the stamp record of the entry at index to
// dst. A stamp the log would not have made (tests' zero parts) is left
// out: the index alone is kept.
func appendStampRecord(dst []byte, index uint64, st edict.Stamp) []byte {
	dst = binary.AppendUvarint(dst, index)
	if st.IsZero() || st.WellFormed() != nil {
		return dst
	}
	// edict.EncodeStamp's encoding, appended.
	return edict.AppendStampMsgpack(append(dst, edict.WireVersion), &st)
}

func decodeStampRecord(v []byte) (uint64, edict.Stamp, error) {
	index, n := binary.Uvarint(v)
	if n <= 0 {
		return 0, edict.Stamp{}, fmt.Errorf("stamp record %x: bad index", v)
	}
	if n == len(v) {
		return index, edict.Stamp{}, nil
	}
	st, err := edict.DecodeStamp(v[n:])
	if err != nil {
		return 0, edict.Stamp{}, fmt.Errorf("stamp record %x: %w", v, err)
	}
	return index, st, nil
}

// system is the system namespace as loaded from the store.
type system struct {
	members    map[uint64]map[string]string
	alarms     []*pb.AlarmMember
	stampsFrom int64
}

// loadSystem reads and checks every system record.
func loadSystem(st *mvcc.Store) (*system, error) {
	rv, err := st.ReadRecords()
	if err != nil {
		return nil, err
	}
	defer rv.Release()
	return readSystem(rv)
}

// checkSystem checks every system record rv holds (a snapshot being
// staged: mvcc.Store.Stage).
func checkSystem(rv *mvcc.RecordView) error {
	_, err := readSystem(rv)
	return err
}

// readSystem reads and checks every system record rv holds.
func readSystem(rv *mvcc.RecordView) (*system, error) {
	sys := &system{members: map[uint64]map[string]string{}, stampsFrom: -1}
	var bad error
	rv.Ascend([]byte{tagMember}, []byte{tagMember + 1}, func(k, v []byte) bool {
		if len(k) < 10 {
			bad = fmt.Errorf("%w: member record key %x", mvcc.ErrCorrupt, k)
			return false
		}
		id := binary.BigEndian.Uint64(k[1:9])
		if sys.members[id] == nil {
			sys.members[id] = map[string]string{}
		}
		sys.members[id][string(k[9:])] = string(v)
		return true
	})
	rv.Ascend([]byte{tagAlarm}, []byte{tagAlarm + 1}, func(k, v []byte) bool {
		if len(k) != 13 || len(v) != 0 {
			bad = fmt.Errorf("%w: alarm record %x", mvcc.ErrCorrupt, k)
			return false
		}
		sys.alarms = append(sys.alarms, &pb.AlarmMember{MemberID: binary.BigEndian.Uint64(k[1:9]),
			Alarm: pb.AlarmType(binary.BigEndian.Uint32(k[9:]))})
		return true
	})
	if v := rv.Get(gcKey); v != nil {
		if len(v) != 8 {
			return nil, fmt.Errorf("%w: stamp collection record %x", mvcc.ErrCorrupt, v)
		}
		sys.stampsFrom = int64(binary.BigEndian.Uint64(v))
	}
	if bad != nil {
		return nil, bad
	}
	return sys, nil
}

// stamps collects the stamps of the revisions an answer names.
type stamps map[int64]edict.Stamp

// collect reads the stamp record of every revision in revs it lacks.
func (s stamps) collect(st *mvcc.Store, revs []int64) error {
	lacks := func(rev int64) bool {
		_, ok := s[rev]
		return !ok && rev > 1
	}
	if !slices.ContainsFunc(revs, lacks) {
		return nil
	}
	rv, err := st.ReadRecords()
	if err != nil {
		return fmt.Errorf("kvstate: stamps: %w", err)
	}
	defer rv.Release()
	var kb [9]byte
	for _, rev := range revs {
		if !lacks(rev) {
			continue
		}
		v := rv.Get(appendStampKey(kb[:0], rev))
		if v == nil {
			continue
		}
		_, stamp, err := decodeStampRecord(v)
		if err != nil {
			return fmt.Errorf("%w: revision %d: %v", mvcc.ErrCorrupt, rev, err)
		}
		if !stamp.IsZero() {
			s[rev] = stamp
		}
	}
	return nil
}

// appendKVs appends the mod_revision of each pair to dst.
func appendKVs(dst []int64, kvs []*mvccpb.KeyValue) []int64 {
	for _, kv := range kvs {
		if kv != nil {
			dst = append(dst, kv.ModRevision)
		}
	}
	return dst
}

// appendResponses appends the revisions a txn's responses name, nested
// ones' too, to dst.
func appendResponses(dst []int64, rs []*pb.ResponseOp) []int64 {
	for _, r := range rs {
		switch {
		case r.GetResponseRange() != nil:
			dst = appendKVs(dst, r.GetResponseRange().Kvs)
		case r.GetResponsePut() != nil:
			if p := r.GetResponsePut().PrevKv; p != nil {
				dst = append(dst, p.ModRevision)
			}
		case r.GetResponseDeleteRange() != nil:
			dst = appendKVs(dst, r.GetResponseDeleteRange().PrevKvs)
		case r.GetResponseTxn() != nil:
			dst = appendResponses(dst, r.GetResponseTxn().Responses)
		}
	}
	return dst
}

// collectStamps removes, in the write of the first entry after a
// compaction, the stamp records no read can name any more: those of
// revisions below the compaction revision that are not the mod_revision
// of a key alive at it (a read at or after the compaction revision sees
// only those, or later revisions). It depends on the replicated state
// alone, so every replica removes the same records at the same entry,
// and a crash before the entry's batch commits repeats it.
func (s *State) collectStamps(ctx context.Context, tw *mvcc.TxnWrite) error {
	cr := s.st.CompactRev()
	if cr <= s.stampsFrom {
		return nil
	}
	alive := map[int64]struct{}{}
	rr, err := tw.Range(ctx, []byte{0}, []byte{0}, mvcc.RangeOptions{Rev: cr, KeysOnly: true})
	if err != nil {
		return fmt.Errorf("kvstate: collecting stamps at revision %d: %w", cr, err)
	}
	for _, kv := range rr.KVs {
		alive[kv.ModRevision] = struct{}{}
	}
	rv, err := s.st.ReadRecords()
	if err != nil {
		return fmt.Errorf("kvstate: collecting stamps: %w", err)
	}
	var drop [][]byte
	rv.Ascend(stampKey(0), stampKey(cr), func(k, _ []byte) bool {
		if len(k) == 9 {
			if _, ok := alive[int64(binary.BigEndian.Uint64(k[1:]))]; ok {
				return true
			}
		}
		drop = append(drop, slices.Clone(k))
		return true
	})
	rv.Release()
	for _, k := range drop {
		if err := tw.DeleteRecord(k); err != nil {
			return err
		}
	}
	if err := tw.PutRecord(gcKey, binary.BigEndian.AppendUint64(nil, uint64(cr))); err != nil {
		return err
	}
	s.stampsFrom = cr
	return nil
}
