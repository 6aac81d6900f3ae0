package storage

import (
	"fmt"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

// storage's own records (the snapshot store's metadata) use go-msgpack's
// reflective codec, with the handle package wire's records were written
// with before wire's became hand-written so that the log need not link
// go-msgpack; storage is not on the log's import path.
var recordHandle = func() *codec.MsgpackHandle {
	h := &codec.MsgpackHandle{WriteExt: true}
	h.ErrorIfNoField = true
	h.MaxInitLen = 64
	return h
}()

// encodeRecord writes the version byte and the msgpack form of v.
func encodeRecord(version byte, v any) ([]byte, error) {
	// NewEncoderBytes writes from the start of the slice it is given (it
	// does not append), so the version byte goes in front afterwards.
	var body []byte
	if err := codec.NewEncoderBytes(&body, recordHandle).Encode(v); err != nil {
		return nil, fmt.Errorf("storage: encode %T: %w", v, err)
	}
	return append([]byte{version}, body...), nil
}

// decodeRecord checks the version byte and size (at most limit bytes),
// decodes one msgpack value and refuses trailing bytes. name says what is
// decoded, for errors.
func decodeRecord(name string, version byte, limit int, b []byte, v any) error {
	switch {
	case len(b) == 0:
		return fmt.Errorf("%s: empty record", name)
	case len(b) > limit:
		return fmt.Errorf("%s: %d bytes exceeds the limit of %d", name, len(b), limit)
	case b[0] != version:
		return fmt.Errorf("%s: unknown version byte %d (want %d)", name, b[0], version)
	}
	d := codec.NewDecoderBytes(b[1:], recordHandle)
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("%s: %v", name, err)
	}
	if n := d.NumBytesRead(); n != len(b)-1 {
		return fmt.Errorf("%s: %d trailing bytes", name, len(b)-1-n)
	}
	return nil
}
