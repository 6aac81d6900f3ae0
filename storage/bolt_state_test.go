package storage

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/edictlog/edictlog/edict"
)

func TestStateRecordVersions(t *testing.T) {
	base, err := encodeBase(testStamp(9))
	require.NoError(t, err)
	st := boltState{txid: 42, first: 10, last: 20, logDigest: 0xdeadbeef, stableDigest: 7, baseEnc: base}
	got, err := decodeState(st.encode(nil))
	require.NoError(t, err)
	require.Equal(t, st, got)

	// Version 1, written before commits synced once, has no txid.
	p := []byte{stateVersionV1}
	p = binary.BigEndian.AppendUint64(p, 10)
	p = binary.BigEndian.AppendUint64(p, 20)
	p = binary.BigEndian.AppendUint32(p, 0xdeadbeef)
	p = binary.BigEndian.AppendUint32(p, 7)
	p = append(p, base...)
	got, err = decodeState(frame(nil, keyState, p))
	require.NoError(t, err)
	st.txid = 0
	require.Equal(t, st, got)

	for name, v := range map[string][]byte{
		"unknown version": frame(nil, keyState, append([]byte{3}, p[1:]...)),
		"txid 0":          (&boltState{first: 1}).encode(nil),
		"short v2":        frame(nil, keyState, append([]byte{stateVersion}, p[1:20]...)),
		"bad checksum":    append(st.encode(nil)[:10], 0, 0, 0, 0),
	} {
		_, err := decodeState(v)
		require.Error(t, err, name)
	}
}

// FuzzDecodeState: the state record decoder never panics, and what it
// accepts re-encodes to the same record.
func FuzzDecodeState(f *testing.F) {
	base, _ := edict.EncodeStamp(testStamp(3))
	for _, st := range []boltState{{txid: 2, first: 1}, {txid: 9, first: 5, last: 30, logDigest: 1, stableDigest: 2, baseEnc: base}} {
		f.Add(st.encode(nil))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		st, err := decodeState(v)
		if err != nil || st.txid == 0 {
			return
		}
		again, err := decodeState(st.encode(nil))
		require.NoError(t, err)
		require.Equal(t, st, again)
	})
}
