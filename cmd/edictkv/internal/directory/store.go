package directory

import (
	"context"
	"fmt"

	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/kvstate"
	"github.com/edictlog/edictlog/edict"
)

// Applier writes an encoded request through the log and returns the
// state's answer (edictlog.Node.Apply).
type Applier interface {
	Apply(ctx context.Context, cmd []byte) (edictlog.ApplyResult, error)
}

// The attributes of a process's record in the state's member directory.
const (
	attrHTTP = "http"
	attrGRPC = "grpc"
)

// StateStore keeps the records in the replicated state's system namespace
// (kvstate's member records: one attribute per address), which no user
// request can read or write.
type StateStore struct {
	Log   Applier
	State *kvstate.State
}

// Load implements Store.
func (s StateStore) Load(id edict.ProcessID) Addresses {
	m := s.State.Member(uint64(id))
	return Addresses{HTTP: m[attrHTTP], GRPC: m[attrGRPC]}
}

// Save implements Store: one member record request setting each address
// given.
func (s StateStore) Save(ctx context.Context, id edict.ProcessID, a Addresses) error {
	var attrs []kvstate.Attr
	if a.HTTP != "" {
		attrs = append(attrs, kvstate.Attr{Name: attrHTTP, Value: a.HTTP})
	}
	if a.GRPC != "" {
		attrs = append(attrs, kvstate.Attr{Name: attrGRPC, Value: a.GRPC})
	}
	data, err := (&kvstate.Request{MemberPut: &kvstate.MemberPut{ID: uint64(id), Attrs: attrs}}).Encode()
	if err != nil {
		return fmt.Errorf("directory: record process %d: %w", uint64(id), err)
	}
	res, err := s.Log.Apply(ctx, data)
	if err != nil {
		return err
	}
	out, ok := res.Response.(*kvstate.Result)
	switch {
	case !ok:
		return fmt.Errorf("directory: record process %d: unexpected state answer %T", uint64(id), res.Response)
	case out.Err != nil:
		return fmt.Errorf("directory: record process %d: the state refused it: %w", uint64(id), out.Err)
	}
	return nil
}
