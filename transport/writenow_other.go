//go:build !unix

package transport

import "errors"

// Elsewhere every frame goes through the writer goroutine.
const canWriteNow = false

func (oc *outConn) writeNow(p []byte) (int, error) {
	return 0, errors.New("transport: no write without waiting on this platform")
}
