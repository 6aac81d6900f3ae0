package etcdapi

import (
	"context"
	"errors"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/edictlog/edictlog/cmd/edictkv/internal/kvservice"
)

// statusOf turns an error of the KV service (or of the log and router
// beneath it) into the gRPC answer: etcd's own error where etcd has one,
// so that clientv3's error values (rpctypes.Error) match; else a status
// of the right code that says what was wrong. It is the etcd API's one
// mapping of kvservice's errors. A status passes as it is (a forwarded
// call's answer).
func (s *Server) statusOf(method string, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	var re *kvservice.RevisionError
	switch {
	case errors.As(err, &re) && errors.Is(err, kvservice.ErrCompacted):
		return rpctypes.ErrGRPCCompacted
	case errors.As(err, &re):
		return rpctypes.ErrGRPCFutureRev
	case errors.Is(err, kvservice.ErrTimeout):
		s.log.Warn("request outcome unknown", "method", method, "err", err)
		return rpctypes.ErrGRPCTimeout
	case errors.Is(err, kvservice.ErrLeaderChanged):
		return rpctypes.ErrGRPCLeaderChanged
	case errors.Is(err, kvservice.ErrStopped):
		return rpctypes.ErrGRPCStopped
	case errors.Is(err, kvservice.ErrNoLeader):
		return rpctypes.ErrGRPCNoLeader
	case errors.Is(err, kvservice.ErrEmptyKey):
		return rpctypes.ErrGRPCEmptyKey
	case errors.Is(err, kvservice.ErrTooManyOps):
		return rpctypes.ErrGRPCTooManyOps
	case errors.Is(err, kvservice.ErrDuplicateKey):
		return rpctypes.ErrGRPCDuplicateKey
	case errors.Is(err, kvservice.ErrRequestTooLarge):
		return rpctypes.ErrGRPCRequestTooLarge
	case errors.Is(err, kvservice.ErrNoSpace):
		return rpctypes.ErrGRPCNoSpace
	case errors.Is(err, kvservice.ErrKeyNotFound):
		return rpctypes.ErrGRPCKeyNotFound
	case errors.Is(err, kvservice.ErrCorrupt):
		return rpctypes.ErrGRPCCorrupt
	case errors.Is(err, kvservice.ErrKeyTooLarge), errors.Is(err, kvservice.ErrValueTooLarge), errors.Is(err, kvservice.ErrInvalid):
		return status.Error(codes.InvalidArgument, "etcdserver: "+err.Error())
	case errors.Is(err, kvservice.ErrUnsupported):
		return status.Error(codes.Unimplemented, "edictkv: "+err.Error())
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return status.FromContextError(err).Err()
	}
	s.log.Error("request failed", "method", method, "err", err)
	return status.Errorf(codes.Internal, "edictkv: %s: %v", method, err)
}
