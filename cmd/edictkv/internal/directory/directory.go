// Package directory is edictkv's member directory: where each process of
// the cluster serves (its HTTP API, its etcd gRPC API, its log transport)
// and what it is called. The APIs ask it where to forward a call to the
// leader, and what to list as members.
//
// Addresses come from three places, and a lookup takes the first that
// has one:
//
//  1. for this process, the addresses it serves at (Config.Self);
//  2. the replicated records (Store): written through the log when a
//     learner is added and when a process publishes its own addresses,
//     so every process learns of one that joined after it started;
//  3. the addresses this process was started with (Config.Known: the
//     --peers flag), for processes that have not published yet.
//
// The records live behind Store, a narrow interface, so that where they
// are kept can change without the directory or its users noticing.
// StateStore keeps them in the replicated state's system namespace
// (internal/kvstate), which user keys cannot name at all.
//
// What a Directory guarantees: a lookup never blocks on the network (it
// reads this process's applied state); Record writes every address it is
// given in one log entry, or none, and refuses an address that is not
// host:port before anything reaches the log.
package directory

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/edictlog/edictlog/edict"
)

// Addresses are where one process serves its APIs, as host:port; "" where
// unknown (or, for GRPC, where the etcd API is off).
type Addresses struct {
	HTTP string
	GRPC string
}

// ErrBadAddress: an address is not host:port.
var ErrBadAddress = errors.New("directory: address is not host:port")

// Validate checks that each address given is host:port.
func (a Addresses) Validate() error {
	for _, addr := range []string{a.HTTP, a.GRPC} {
		if addr == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return fmt.Errorf("%w: %q: %v", ErrBadAddress, addr, err)
		}
	}
	return nil
}

// Store is where the directory's replicated records live.
type Store interface {
	// Load returns what is recorded for id from this process's applied
	// state: "" for each address not recorded.
	Load(id edict.ProcessID) Addresses
	// Save records the non-empty addresses of a for id through the log,
	// in one entry, and returns once it is applied here. It runs where
	// writes are accepted (the leader); elsewhere it returns the log's
	// *edictlog.NotLeaderError.
	Save(ctx context.Context, id edict.ProcessID, a Addresses) error
}

// Config configures a Directory.
type Config struct {
	// Self is this process; SelfAddrs where it serves, and SelfPeer its
	// transport address.
	Self      edict.ProcessID
	SelfAddrs Addresses
	SelfPeer  string
	// Known are the addresses known at start (the --peers flag).
	Known map[edict.ProcessID]Addresses
	// Store holds the replicated records.
	Store Store
	// PeerAddr is a process's transport address, "" if unknown (the
	// transport knows them; the log teaches it).
	PeerAddr func(edict.ProcessID) string
}

// Directory answers where the processes of the cluster are. It is safe
// for concurrent use.
type Directory struct {
	cfg Config
}

// New returns a Directory for cfg; Store is required.
func New(cfg Config) (*Directory, error) {
	if cfg.Store == nil || cfg.Self == edict.None {
		return nil, errors.New("directory: Config.Self and Store are required")
	}
	if err := cfg.SelfAddrs.Validate(); err != nil {
		return nil, fmt.Errorf("directory: this process's addresses: %w", err)
	}
	known := make(map[edict.ProcessID]Addresses, len(cfg.Known))
	for id, a := range cfg.Known {
		known[id] = a
	}
	cfg.Known = known
	return &Directory{cfg: cfg}, nil
}

// Name is what the cluster calls process id (etcd's member name).
func Name(id edict.ProcessID) string { return fmt.Sprintf("edictkv-%d", uint64(id)) }

// Self is this process.
func (d *Directory) Self() edict.ProcessID { return d.cfg.Self }

// Addresses returns where id serves, by the precedence the package
// documents.
func (d *Directory) Addresses(id edict.ProcessID) Addresses {
	if id == d.cfg.Self {
		return d.cfg.SelfAddrs
	}
	out := d.cfg.Store.Load(id)
	known := d.cfg.Known[id]
	if out.HTTP == "" {
		out.HTTP = known.HTTP
	}
	if out.GRPC == "" {
		out.GRPC = known.GRPC
	}
	return out
}

// HTTPAddr is id's HTTP API address, "" if unknown.
func (d *Directory) HTTPAddr(id edict.ProcessID) string { return d.Addresses(id).HTTP }

// GRPCAddr is id's etcd gRPC API address, "" if unknown.
func (d *Directory) GRPCAddr(id edict.ProcessID) string { return d.Addresses(id).GRPC }

// PeerAddr is id's log transport address, "" if unknown.
func (d *Directory) PeerAddr(id edict.ProcessID) string {
	if id == d.cfg.Self && d.cfg.SelfPeer != "" {
		return d.cfg.SelfPeer
	}
	if d.cfg.PeerAddr == nil {
		return ""
	}
	return d.cfg.PeerAddr(id)
}

// Recorded returns what the replicated records hold for id alone, without
// the start-time or own addresses: a process compares it with its own to
// know whether it has published them.
func (d *Directory) Recorded(id edict.ProcessID) Addresses { return d.cfg.Store.Load(id) }

// Record writes a's non-empty addresses for id into the replicated
// records, in one log entry; it must run at the leader (see Store.Save).
func (d *Directory) Record(ctx context.Context, id edict.ProcessID, a Addresses) error {
	switch {
	case id == edict.None:
		return errors.New("directory: record for process 0")
	case a.HTTP == "" && a.GRPC == "":
		return errors.New("directory: nothing to record")
	}
	if err := a.Validate(); err != nil {
		return err
	}
	return d.cfg.Store.Save(ctx, id, a)
}
