package daemon

import (
	"context"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/cluster/server"
	"github.com/legionbsd/legion/cluster/store"
	"github.com/legionbsd/legion/internal/testcluster"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape reads addr's /metrics with Prometheus's own parser.
func scrape(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("scraping %s: %v", addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scraping %s: %s", addr, resp.Status)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing %s/metrics: %v", addr, err)
	}
	return fams
}

// value is a sample's value, whatever its type.
func value(m *dto.Metric) float64 {
	switch {
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	}
	return 0
}

// sum adds the samples of family name whose labels hold every pair of
// want; ok is false when the family is absent.
func sum(fams map[string]*dto.MetricFamily, name string, want map[string]string) (total float64, n int, ok bool) {
	f := fams[name]
	if f == nil {
		return 0, 0, false
	}
	for _, m := range f.Metric {
		labels := map[string]string{}
		for _, l := range m.Label {
			labels[l.GetName()] = l.GetValue()
		}
		match := true
		for k, v := range want {
			match = match && labels[k] == v
		}
		if match {
			total += value(m)
			n++
		}
	}
	return total, n, true
}

// A 3-manager cluster and a worker running a service, each serving
// /metrics: every manager counts its gRPC calls and reports its Raft
// state (one leader, three voters, the leader's two followers' lag);
// the cluster families come from the leader only, so their sum across
// managers counts each task once; the worker's agent reports its
// containers' usage beside their limits, its pods, images and sessions.
func TestMetricsOfManagersAndAgent(t *testing.T) {
	t.Parallel()
	served := make([]*MetricsServer, 3)
	for i := range served {
		ms, err := ServeMetrics("127.0.0.1:0", nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ms.Close() })
		served[i] = ms
	}
	// Metrics, not elections: a lease a loaded machine does not outrun
	// (three managers on the tests' timing once had no leader for longer
	// than the client's retry).
	c := testcluster.New(t, testcluster.Options{Managers: 3, Leader: true, Workers: 1,
		Configure: func(i int, sc *server.Config) {
			sc.Timing = store.SteadyTiming()
			if i < len(served) { // workers come after the managers
				sc.Metrics = served[i].Registry
			}
		}})
	cl := c.Client()
	agentMetrics, err := ServeMetrics("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { agentMetrics.Close() })
	// The worker's agent, as startWorkerAgents runs it, with metrics.
	w := c.Workers[0]
	a := &workerAgent{t: t, w: w, o: Options{DataDir: w.Dir, RunDir: filepath.Join(t.TempDir(), "run"),
		DNSListen: "127.0.0.1:0", Upstreams: []string{}, Metrics: agentMetrics.Registry}}
	t.Cleanup(func() { removeAllPods(t, w.Dir) })
	images, err := OpenImages(Options{DataDir: w.Dir, Platform: PlatformProcess}, nil)
	if err != nil {
		t.Fatal(err)
	}
	loadTestImage(t, images)
	images.Close()
	t.Cleanup(a.stop)
	a.start()
	applyManifest(t, cl, testPod("Service", "web", "web", listen8080, "replicas: 2")+
		"        resources: {limits: {cpu: 500m, memory: 256Mi}}\n"+servesHTTP("100ms")+`---
apiVersion: legion/v1
kind: Namespace
metadata: {name: shop}
spec: {quota: {cpu: 2, tasks: 10}}
`)
	poll(t, "two ready tasks of web", 90*time.Second, func() bool {
		ts, _, err := cl.List(context.Background(), legion.KindTask, client.ListOptions{Namespace: legion.DefaultNamespace})
		if err != nil {
			return false
		}
		ready := 0
		for _, o := range ts {
			if tk := o.(*legion.Task); tk.Status.Ready && tk.Spec.DesiredState == legion.TaskRunning {
				ready++
			}
		}
		return ready == 2
	})

	// The cluster families, summed over the managers, match what the
	// API lists; the service's status has caught up once they say so.
	var fams []map[string]*dto.MetricFamily
	poll(t, "the cluster families matching the API", 20*time.Second, func() bool {
		fams = fams[:0]
		for _, ms := range served {
			fams = append(fams, scrape(t, ms.Addr))
		}
		ts, _, err := cl.List(context.Background(), legion.KindTask, client.ListOptions{AllNamespaces: true})
		if err != nil {
			return false
		}
		nodes, _, err := cl.List(context.Background(), legion.KindNode, client.ListOptions{})
		if err != nil {
			return false
		}
		var tasks, objTasks, nodeCount, ready, desired float64
		for _, f := range fams {
			v, _, _ := sum(f, "legion_tasks", nil)
			tasks += v
			v, _, _ = sum(f, "legion_objects", map[string]string{"kind": "Task"})
			objTasks += v
			v, _, _ = sum(f, "legion_nodes", nil)
			nodeCount += v
			v, _, _ = sum(f, "legion_service_ready_replicas", map[string]string{"namespace": "default", "service": "web"})
			ready += v
			v, _, _ = sum(f, "legion_service_replicas", map[string]string{"namespace": "default", "service": "web"})
			desired += v
		}
		return tasks == float64(len(ts)) && objTasks == tasks && nodeCount == float64(len(nodes)) && ready == 2 && desired == 2
	})
	leaders := 0
	for i, f := range fams {
		addr := c.Managers[i].Addr
		lead, n, ok := sum(f, "legion_raft_leader", nil)
		if !ok || n != 1 {
			t.Fatalf("manager %s: legion_raft_leader has %d samples", addr, n)
		}
		if v, _, _ := sum(f, "legion_raft_voters", nil); v != 3 {
			t.Errorf("manager %s: legion_raft_voters = %v, want 3", addr, v)
		}
		for _, name := range []string{"legion_raft_term", "legion_raft_last_log_index", "legion_raft_commit_index", "legion_raft_applied_index"} {
			if v, _, _ := sum(f, name, nil); v < 1 {
				t.Errorf("manager %s: %s = %v, want at least 1", addr, name, v)
			}
		}
		// hashicorp/raft's own metrics, bridged.
		if _, n, _ := sum(f, "legion_raft_commitTime", nil); n == 0 {
			t.Errorf("manager %s: raft's own legion_raft_commitTime is missing", addr)
		}
		if _, n, _ := sum(f, "legion_grpc_server_handled_total", map[string]string{"code": "OK"}); n == 0 {
			t.Errorf("manager %s: no gRPC calls counted OK", addr)
		}
		if _, n, _ := sum(f, "legion_grpc_server_handling_seconds", map[string]string{"service": "legion.v1.Raft"}); n == 0 && lead == 0 {
			t.Errorf("manager %s: a follower timed no Raft calls", addr)
		}
		_, tasks, _ := sum(f, "legion_tasks", nil)
		if lead == 1 {
			leaders++
			if _, n, _ := sum(f, "legion_raft_follower_lag_entries", nil); n != 2 {
				t.Errorf("leader %s: follower lag for %d followers, want 2", addr, n)
			}
			if tasks == 0 {
				t.Errorf("leader %s reports no tasks", addr)
			}
			if v, _, _ := sum(f, "legion_quota_limit", map[string]string{"namespace": "shop", "resource": "cpu"}); v != 2 {
				t.Errorf("leader %s: shop's cpu quota = %v, want 2", addr, v)
			}
			if v, n, _ := sum(f, "legion_quota_used", map[string]string{"namespace": "shop", "resource": "tasks"}); n != 1 || v != 0 {
				t.Errorf("leader %s: shop's tasks used = %v (%d samples), want 0", addr, v, n)
			}
			if _, n, ok := sum(f, "legion_task_restarts", map[string]string{"owner": "web"}); !ok || n != 1 {
				t.Errorf("leader %s: restarts of web's tasks in %d samples, want 1", addr, n)
			}
			// Its planning passes placed web's tasks.
			if v, _, _ := sum(f, "legion_controller_pass_seconds", nil); v < 1 {
				t.Errorf("leader %s: %v planning passes timed", addr, v)
			}
			if v, _, _ := sum(f, "legion_controller_writes_total", map[string]string{"outcome": "applied"}); v < 2 {
				t.Errorf("leader %s: %v writes of its planning passes applied, want at least web's two tasks", addr, v)
			}
		} else {
			if _, n, _ := sum(f, "legion_raft_follower_lag_entries", nil); n != 0 {
				t.Errorf("follower %s reports lag for %d followers", addr, n)
			}
			if tasks != 0 {
				t.Errorf("follower %s reports %d task samples: the cluster would be counted twice", addr, tasks)
			}
		}
	}
	if leaders != 1 {
		t.Fatalf("%d managers say they lead, want 1", leaders)
	}

	// The worker's agent: its two containers' usage and limits.
	var af map[string]*dto.MetricFamily
	poll(t, "usage of the two web containers", 20*time.Second, func() bool {
		af = scrape(t, agentMetrics.Addr)
		_, n, _ := sum(af, "legion_container_memory_bytes", map[string]string{"namespace": "default", "container": "web"})
		return n == 2
	})
	web := map[string]string{"namespace": "default", "container": "web"}
	if v, n, _ := sum(af, "legion_container_memory_limit_bytes", web); n != 2 || v != 2*256<<20 {
		t.Errorf("memory limits: %v over %d samples, want 256Mi each of 2", v, n)
	}
	if v, n, _ := sum(af, "legion_container_cpu_limit_cores", web); n != 2 || v != 1 {
		t.Errorf("cpu limits: %v over %d samples, want 0.5 each of 2", v, n)
	}
	if v, n, _ := sum(af, "legion_container_memory_bytes", web); n != 2 || v <= 0 {
		t.Errorf("memory use: %v over %d samples, want more than none", v, n)
	}
	if _, n, _ := sum(af, "legion_container_cpu_seconds_total", web); n != 2 {
		t.Errorf("cpu seconds in %d samples, want 2", n)
	}
	if v, _, _ := sum(af, "legion_agent_pods", map[string]string{"namespace": "default"}); v != 2 {
		t.Errorf("legion_agent_pods = %v, want 2", v)
	}
	if v, _, _ := sum(af, "legion_agent_images", nil); v < 1 {
		t.Errorf("legion_agent_images = %v, want the test image", v)
	}
	if _, _, ok := sum(af, "legion_agent_usage_unread", nil); !ok {
		t.Error("legion_agent_usage_unread is missing")
	}
	// Node-pressure eviction: its counter from the start, one sample per
	// reason.
	if _, n, _ := sum(af, "legion_agent_evictions_total", nil); n != 2 {
		t.Errorf("legion_agent_evictions_total in %d samples, want one per reason (2)", n)
	}
	// A logs session through a manager shows in the agent's counts.
	ts, _, err := cl.List(context.Background(), legion.KindTask, client.ListOptions{Namespace: legion.DefaultNamespace})
	if err != nil || len(ts) == 0 {
		t.Fatalf("listing tasks: %v", err)
	}
	err = cl.Logs(context.Background(), client.Target{Kind: legion.KindTask, Name: ts[0].GetMetadata().Name}, client.LogsOptions{},
		func(client.LogFrame) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	poll(t, "a logs session counted", 10*time.Second, func() bool {
		v, _, _ := sum(scrape(t, agentMetrics.Addr), "legion_agent_sessions_total", map[string]string{"kind": "logs"})
		return v >= 1
	})
}
