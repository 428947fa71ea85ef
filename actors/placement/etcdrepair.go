package placement

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"strconv"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// watchRepair makes up for a gap in the library's etcd provider: it reads
// the members (Get), then starts its watch from whatever revision is
// current when the watch is set up, not from the read's. A member that
// registers in between — members started together do — is never seen by
// that watcher: it is missing from its topology for good while every
// other member routes to it (members started together: seen in one run in
// three of tests/cluster's etcd test). The provider learns of a member from a Put on its key, so a
// member found registered in etcd but missing from this member's topology
// for two checks in a row has its key touched (put again with its own
// value and lease, which changes nothing but the key's revision): the
// watch then reports it. A member missing because the library blocked it
// (it left, and its key came back) stays missing; it is touched at most
// repairTouches times and logged.
type watchRepair struct {
	client  clientv3.KV
	prefix  string // PREFIX/CLUSTER/
	selfKey string
	has     func(addr string) bool // whether the topology holds addr
	log     *slog.Logger
	missing map[string]*missingMember
}

type missingMember struct{ checks, touches int }

const (
	repairAfterChecks = 2 // consecutive checks a member must be missing
	repairTouches     = 3
)

// registeredNode is what the provider stores under a member's key (its Node).
type registeredNode struct {
	Host    string `json:"host"`
	Address string `json:"address"`
	Port    int    `json:"port"`
}

func (n registeredNode) addr() string {
	host := n.Host
	if host == "" {
		host = n.Address
	}
	return net.JoinHostPort(host, strconv.Itoa(n.Port))
}

// check compares the registered members with the topology once, touching
// those missing long enough. Errors end the check: the next one retries.
func (r *watchRepair) check(ctx context.Context) {
	resp, err := r.client.Get(ctx, r.prefix, clientv3.WithPrefix())
	if err != nil {
		return
	}
	seen := make(map[string]bool, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		key := string(kv.Key)
		var n registeredNode
		if key == r.selfKey || json.Unmarshal(kv.Value, &n) != nil || r.has(n.addr()) {
			continue
		}
		seen[key] = true
		m := r.missing[key]
		if m == nil {
			m = &missingMember{}
			r.missing[key] = m
		}
		m.checks++
		if m.checks < repairAfterChecks || m.touches >= repairTouches || (m.touches > 0 && m.checks%(2*repairAfterChecks) != 0) {
			continue
		}
		m.touches++
		if _, err := r.client.Put(ctx, key, "", clientv3.WithIgnoreValue(), clientv3.WithIgnoreLease()); err != nil {
			return
		}
		if m.touches == repairTouches {
			r.log.Warn("cluster membership: a member registered in etcd stays missing from this member's topology (blocked after it left?)",
				"key", key, "member", n.addr())
		} else {
			r.log.Warn("cluster membership: a member registered in etcd is missing from this member's topology; its key was touched so the watch reports it",
				"key", key, "member", n.addr())
		}
	}
	for key := range r.missing {
		if !seen[key] {
			delete(r.missing, key)
		}
	}
}
