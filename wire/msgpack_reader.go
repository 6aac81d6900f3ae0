package wire

import (
	"fmt"
	"math"

	"github.com/edictlog/edictlog/edict"
)

// mpReader decodes the small msgpack subset entries use. Field names passed
// for errors are constants (the offset locates the field), so that decoding
// allocates nothing but the entry. Every read checks
// the remaining input first; the first failure sticks in err and makes every
// later read a no-op, so the decoder is a straight line with one check at the
// end and cannot panic on any input.
type mpReader struct {
	b   []byte
	off int
	err error
}

func (r *mpReader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("at offset %d: %s", r.off, fmt.Sprintf(format, args...))
	}
}

func (r *mpReader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b)-r.off {
		r.fail("need %d bytes, %d left", n, len(r.b)-r.off)
		return nil
	}
	p := r.b[r.off : r.off+n]
	r.off += n
	return p
}

func (r *mpReader) byte1() byte {
	p := r.take(1)
	if p == nil {
		return 0
	}
	return p[0]
}

func (r *mpReader) peek() byte {
	if r.err != nil || r.off >= len(r.b) {
		r.fail("unexpected end of input")
		return 0
	}
	return r.b[r.off]
}

func (r *mpReader) be(n int) uint64 {
	p := r.take(n)
	var v uint64
	for _, c := range p {
		v = v<<8 | uint64(c)
	}
	return v
}

// mapLen reads a map header and requires exactly n pairs.
func (r *mpReader) mapLen(what string, n int) {
	c := r.byte1()
	var got int
	switch {
	case c >= 0x80 && c <= 0x8f:
		got = int(c & 0x0f)
	case c == 0xde:
		got = int(r.be(2))
	case c == 0xdf:
		got = int(r.be(4))
	default:
		r.fail("%s: want a map, got byte 0x%02x", what, c)
		return
	}
	if r.err == nil && got != n {
		r.fail("%s: map of %d fields, want %d", what, got, n)
	}
}

// key reads a one-character field name.
func (r *mpReader) key(what string) byte {
	c := r.byte1()
	var n int
	switch {
	case c >= 0xa0 && c <= 0xbf:
		n = int(c & 0x1f)
	case c == 0xd9:
		n = int(r.be(1))
	default:
		r.fail("%s: want a field name, got byte 0x%02x", what, c)
		return 0
	}
	p := r.take(n)
	if r.err == nil && len(p) != 1 {
		r.fail("%s: unknown field %q", what, p)
		return 0
	}
	if p == nil {
		return 0
	}
	return p[0]
}

// fields reads a map of exactly the named one-character fields, each once,
// calling f for each.
func (r *mpReader) fields(what, names string, f func(name byte)) {
	r.mapLen(what, len(names))
	seen := 0
	for i := 0; i < len(names) && r.err == nil; i++ {
		k := r.key(what)
		bit := -1
		for j := 0; j < len(names); j++ {
			if names[j] == k {
				bit = j
			}
		}
		switch {
		case r.err != nil:
			return
		case bit < 0:
			r.fail("%s: unknown field %q", what, []byte{k})
			return
		case seen&(1<<bit) != 0:
			r.fail("%s: field %q repeated", what, []byte{k})
			return
		}
		seen |= 1 << bit
		f(k)
	}
}

func (r *mpReader) uint(what string) uint64 {
	c := r.byte1()
	switch {
	case r.err != nil:
		return 0
	case c <= 0x7f:
		return uint64(c)
	case c == 0xcc:
		return r.be(1)
	case c == 0xcd:
		return r.be(2)
	case c == 0xce:
		return r.be(4)
	case c == 0xcf:
		return r.be(8)
	case c >= 0xd0 && c <= 0xd3: // signed forms of a non-negative value
		v := r.signed(c)
		if v < 0 {
			r.fail("%s: negative value %d", what, v)
			return 0
		}
		return uint64(v)
	}
	r.fail("%s: want an unsigned integer, got byte 0x%02x", what, c)
	return 0
}

