package placement

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// fakeKV is etcd's KV holding fixed registrations, recording Puts.
type fakeKV struct {
	clientv3.KV // other methods are not called
	kvs         []*mvccpb.KeyValue
	puts        []string
}

func (f *fakeKV) Get(context.Context, string, ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	return &clientv3.GetResponse{Kvs: f.kvs}, nil
}

func (f *fakeKV) Put(_ context.Context, key, _ string, _ ...clientv3.OpOption) (*clientv3.PutResponse, error) {
	f.puts = append(f.puts, key)
	return &clientv3.PutResponse{}, nil
}

// A member registered in etcd but missing from the topology has its key
// touched after two checks; once the topology has it, no more. One that
// stays missing (blocked) is touched repairTouches times, every other
// pair of checks, then left alone. Itself and members present never are.
func TestWatchRepairTouchesMissingMembers(t *testing.T) {
	node := func(port string) []byte {
		return []byte(`{"id":"x","host":"127.0.0.1","port":` + port + `,"kinds":["session"]}`)
	}
	kv := &fakeKV{kvs: []*mvccpb.KeyValue{
		{Key: []byte("/p/c/c@self"), Value: node("1")},
		{Key: []byte("/p/c/c@present"), Value: node("2")},
		{Key: []byte("/p/c/c@missed"), Value: node("3")},
		{Key: []byte("/p/c/c@blocked"), Value: node("4")},
		{Key: []byte("/p/c/c@garbage"), Value: []byte("{")},
	}}
	topo := map[string]bool{"127.0.0.1:2": true}
	r := &watchRepair{client: kv, prefix: "/p/c/", selfKey: "/p/c/c@self", has: func(a string) bool { return topo[a] },
		log: slog.New(slog.NewTextHandler(io.Discard, nil)), missing: map[string]*missingMember{}}
	ctx := context.Background()
	touched := func(key string) int {
		n := 0
		for _, k := range kv.puts {
			if k == key {
				n++
			}
		}
		return n
	}
	r.check(ctx)
	if len(kv.puts) != 0 {
		t.Fatalf("touched after one check: %v", kv.puts)
	}
	r.check(ctx)
	if touched("/p/c/c@missed") != 1 || touched("/p/c/c@blocked") != 1 || len(kv.puts) != 2 {
		t.Fatalf("after two checks touched %v, want the two missing members once each", kv.puts)
	}
	topo["127.0.0.1:3"] = true // the watch reported it
	for range 10 {
		r.check(ctx)
	}
	if n := touched("/p/c/c@missed"); n != 1 {
		t.Fatalf("a member back in the topology was touched %d times", n)
	}
	if n := touched("/p/c/c@blocked"); n != repairTouches {
		t.Fatalf("a member that stays missing was touched %d times, want %d", n, repairTouches)
	}
	if _, ok := r.missing["/p/c/c@missed"]; ok {
		t.Fatal("a member back in the topology is still counted missing")
	}
}
