package placement

import (
	"context"
	"io"
	"log/slog"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/remote"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// reapKV holds registrations; its transactions delete a key when their
// comparisons hold for the revisions it has.
type reapKV struct {
	clientv3.KV // other methods are not called
	kvs         []*mvccpb.KeyValue
	deleted     []string
	onDelete    func() // when set, called after a delete
}

func (f *reapKV) Get(context.Context, string, ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	out := make([]*mvccpb.KeyValue, len(f.kvs))
	for i, kv := range f.kvs {
		out[i] = &mvccpb.KeyValue{Key: kv.Key, Value: kv.Value, CreateRevision: kv.CreateRevision, ModRevision: kv.ModRevision}
	}
	return &clientv3.GetResponse{Kvs: out}, nil
}

func (f *reapKV) Txn(context.Context) clientv3.Txn { return &reapTxn{kv: f} }

type reapTxn struct {
	kv   *reapKV
	cmps []clientv3.Cmp
	ops  []clientv3.Op
}

func (t *reapTxn) If(cs ...clientv3.Cmp) clientv3.Txn   { t.cmps = append(t.cmps, cs...); return t }
func (t *reapTxn) Then(ops ...clientv3.Op) clientv3.Txn { t.ops = append(t.ops, ops...); return t }
func (t *reapTxn) Else(...clientv3.Op) clientv3.Txn     { return t }

func (t *reapTxn) Commit() (*clientv3.TxnResponse, error) {
	for _, c := range t.cmps {
		i := slices.IndexFunc(t.kv.kvs, func(kv *mvccpb.KeyValue) bool { return string(kv.Key) == string(c.KeyBytes()) })
		if i < 0 {
			return &clientv3.TxnResponse{}, nil
		}
		pc, kv := pb.Compare(c), t.kv.kvs[i]
		held, want := kv.ModRevision, pc.GetModRevision()
		if pc.Target == pb.Compare_CREATE {
			held, want = kv.CreateRevision, pc.GetCreateRevision()
		}
		if pc.Result != pb.Compare_EQUAL || held != want {
			return &clientv3.TxnResponse{}, nil
		}
	}
	for _, op := range t.ops {
		key := string(op.KeyBytes())
		t.kv.deleted = append(t.kv.deleted, key)
		t.kv.kvs = slices.DeleteFunc(t.kv.kvs, func(kv *mvccpb.KeyValue) bool { return string(kv.Key) == key })
		if t.kv.onDelete != nil {
			t.kv.onDelete()
		}
	}
	return &clientv3.TxnResponse{Succeeded: true}, nil
}

// addrs returns a loopback address nothing listens on (a port just
// released) and one that accepts.
func addrs(t *testing.T) (closed, listening string) {
	t.Helper()
	l1, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed = l1.Addr().String()
	l1.Close()
	l2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l2.Close() })
	return closed, l2.Addr().String()
}

func reg(key, addr string, create, mod int64) *mvccpb.KeyValue {
	host, port, _ := net.SplitHostPort(addr)
	return &mvccpb.KeyValue{Key: []byte(key), CreateRevision: create, ModRevision: mod,
		Value: []byte(`{"id":"x","host":"` + host + `","port":` + port + `,"kinds":["session"]}`)}
}

// A member whose connection broke and whose port refuses connections has
// its registration deleted; one whose port still listens does not, nor
// does anyone while this member's own registration is in doubt, nor an
// address outside the topology. A registration that changed between the
// read and the delete is left alone.
func TestPeerReaperDeletesOnlyRefusingMembers(t *testing.T) {
	dead, alive := addrs(t)
	kv := &reapKV{kvs: []*mvccpb.KeyValue{reg("/p/c/c@dead", dead, 5, 5), reg("/p/c/c@alive", alive, 6, 6)}}
	healthy := true
	topo := map[string]bool{dead: true, alive: true}
	r := newPeerReaper(kv, "/p/c/", func() bool { return healthy }, func(a string) bool { return topo[a] }, nil,
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx := t.Context()

	if r.reap(ctx, alive) {
		t.Fatalf("reaped a member whose port listens")
	}
	healthy = false
	if r.reap(ctx, dead) {
		t.Fatalf("reaped while this member's own registration is in doubt")
	}
	healthy = true
	// Registered again between the read and the delete: the comparison fails.
	kv2 := &raceKV{reapKV: &reapKV{kvs: []*mvccpb.KeyValue{reg("/p/c/c@dead", dead, 5, 5)}}}
	r2 := newPeerReaper(kv2, "/p/c/", func() bool { return true }, func(string) bool { return true }, nil, r.log)
	if r2.reap(ctx, dead) || len(kv2.deleted) != 0 {
		t.Fatalf("deleted a registration that changed since it was read: %v", kv2.deleted)
	}

	// Through the event stream, as the member runs it.
	r.event(ctx, &remote.EndpointTerminatedEvent{Address: "127.0.0.1:1"}) // not in the topology
	r.event(ctx, &remote.EndpointTerminatedEvent{Address: alive})
	r.event(ctx, &remote.EndpointTerminatedEvent{Address: dead})
	r.wait()
	if want := []string{"/p/c/c@dead"}; !slices.Equal(kv.deleted, want) {
		t.Fatalf("deleted %v, want %v", kv.deleted, want)
	}
}

// A killed member that no connection of this one broke on (none was open)
// is found by the sweep over the topology.
func TestPeerReaperSweepFindsDeadMembers(t *testing.T) {
	dead, alive := addrs(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	kv := &reapKV{kvs: []*mvccpb.KeyValue{reg("/p/c/c@dead", dead, 5, 5), reg("/p/c/c@alive", alive, 6, 6)}, onDelete: cancel}
	topo := map[string]bool{dead: true, alive: true}
	r := newPeerReaper(kv, "/p/c/", func() bool { return true }, func(a string) bool { return topo[a] },
		func() []string { return []string{alive, dead} }, slog.New(slog.NewTextHandler(io.Discard, nil)))
	r.run(ctx) // returns once the delete cancelled ctx (or at its deadline)
	r.wait()
	if want := []string{"/p/c/c@dead"}; !slices.Equal(kv.deleted, want) {
		t.Fatalf("deleted %v, want %v", kv.deleted, want)
	}
}

// raceKV is reapKV where the key is put again right after every read.
type raceKV struct{ *reapKV }

func (f *raceKV) Get(ctx context.Context, k string, o ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	resp, err := f.reapKV.Get(ctx, k, o...)
	for _, kv := range f.kvs {
		kv.ModRevision++
	}
	return resp, err
}

func (f *raceKV) Txn(context.Context) clientv3.Txn { return &reapTxn{kv: f.reapKV} }
