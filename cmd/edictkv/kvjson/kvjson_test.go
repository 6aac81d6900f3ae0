package kvjson_test

import (
	"encoding/json"
	"testing"

	"github.com/edictlog/edictlog/cmd/edictkv/kvjson"
)

// The field names are the contract: a rename here breaks every client
// that decodes the server's answers, so each body is pinned as the
// server writes it and as a client reads it.
func TestWireNames(t *testing.T) {
	v := "hello"
	ms := int64(250)
	match := uint64(9)
	stamp := kvjson.StampJSON{Epoch: 1, QT: []kvjson.ReadingJSON{{Process: 1, Incarnation: 2, Nanos: 3}}, Counter: 4, Token: "AQ"}
	kv := kvjson.KVJSON{Key: "a", Value: &v, CreateIndex: 2, ModIndex: 5, Version: 3, Stamp: stamp}
	const stampWire = `{"epoch":1,"qt":[{"process":1,"incarnation":2,"nanos":3}],"counter":4,"token":"AQ"}`
	const kvWire = `"key":"a","value":"hello","create_index":2,"mod_index":5,"version":3,"stamp":` + stampWire
	for _, c := range []struct {
		name string
		v    any
		into func() any
		wire string
	}{
		{"get", kvjson.GetResponse{KVJSON: kv, Index: 7, Consistency: "stale", StalenessMS: &ms,
			LocalLeader: &kvjson.LocalLeaderJSON{ID: 2, Support: []uint64{1, 2}}},
			func() any { return new(kvjson.GetResponse) },
			`{` + kvWire + `,"index":7,"consistency":"stale","staleness_ms":250,"local_leader":{"id":2,"support":[1,2],"authoritative":false}}`},
		{"write", kvjson.WriteResponse{Key: "a", Index: 5, Stamp: stamp, Deleted: 1, Prev: &kvjson.KVJSON{Key: "a", ValueBase64: "/w==", Stamp: stamp}},
			func() any { return new(kvjson.WriteResponse) },
			`{"key":"a","index":5,"stamp":` + stampWire + `,"deleted":1,"prev":{"key":"a","value_base64":"/w==","create_index":0,"mod_index":0,"version":0,"stamp":` + stampWire + `}}`},
		{"error", kvjson.ErrorJSON{Error: "compare failed", Code: kvjson.CodeCASFailed, Index: 8, Current: &kv},
			func() any { return new(kvjson.ErrorJSON) },
			`{"error":"compare failed","code":"cas_failed","index":8,"current":{` + kvWire + `}}`},
		{"status", kvjson.StatusJSON{ID: 1, Epoch: 2, Leader: 1, IsLeader: true, LeaseRemainingMS: &ms, Commit: 5, Applied: 5,
			FirstIndex: 1, LastIndex: 5, Members: []uint64{1, 2, 3}, Learners: []uint64{}, Ready: true},
			func() any { return new(kvjson.StatusJSON) },
			`{"id":1,"epoch":2,"leader":1,"is_leader":true,"lease_remaining_ms":250,"commit":5,"applied":5,"first_index":1,"last_index":5,"members":[1,2,3],"learners":[],"ready":true}`},
		{"cluster", kvjson.ClusterJSON{Self: 1, Epoch: 2, Leader: 1, LeaderHTTPAddr: "h:1", Members: []kvjson.MemberJSON{
			{ID: 2, Role: "learner", HTTPAddr: "h:2", GRPCAddr: "g:2", Match: &match, StatusError: "timeout"}}},
			func() any { return new(kvjson.ClusterJSON) },
			`{"self":1,"epoch":2,"leader":1,"leader_http_addr":"h:1","members":[{"id":2,"role":"learner","http_addr":"h:2","grpc_addr":"g:2","match":9,"status_error":"timeout"}]}`},
		{"learner", kvjson.LearnerRequest{ID: 4, RaftAddr: "r:4", HTTPAddr: "h:4"}, func() any { return new(kvjson.LearnerRequest) },
			`{"id":4,"raft_addr":"r:4","http_addr":"h:4"}`},
		{"addresses", kvjson.AddressesRequest{ID: 4, GRPCAddr: "g:4"}, func() any { return new(kvjson.AddressesRequest) },
			`{"id":4,"grpc_addr":"g:4"}`},
		{"recover", kvjson.RecoverRequest{Survivors: []uint64{1, 2}, Confirm: kvjson.ConfirmRecovery}, func() any { return new(kvjson.RecoverRequest) },
			`{"survivors":[1,2],"confirm":"I understand this can lose acknowledged writes"}`},
		{"transfer", kvjson.TransferRequest{ID: 2}, func() any { return new(kvjson.TransferRequest) }, `{"id":2}`},
		{"member", kvjson.MemberRequest{ID: 3}, func() any { return new(kvjson.MemberRequest) }, `{"id":3}`},
		{"admin", kvjson.AdminResponse{OK: true}, func() any { return new(kvjson.AdminResponse) }, `{"ok":true,"result":null}`},
		{"recovered", kvjson.RecoverResponse{OK: true, Epoch: 5}, func() any { return new(kvjson.RecoverResponse) }, `{"ok":true,"epoch":5}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := json.Marshal(c.v)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != c.wire {
				t.Fatalf("encodes as\n%s\nwant\n%s", b, c.wire)
			}
			back := c.into()
			if err := json.Unmarshal([]byte(c.wire), back); err != nil {
				t.Fatal(err)
			}
			again, err := json.Marshal(back)
			if err != nil || string(again) != c.wire {
				t.Fatalf("decodes and encodes again as %s (%v)", again, err)
			}
		})
	}
}
