//go:build unix

package etcdapi

import (
	"bytes"
	"context"
	"encoding/binary"
	"syscall"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"

	"github.com/edictlog/edictlog/cmd/edictkv/internal/directory"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/kvservice"
	"github.com/edictlog/edictlog/edict"
)

// BenchmarkUnary is the etcd API's cost of one call over loopback gRPC
// with a fake log (internal/fakelog: a write applies at once, a read's
// barrier answers at once), the sizes of edictkv's etcd comparison (an
// 8-byte key, a 256-byte value): everything of a call but the log, from
// the client's encoding to its decoding of the answer. "serial" is one
// call at a time; "parallel" 64 callers on one connection.
func BenchmarkUnary(b *testing.B) {
	p := startProcessWith(b, 1, 1, nil, func(kc *kvservice.Config, _ *Config) { kc.Limits = kvservice.Limits{} })
	kv := pb.NewKVClient(p.conn)
	ctx := context.Background()
	value := bytes.Repeat([]byte("v"), 256)
	key := func(i uint64) []byte { return binary.BigEndian.AppendUint64(nil, i) }
	if _, err := kv.Put(ctx, &pb.PutRequest{Key: key(0), Value: value}); err != nil {
		b.Fatal(err)
	}
	calls := []struct {
		name string
		call func(i uint64) error
	}{
		{"range-serializable", func(uint64) error {
			_, err := kv.Range(ctx, &pb.RangeRequest{Key: key(0), Serializable: true})
			return err
		}},
		{"range-linearizable", func(uint64) error {
			_, err := kv.Range(ctx, &pb.RangeRequest{Key: key(0)})
			return err
		}},
		{"put", func(i uint64) error {
			_, err := kv.Put(ctx, &pb.PutRequest{Key: key(i % 1000), Value: value})
			return err
		}},
	}
	for _, c := range calls {
		b.Run(c.name+"/serial", func(b *testing.B) {
			b.ReportAllocs()
			cpu := processCPU()
			for i := uint64(0); b.Loop(); i++ {
				if err := c.call(i); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
		})
		b.Run(c.name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.SetParallelism(32) // 64 callers on 2 CPUs
			cpu := processCPU()
			defer func() { b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op") }()
			b.RunParallel(func(pb *testing.PB) {
				for i := uint64(0); pb.Next(); i++ {
					if err := c.call(i); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkForwardedPut is the cost of a put a follower forwards to the
// leader (both over loopback gRPC with a fake log, in this process), 64
// callers at the follower: "streamed" over the forwarding stream, as
// edictkv forwards a put, "unary" one call per put, as it forwards the
// other writes. cpu-ns/op is both processes' CPU and the client's.
func BenchmarkForwardedPut(b *testing.B) {
	leader := startProcessWith(b, 1, 1, nil, func(kc *kvservice.Config, _ *Config) { kc.Limits = kvservice.Limits{} })
	follower := startProcessWith(b, 2, 1, map[edict.ProcessID]directory.Addresses{1: {GRPC: leader.addr}},
		func(kc *kvservice.Config, _ *Config) { kc.Limits = kvservice.Limits{} })
	kv := pb.NewKVClient(follower.conn)
	ctx := context.Background()
	value := bytes.Repeat([]byte("v"), 256)
	for _, streamed := range []bool{true, false} {
		name := "unary"
		if streamed {
			name = "streamed"
		}
		b.Run(name, func(b *testing.B) {
			streamedMethods[methodPut] = streamed
			defer func() { streamedMethods[methodPut] = true }()
			b.ReportAllocs()
			b.SetParallelism(32) // 64 callers on 2 CPUs
			cpu := processCPU()
			defer func() { b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op") }()
			b.RunParallel(func(p *testing.PB) {
				for i := uint64(0); p.Next(); i++ {
					if _, err := kv.Put(ctx, &pb.PutRequest{Key: binary.BigEndian.AppendUint64(nil, i%1000), Value: value}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkServerOptions measures gRPC server options against the API's
// own (ServerOptions): 64 callers' serializable reads and puts over
// loopback, cpu-ns/op as BenchmarkUnary's. Each variant starts its own
// process; run with -count to see the spread.
func BenchmarkServerOptions(b *testing.B) {
	for _, v := range []struct {
		name string
		opts []grpc.ServerOption
	}{
		{"default", nil},
		{"no-workers", []grpc.ServerOption{grpc.NumStreamWorkers(0)}},
		{"shared-write-buffer", []grpc.ServerOption{grpc.SharedWriteBuffer(true)}},
		{"buffers-128KiB", []grpc.ServerOption{grpc.WriteBufferSize(128 << 10), grpc.ReadBufferSize(128 << 10)}},
		{"window-1MiB", []grpc.ServerOption{grpc.InitialWindowSize(1 << 20), grpc.InitialConnWindowSize(1 << 20)}},
		{"grpc-proto-codec", []grpc.ServerOption{grpc.ForceServerCodecV2(encoding.GetCodecV2(proto.Name))}},
	} {
		b.Run(v.name, func(b *testing.B) {
			extraServerOptions = v.opts
			defer func() { extraServerOptions = nil }()
			p := startProcessWith(b, 1, 1, nil, func(kc *kvservice.Config, _ *Config) { kc.Limits = kvservice.Limits{} })
			kv := pb.NewKVClient(p.conn)
			ctx := context.Background()
			value := bytes.Repeat([]byte("v"), 256)
			if _, err := kv.Put(ctx, &pb.PutRequest{Key: []byte("k"), Value: value}); err != nil {
				b.Fatal(err)
			}
			for _, c := range []struct {
				name string
				call func(i uint64) error
			}{
				{"range", func(uint64) error {
					_, err := kv.Range(ctx, &pb.RangeRequest{Key: []byte("k"), Serializable: true})
					return err
				}},
				{"put", func(i uint64) error {
					_, err := kv.Put(ctx, &pb.PutRequest{Key: binary.BigEndian.AppendUint64(nil, i%1000), Value: value})
					return err
				}},
			} {
				b.Run(c.name, func(b *testing.B) {
					b.SetParallelism(32)
					cpu := processCPU()
					defer func() { b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op") }()
					b.RunParallel(func(p *testing.PB) {
						for i := uint64(0); p.Next(); i++ {
							if err := c.call(i); err != nil {
								b.Error(err)
								return
							}
						}
					})
				})
			}
		})
	}
}

// processCPU is the CPU time the test process has used, every thread
// included: client and server both run here.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
