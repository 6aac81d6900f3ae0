package kvservice_test

import (
	"bytes"
	"context"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/edictlog/edictlog"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/fakelog"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/kvservice"
)

// BenchmarkRange is the service's cost of a Range of one key (8 bytes,
// its value 256) at each read level, over a fake log whose barrier
// answers at once: the service's own checks and its read of the state,
// with the stamps (the HTTP API's read) and without (the etcd API's).
func BenchmarkRange(b *testing.B) {
	fl := fakelog.New()
	defer fl.Close()
	s, err := kvservice.New(kvservice.Config{Log: fl, State: fl.State})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	key := []byte("key00001")
	if _, _, err := s.Put(ctx, &pb.PutRequest{Key: key, Value: bytes.Repeat([]byte("v"), 256)}); err != nil {
		b.Fatal(err)
	}
	for _, level := range []edictlog.ReadLevel{edictlog.ReadStale, edictlog.ReadFollower} {
		b.Run(level.String()+"/stamps", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				resp, _, err := s.Range(ctx, level, &pb.RangeRequest{Key: key})
				if err != nil || len(resp.Kvs) != 1 {
					b.Fatalf("range: %v", err)
				}
			}
		})
		b.Run(level.String()+"/unstamped", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				resp, err := s.RangeUnstamped(ctx, level, &pb.RangeRequest{Key: key})
				if err != nil || len(resp.Kvs) != 1 {
					b.Fatalf("range: %v", err)
				}
			}
		})
	}
}

// BenchmarkPut is the service's cost of a Put over a fake log that
// applies it at once: the checks, the request's encoding, and the state's
// apply (decoding included).
func BenchmarkPut(b *testing.B) {
	fl := fakelog.New()
	defer fl.Close()
	s, err := kvservice.New(kvservice.Config{Log: fl, State: fl.State})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	value := bytes.Repeat([]byte("v"), 256)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		key := []byte{'k', byte(i >> 16), byte(i >> 8), byte(i)}
		if _, _, err := s.Put(ctx, &pb.PutRequest{Key: key, Value: value}); err != nil {
			b.Fatal(err)
		}
	}
}
