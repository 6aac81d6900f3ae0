package transport_test

import (
	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/transport"
)

// TCP is what edictlog.Node sends through: the interface is declared where the
// log consumes it, so the check that TCP satisfies it lives here.
var _ edictlog.Transport = (*transport.TCP)(nil)
