package log

import (
	"fmt"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect"
	"github.com/edictlog/edictlog/storage"
	"github.com/edictlog/edictlog/transport"
	"github.com/hashicorp/go-msgpack/v2/codec"
)

func toWire(es []storage.Entry) []transport.Entry {
	out := make([]transport.Entry, len(es))
	for i, e := range es {
		out[i] = transport.Entry{Index: e.Index, Reign: e.Reign, Stamp: e.Stamp, Kind: transport.EntryKind(e.Kind), Data: e.Data}
	}
	return out
}

func fromWire(e transport.Entry) storage.Entry {
	return storage.Entry{Index: e.Index, Reign: e.Reign, Stamp: e.Stamp, Kind: storage.EntryKind(e.Kind), Data: e.Data}
}

func errNotMember(p edict.ProcessID, epoch uint64) error {
	return fmt.Errorf("log: %v is not a member of epoch %d", p, epoch)
}

var recordHandle = func() *codec.MsgpackHandle {
	h := &codec.MsgpackHandle{WriteExt: true}
	h.ErrorIfNoField = true
	return h
}()

// EncodeEpochRecord stores the lease core's per-epoch record with a
// version byte.
func EncodeEpochRecord(r elect.EpochRecord) ([]byte, error) {
	var body []byte
	if err := codec.NewEncoderBytes(&body, recordHandle).Encode(r); err != nil {
		return nil, err
	}
	return append([]byte{storage.RecordVersion}, body...), nil
}

// DecodeEpochRecord reads a record written by EncodeEpochRecord; key names
// it in errors.
func DecodeEpochRecord(key string, b []byte) (elect.EpochRecord, error) {
	var r elect.EpochRecord
	if len(b) == 0 || b[0] != storage.RecordVersion {
		return r, fmt.Errorf("log: stable key %q: missing or unknown version byte", key)
	}
	d := codec.NewDecoderBytes(b[1:], recordHandle)
	if err := d.Decode(&r); err != nil {
		return r, fmt.Errorf("log: stable key %q: %w", key, err)
	}
	if d.NumBytesRead() != len(b)-1 {
		return r, fmt.Errorf("log: stable key %q: trailing bytes", key)
	}
	return r, nil
}