func (r *mpReader) signed(c byte) int64 {
	switch c {
	case 0xd0:
		return int64(int8(r.be(1)))
	case 0xd1:
		return int64(int16(r.be(2)))
	case 0xd2:
		return int64(int32(r.be(4)))
	}
	return int64(r.be(8))
}

func (r *mpReader) int(what string) int64 {
	c := r.byte1()
	switch {
	case r.err != nil:
		return 0
	case c <= 0x7f:
		return int64(c)
	case c >= 0xe0:
		return int64(int8(c))
	case c >= 0xd0 && c <= 0xd3:
		return r.signed(c)
	case c >= 0xcc && c <= 0xcf:
		r.off--
		v := r.uint(what)
		if v > math.MaxInt64 {
			r.fail("%s: %d overflows int64", what, v)
			return 0
		}
		return int64(v)
	}
	r.fail("%s: want an integer, got byte 0x%02x", what, c)
	return 0
}

// bytes reads bin, str or nil and returns a copy (nil when empty).
func (r *mpReader) bytes(what string) []byte {
	c := r.byte1()
	var n uint64
	switch {
	case r.err != nil:
		return nil
	case c == 0xc0:
		return nil
	case c == 0xc4 || c == 0xd9:
		n = r.be(1)
	case c == 0xc5 || c == 0xda:
		n = r.be(2)
	case c == 0xc6 || c == 0xdb:
		n = r.be(4)
	case c >= 0xa0 && c <= 0xbf:
		n = uint64(c & 0x1f)
	default:
		r.fail("%s: want bytes, got byte 0x%02x", what, c)
		return nil
	}
	// take checks n against the input before anything is allocated.
	p := r.take(int(n))
	if len(p) == 0 {
		return nil
	}
	return append([]byte(nil), p...)
}

func (r *mpReader) entry(e *Entry) {
	r.fields("entry", "irskd", func(k byte) {
		switch k {
		case 'i':
			e.Index = r.uint("index")
		case 'r':
			r.stamp("reign", &e.Reign)
		case 's':
			r.stamp("stamp", &e.Stamp)
		case 'k':
			k := r.uint("kind")
			if k > math.MaxUint8 {
				r.fail("kind %d out of range", k)
			}
			e.Kind = EntryKind(k)
		case 'd':
			e.Data = r.bytes("data")
		}
	})
}

func (r *mpReader) stamp(what string, s *edict.Stamp) {
	r.fields(what, "eqc", func(k byte) {
		switch k {
		case 'e':
			s.Epoch = r.uint("epoch")
		case 'c':
			s.Counter = r.uint("counter")
		case 'q':
			s.QT = r.qt(what)
		}
	})
}

func (r *mpReader) qt(what string) edict.QT {
	c := r.byte1()
	var n uint64
	switch {
	case r.err != nil:
		return nil
	case c == 0xc0:
		return nil
	case c >= 0x90 && c <= 0x9f:
		n = uint64(c & 0x0f)
	case c == 0xdc:
		n = r.be(2)
	case c == 0xdd:
		n = r.be(4)
	default:
		r.fail("%s: want an array of readings, got byte 0x%02x", what, c)
		return nil
	}
	if n > edict.MaxQTSize {
		r.fail("%s: %d readings exceeds the limit of %d", what, n, edict.MaxQTSize)
		return nil
	}
	if n == 0 {
		return nil // one form for "no QT", as the encoder writes it
	}
	qt := make(edict.QT, n)
	for i := range qt {
		rd := &qt[i]
		r.fields("reading", "pt", func(k byte) {
			switch k {
			case 'p':
				rd.Process = edict.ProcessID(r.uint("process"))
			case 't':
				r.fields("time", "in", func(k byte) {
					switch k {
					case 'i':
						rd.T.Incarnation = r.uint("incarnation")
					case 'n':
						rd.T.Nanos = r.int("nanos")
					}
				})
			}
		})
		if r.err != nil {
			return nil
		}
	}
	return qt
}
