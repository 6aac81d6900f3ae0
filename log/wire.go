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

// encodeVersioned writes a version byte and v in msgpack: the form of the
// log's own stable records and edict payloads.
func encodeVersioned(version byte, v any) ([]byte, error) {
	var body []byte
	if err := codec.NewEncoderBytes(&body, recordHandle).Encode(v); err != nil {
		return nil, err
	}
	return append([]byte{version}, body...), nil
}

// decodeVersioned reads what encodeVersioned wrote into v, refusing a
// missing or unknown version byte and trailing bytes; what names the
// input in errors.
func decodeVersioned(what string, version byte, b []byte, v any) error {
	if len(b) == 0 || b[0] != version {
		return fmt.Errorf("log: %s: missing or unknown version byte", what)
	}
	d := codec.NewDecoderBytes(b[1:], recordHandle)
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("log: %s: %w", what, err)
	}
	if d.NumBytesRead() != len(b)-1 {
		return fmt.Errorf("log: %s: trailing bytes", what)
	}
	return nil
}

// EncodeEpochRecord stores the lease core's per-epoch record with a
// version byte.
func EncodeEpochRecord(r elect.EpochRecord) ([]byte, error) {
	return encodeVersioned(storage.RecordVersion, r)
}

// DecodeEpochRecord reads a record written by EncodeEpochRecord; key names
// it in errors.
func DecodeEpochRecord(key string, b []byte) (elect.EpochRecord, error) {
	var r elect.EpochRecord
	if err := decodeVersioned(fmt.Sprintf("stable key %q", key), storage.RecordVersion, b, &r); err != nil {
		return elect.EpochRecord{}, err
	}
	return r, nil
}
