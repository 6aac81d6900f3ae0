package process

import (
	"context"
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/compactor"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/route"
	"github.com/edictlog/edictlog/edict"
)

// startCompactor starts auto-compaction, if the configuration asks for
// it: the compactor follows the Node's leadership, and proposes while
// this process leads.
func (p *Process) startCompactor() error {
	if !p.cfg.AutoCompaction.Enabled() {
		return nil
	}
	c, err := compactor.New(compactor.Config{Retention: p.cfg.AutoCompaction, Rev: p.State.Rev,
		KV: leaderCompactions{p}, Logger: p.log})
	if err != nil {
		return fmt.Errorf("process: %w", err)
	}
	c.Start()
	p.compactor, p.stopCompactor = c, compactor.Watch(p.Node, c)
	return nil
}

// closeCompactor ends the watch, then the compactor and the compaction it
// may be proposing.
func (p *Process) closeCompactor() {
	if p.compactor == nil {
		return
	}
	p.stopCompactor()
	p.compactor.Stop()
	p.compactor, p.stopCompactor = nil, nil
}

// leaderCompactions proposes the compactor's compactions here, under the
// router's handover gate like a client's writes, and only here: at a
// process that does not lead (leadership moved since the compactor was
// told) the router refuses it at once, and the next leader's compactor
// carries on.
type leaderCompactions struct{ p *Process }

func (l leaderCompactions) Compact(ctx context.Context, r *pb.CompactionRequest) (*pb.CompactionResponse, error) {
	var resp *pb.CompactionResponse
	err := l.p.router.Do(ctx, true, func(ctx context.Context) error {
		var err error
		resp, err = l.p.kv.Compact(ctx, r)
		return err
	}, func(_ context.Context, leader edict.ProcessID) error {
		return &edictlog.NotLeaderError{Leader: leader, Err: route.ErrMisdirected}
	})
	return resp, err
}
