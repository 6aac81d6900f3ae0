package storage

import (
	"bytes"
	"crypto/sha256"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
)

// snapMetaRecordNoAddrs is snapMetaRecord as it was written before
// snapshots carried addresses.
type snapMetaRecordNoAddrs struct {
	ID      string           `codec:"id"`
	Index   uint64           `codec:"i"`
	Reign   edict.Stamp      `codec:"r"`
	Stamp   edict.Stamp      `codec:"s"`
	Config  wire.EpochConfig `codec:"c"`
	Size    int64            `codec:"n"`
	SHA256  []byte           `codec:"h"`
	Created int64            `codec:"t"`
}

func addrsSnapMeta(t *testing.T) wire.SnapshotMeta {
	t.Helper()
	qt, err := edict.NewQT(edict.Reading{Process: 1, T: edict.Time{Incarnation: 1, Nanos: 100}}, edict.Reading{Process: 2, T: edict.Time{Incarnation: 1, Nanos: 100}})
	require.NoError(t, err)
	m := wire.SnapshotMeta{Index: 7, Reign: edict.Stamp{Epoch: 1, QT: qt}, Stamp: edict.Stamp{Epoch: 1, QT: qt, Counter: 7},
		Config: wire.EpochConfig{Epoch: 1, Members: []edict.ProcessID{1, 2, 3}, Learners: []edict.ProcessID{4}},
		Addrs:  map[edict.ProcessID]string{2: "10.0.0.2:7000", 4: "n4.example:7000"}}
	m.Created = time.Unix(0, 1234567890)
	m.ID = newSnapshotID(m.Index, m.Created)
	m.Size = 5
	sum := sha256.Sum256([]byte("state"))
	m.SHA256 = sum[:]
	return m
}

// Metadata written before snapshots carried addresses still reads, with
// none; metadata without addresses is written as it was then.
func TestSnapMetaWithoutAddrs(t *testing.T) {
	m := addrsSnapMeta(t)
	rec, err := encodeRecord(wire.RecordVersion, snapMetaRecordNoAddrs{
		ID: m.ID, Index: m.Index, Reign: m.Reign, Stamp: m.Stamp, Config: m.Config,
		Size: m.Size, SHA256: m.SHA256, Created: m.Created.UnixNano(),
	})
	require.NoError(t, err)
	old := frame(nil, snapMetaKey, rec)
	got, err := decodeSnapMeta(old)
	require.NoError(t, err)
	require.Nil(t, got.Addrs)
	require.Equal(t, m.ID, got.ID)
	require.Equal(t, m.Config, got.Config)
	require.True(t, got.Created.Equal(m.Created))

	m.Addrs = nil
	b, err := encodeSnapMeta(m)
	require.NoError(t, err)
	require.Equal(t, old, b)
}

func TestSnapMetaAddrsRoundTrip(t *testing.T) {
	m := addrsSnapMeta(t)
	b, err := encodeSnapMeta(m)
	require.NoError(t, err)
	got, err := decodeSnapMeta(b)
	require.NoError(t, err)
	require.Equal(t, m.Addrs, got.Addrs)
	for range 10 {
		again, err := encodeSnapMeta(m)
		require.NoError(t, err)
		require.True(t, bytes.Equal(b, again), "metadata encodes the same whatever Go's map order")
	}

	// A record listing a process twice is damaged, not half-read.
	r := snapMetaRecord{ID: m.ID, Index: m.Index, Reign: m.Reign, Stamp: m.Stamp, Config: m.Config, Size: m.Size, SHA256: m.SHA256,
		Created: m.Created.UnixNano(), Addrs: []snapAddr{{P: 2, A: "a:1"}, {P: 2, A: "b:1"}}}
	rec, err := encodeRecord(wire.RecordVersion, r)
	require.NoError(t, err)
	_, err = decodeSnapMeta(frame(nil, snapMetaKey, rec))
	require.ErrorContains(t, err, "address of p2 listed twice")
	r.Addrs = []snapAddr{{P: 9, A: "a:1"}}
	rec, err = encodeRecord(wire.RecordVersion, r)
	require.NoError(t, err)
	_, err = decodeSnapMeta(frame(nil, snapMetaKey, rec))
	require.ErrorIs(t, err, ErrInvalid)
	require.ErrorContains(t, err, "address of p9, which is neither a member nor a learner")
}

// The largest metadata a snapshot can have still fits a record: the most
// processes a configuration names, stamps of the widest quorum, and the
// most address bytes.
func TestSnapMetaLargestFits(t *testing.T) {
	m := addrsSnapMeta(t)
	m.Config.Members, m.Config.Learners = nil, nil
	for p := range edict.ProcessID(wire.MaxConfigMembers) {
		if p%2 == 0 {
			m.Config.Members = append(m.Config.Members, p+1)
		} else {
			m.Config.Learners = append(m.Config.Learners, p+1)
		}
	}
	var rs []edict.Reading
	for p := range edict.ProcessID(edict.MaxQTSize) {
		rs = append(rs, edict.Reading{Process: p + 1, T: edict.Time{Incarnation: 1 << 60, Nanos: 1 << 62}})
	}
	qt, err := edict.NewQT(rs...)
	require.NoError(t, err)
	m.Reign = edict.Stamp{Epoch: 1 << 60, QT: qt}
	m.Stamp = edict.Stamp{Epoch: 1 << 60, QT: qt, Counter: 1 << 62}
	m.Addrs = map[edict.ProcessID]string{}
	for p := edict.ProcessID(1); len(m.Addrs)*wire.MaxAddrLen < wire.MaxAddrsLen; p++ {
		m.Addrs[p] = strings.Repeat("a", wire.MaxAddrLen)
	}
	require.NoError(t, checkSnapshotMeta(&m))
	b, err := encodeSnapMeta(m)
	require.NoError(t, err)
	_, err = decodeSnapMeta(b)
	require.NoError(t, err, "metadata of %d bytes", len(b))
}
