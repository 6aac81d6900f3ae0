package directory

import (
	"context"
	"fmt"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/fsm/kvfsm"
	"github.com/edictlog/edictlog/log"
)

// Applier writes an encoded command through the log and returns the state
// machine's answer (log.Node.Apply).
type Applier interface {
	Apply(ctx context.Context, cmd []byte) (log.ApplyResult, error)
}

// KVStore keeps the records in the kvfsm state machine, one key per
// address under kvfsm.SystemPrefix: NUL + "edictkv/http/<id>" and
// NUL + "edictkv/grpc/<id>". The state machine leaves those keys out of
// every multi-key range and delete, and the KV API refuses them
// (internal/kvservice), so clients neither see nor write them. The key
// layout is what earlier releases wrote: data directories keep their
// records across an upgrade.
type KVStore struct {
	Log Applier
	KV  *kvfsm.KV
}

func httpKey(id edict.ProcessID) string {
	return fmt.Sprintf("%shttp/%d", kvfsm.SystemPrefix, uint64(id))
}

func grpcKey(id edict.ProcessID) string {
	return fmt.Sprintf("%sgrpc/%d", kvfsm.SystemPrefix, uint64(id))
}

// Load implements Store.
func (s KVStore) Load(id edict.ProcessID) Addresses {
	h, _ := s.KV.Get(httpKey(id))
	g, _ := s.KV.Get(grpcKey(id))
	return Addresses{HTTP: h.Value, GRPC: g.Value}
}

// Save implements Store: one transaction of a put per address.
func (s KVStore) Save(ctx context.Context, id edict.ProcessID, a Addresses) error {
	var ops []kvfsm.Op
	if a.HTTP != "" {
		ops = append(ops, kvfsm.Op{Put: &kvfsm.Put{Key: httpKey(id), Value: a.HTTP}})
	}
	if a.GRPC != "" {
		ops = append(ops, kvfsm.Op{Put: &kvfsm.Put{Key: grpcKey(id), Value: a.GRPC}})
	}
	data, err := kvfsm.EncodeCommand(kvfsm.Command{Txn: &kvfsm.Txn{Success: ops}})
	if err != nil {
		return fmt.Errorf("directory: record process %d: %w", uint64(id), err)
	}
	res, err := s.Log.Apply(ctx, data)
	if err != nil {
		return err
	}
	if refused, ok := res.Response.(error); ok {
		return fmt.Errorf("directory: record process %d: the state machine refused it: %w", uint64(id), refused)
	}
	return nil
}
