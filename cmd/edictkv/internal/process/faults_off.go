//go:build !jepsen

package process

import (
	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/httpapi"
	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/transport"
)

// faultHooks is empty in a production build: the Jepsen harness's fault
// injection (faults_jepsen.go) is compiled in only with the build tag
// jepsen. Every method returns what it is given, so the calls inline away.
type faultHooks struct{}

func newFaultHooks(*Process) faultHooks { return faultHooks{} }

func (faultHooks) wrapStore(s StatsStore) StatsStore { return s }

func (faultHooks) wrapTransport(t *transport.TCP) edictlog.Transport { return t }

func (faultHooks) wrapClock(c edict.Clock) edict.Clock { return c }

func (faultHooks) routes(*httpapi.Server) {}

func (faultHooks) serverClosed() {}
