//go:build unix

package transport

import "syscall"

const canWriteNow = true

// writeNow writes what the socket takes of p now, without waiting for
// room: n < len(p) with a nil error when its send buffer is full.
func (oc *outConn) writeNow(p []byte) (n int, err error) {
	var werr error
	if err := oc.raw.Write(func(fd uintptr) bool {
		for n < len(p) {
			k, e := syscall.Write(int(fd), p[n:])
			if k > 0 {
				n += k
			}
			switch {
			case e == syscall.EINTR:
				continue
			case e == syscall.EAGAIN:
				return true // full: the rest is the writer goroutine's
			case e != nil:
				werr = e
				return true
			case k <= 0:
				return true
			}
		}
		return true
	}); err != nil {
		return n, err
	}
	return n, werr
}
