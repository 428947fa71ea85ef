package server

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// counterValue reads a counter without a registry round trip.
func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatalf("read counter: %v", err)
	}
	return m.GetCounter().GetValue()
}

// TestClusterMetrics: a cluster member's /metrics carries its member
// count, the router's retries and the fenced activations by kind, read
// from the running node at scrape time.
func TestClusterMetrics(t *testing.T) {
	m := newMetrics()
	members, retries := 3, int64(7)
	m.clusterGauges(func() int { return members }, func() int64 { return retries },
		func() int64 { return 2 }, func() int64 { return 1 })
	members, retries = 2, 9 // read at scrape time, not at registration
	fams, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		for _, mt := range f.GetMetric() {
			name := f.GetName()
			for _, l := range mt.GetLabel() {
				name += "{" + l.GetName() + "=" + l.GetValue() + "}"
			}
			switch {
			case mt.GetGauge() != nil:
				got[name] = mt.GetGauge().GetValue()
			case mt.GetCounter() != nil:
				got[name] = mt.GetCounter().GetValue()
			}
		}
	}
	for name, want := range map[string]float64{
		"agentstate_cluster_members":                        2,
		"agentstate_cluster_router_retries_total":           9,
		"agentstate_fenced_activations_total{kind=session}": 2,
		"agentstate_fenced_activations_total{kind=plan}":    1,
	} {
		if v, ok := got[name]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", name, v, ok, want)
		}
	}
}
