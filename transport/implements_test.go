package transport_test

import (
	"github.com/edictlog/edictlog/log"
	"github.com/edictlog/edictlog/transport"
)

// TCP is what log.Node sends through: the interface is declared where the
// log consumes it, so the check that TCP satisfies it lives here.
var _ log.Transport = (*transport.TCP)(nil)
