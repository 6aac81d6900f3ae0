package etcdapi

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// codecMessages are etcd messages of every shape the API sends: small
// and over gRPC's pooling threshold, nested, repeated, oneofs.
func codecMessages() []any {
	kvs := func(n, size int) []*mvccpb.KeyValue {
		var out []*mvccpb.KeyValue
		for i := range n {
			out = append(out, &mvccpb.KeyValue{Key: fmt.Appendf(nil, "key/%04d", i), Value: bytes.Repeat([]byte{byte(i)}, size),
				CreateRevision: int64(i + 2), ModRevision: int64(2*i + 2), Version: int64(i + 1), Lease: int64(i)})
		}
		return out
	}
	hdr := &pb.ResponseHeader{ClusterId: 7, MemberId: 2, Revision: 1 << 40, RaftTerm: 3}
	return []any{
		&pb.PutRequest{Key: []byte("k"), Value: []byte("v"), PrevKv: true},
		&pb.PutResponse{Header: hdr, PrevKv: kvs(1, 10)[0]},
		&pb.RangeRequest{Key: []byte("a"), RangeEnd: []byte("b"), Limit: 10, Serializable: true, Revision: 5},
		&pb.RangeResponse{Header: hdr, Kvs: kvs(3, 256), Count: 3},
		&pb.RangeResponse{Header: hdr, Kvs: kvs(100, 256), More: true, Count: 1000},
		&pb.RangeResponse{Header: hdr},
		&pb.TxnRequest{
			Compare: []*pb.Compare{{Key: []byte("a"), Target: pb.Compare_MOD, Result: pb.Compare_LESS, TargetUnion: &pb.Compare_ModRevision{ModRevision: 9}}},
			Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("a"), Value: []byte("1")}}},
				{Request: &pb.RequestOp_RequestTxn{RequestTxn: &pb.TxnRequest{Success: []*pb.RequestOp{
					{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: &pb.DeleteRangeRequest{Key: []byte("z")}}}}}}}},
			Failure: []*pb.RequestOp{{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: []byte("a")}}}},
		},
		&pb.WatchResponse{Header: hdr, WatchId: 4, Events: []*mvccpb.Event{
			{Type: mvccpb.PUT, Kv: kvs(1, 2048)[0], PrevKv: kvs(1, 3)[0]}, {Type: mvccpb.DELETE, Kv: &mvccpb.KeyValue{Key: []byte("gone"), ModRevision: 9}}}},
		&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: &pb.WatchCreateRequest{Key: []byte("a"), StartRevision: 3, ProgressNotify: true, Filters: []pb.WatchCreateRequest_FilterType{pb.WatchCreateRequest_NOPUT}}}},
	}
}

// The codec writes the bytes gRPC's proto codec writes, and reads back
// what it wrote; messages that are not etcd's go to gRPC's codec.
func TestCodecMatchesGRPCs(t *testing.T) {
	c, std := newCodec(), encoding.GetCodecV2(proto.Name)
	assert.Equal(t, "proto", c.Name())
	for _, m := range append(codecMessages(), &wrapperspb.BytesValue{Value: []byte("batch")}) {
		t.Run(fmt.Sprintf("%T", m), func(t *testing.T) {
			got, err := c.Marshal(m)
			require.NoError(t, err)
			want, err := std.Marshal(m)
			require.NoError(t, err)
			require.Equal(t, want.Materialize(), got.Materialize())

			back := newOf(m)
			require.NoError(t, c.Unmarshal(got, back))
			if _, ok := m.(gogoMessage); ok {
				assert.Equal(t, m, back)
			} else {
				assert.Equal(t, m.(*wrapperspb.BytesValue).Value, back.(*wrapperspb.BytesValue).Value)
			}
			got.Free()
			want.Free()
		})
	}
}

// newOf is a new message of m's type.
func newOf(m any) any {
	switch m.(type) {
	case *pb.PutRequest:
		return new(pb.PutRequest)
	case *pb.PutResponse:
		return new(pb.PutResponse)
	case *pb.RangeRequest:
		return new(pb.RangeRequest)
	case *pb.RangeResponse:
		return new(pb.RangeResponse)
	case *pb.TxnRequest:
		return new(pb.TxnRequest)
	case *pb.WatchResponse:
		return new(pb.WatchResponse)
	case *pb.WatchRequest:
		return new(pb.WatchRequest)
	case *wrapperspb.BytesValue:
		return new(wrapperspb.BytesValue)
	}
	panic(fmt.Sprintf("newOf %T", m))
}

// Unmarshal replaces what the message held, as proto.Unmarshal does, and
// refuses bytes that are not the message, naming its type.
func TestCodecUnmarshal(t *testing.T) {
	c := newCodec()
	m := &pb.RangeRequest{Key: []byte("old"), Limit: 4}
	data, err := c.Marshal(&pb.RangeRequest{Key: []byte("new")})
	require.NoError(t, err)
	require.NoError(t, c.Unmarshal(data, m))
	assert.Equal(t, &pb.RangeRequest{Key: []byte("new")}, m, "nothing of the old message is left")

	err = c.Unmarshal(mem.BufferSlice{mem.SliceBuffer([]byte{0x0a, 0x05, 'a'})}, new(pb.RangeRequest))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "etcdapi: unmarshal *etcdserverpb.RangeRequest")
}

// FuzzCodecUnmarshal: any bytes either fail to decode or decode to a
// message the codec writes and reads back the same, as gRPC's codec
// writes it.
func FuzzCodecUnmarshal(f *testing.F) {
	c, std := newCodec(), encoding.GetCodecV2(proto.Name)
	for _, m := range codecMessages() {
		b, err := c.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b.Materialize())
	}
	f.Add([]byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, m := range []gogoMessage{new(pb.RangeRequest), new(pb.TxnRequest), new(pb.WatchRequest), new(pb.PutRequest)} {
			if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(data)}, m); err != nil {
				continue
			}
			out, err := c.Marshal(m)
			if err != nil {
				t.Fatalf("%T decoded from %x does not encode: %v", m, data, err)
			}
			want, err := std.Marshal(m)
			if err != nil {
				t.Fatalf("gRPC's codec: %v", err)
			}
			if !bytes.Equal(out.Materialize(), want.Materialize()) {
				t.Fatalf("%T: the codec and gRPC's disagree", m)
			}
		}
	})
}

// BenchmarkCodecMarshal: a 100-key range answer, marshaled by the codec
// and by gRPC's proto codec.
func BenchmarkCodecMarshal(b *testing.B) {
	m := codecMessages()[4]
	for _, v := range []struct {
		name string
		c    encoding.CodecV2
	}{{"edictkv", newCodec()}, {"grpc-proto", encoding.GetCodecV2(proto.Name)}} {
		b.Run(v.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				out, err := v.c.Marshal(m)
				if err != nil {
					b.Fatal(err)
				}
				out.Free()
			}
		})
	}
}
