package wire

import (
	"testing"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect"
)

// The stable records this session's epoch work added fields to
// (EpochRecord.Runs; EpochConfig.Heard, StopIndex, StopStamp): a record
// decodes to what was encoded, and any bytes decode to a record or to an
// error, never a panic or a record that fails its own check.

func FuzzDecodeEpochRecord(f *testing.F) {
	for _, r := range []elect.EpochRecord{{Epoch: 3, Wedged: true}, {Epoch: 4, Terminated: true, Runs: true}} {
		b, err := EncodeEpochRecord(r)
		if err != nil {
			f.Fatal(err)
		}
		got, err := DecodeEpochRecord("seed", b)
		if err != nil || got != r {
			f.Fatalf("round trip of %+v: %+v, %v", r, got, err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = DecodeEpochRecord("fuzz", b)
	})
}

func FuzzDecodeEpochConfig(f *testing.F) {
	stop := edict.Stamp{Epoch: 1, QT: edict.QT{{Process: 1, T: edict.Time{Incarnation: 1, Nanos: 5}}}, Counter: 7}
	for _, c := range []EpochConfig{
		{Epoch: 1, Members: []edict.ProcessID{1, 2, 3}, Learners: []edict.ProcessID{4}},
		{Epoch: 2, Members: []edict.ProcessID{1, 2, 4}, Heard: true, StopIndex: 9, StopStamp: stop},
	} {
		b, err := EncodeEpochConfig(c)
		if err != nil {
			f.Fatal(err)
		}
		got, err := DecodeEpochConfig("seed", b)
		if err != nil || got.StopIndex != c.StopIndex || !got.StopStamp.Equal(c.StopStamp) || got.Heard != c.Heard {
			f.Fatalf("round trip of %+v: %+v, %v", c, got, err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeEpochConfig("fuzz", b)
		if err == nil {
			if err := c.Check(); err != nil {
				t.Fatalf("decoded a configuration its own check refuses: %v", err)
			}
		}
	})
}
