package metrics

import (
	"sync"

	gometrics "github.com/hashicorp/go-metrics"
	gmprom "github.com/hashicorp/go-metrics/prometheus"
	"github.com/hashicorp/raft"
	"github.com/legionbsd/legion/cluster/store"
	"github.com/prometheus/client_golang/prometheus"
)

// Source is where a manager's collectors read: the store (nil before the
// daemon is a manager and once it shuts down, so a scrape never holds the
// store open) and, on the leader, the last log index each follower has
// acknowledged, by its address.
type Source struct {
	Store     func() *store.Store
	Followers func() map[string]uint64
}

var (
	descLeader  = prometheus.NewDesc("legion_raft_leader", "1 when this manager is the Raft leader, else 0.", nil, nil)
	descTerm    = prometheus.NewDesc("legion_raft_term", "The Raft term this manager is in.", nil, nil)
	descLast    = prometheus.NewDesc("legion_raft_last_log_index", "Index of the last entry in this manager's Raft log.", nil, nil)
	descCommit  = prometheus.NewDesc("legion_raft_commit_index", "Index of the last entry this manager knows is committed.", nil, nil)
	descApplied = prometheus.NewDesc("legion_raft_applied_index", "Index of the last entry this manager's store has applied.", nil, nil)
	descVoters  = prometheus.NewDesc("legion_raft_voters", "Voters in the latest Raft configuration this manager holds.", nil, nil)
	descLag     = prometheus.NewDesc("legion_raft_follower_lag_entries",
		"On the leader: entries of its log a follower has not acknowledged yet (its whole log until it first answers).",
		[]string{"follower"}, nil)
)

// raftCollector reports one manager's Raft state at scrape time.
type raftCollector struct{ src Source }

func (c raftCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLeader, descTerm, descLast, descCommit, descApplied, descVoters, descLag} {
		ch <- d
	}
}

func (c raftCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.src.Store()
	if st == nil {
		return
	}
	r := st.Raft()
	leader := r.State() == raft.Leader
	last := r.LastIndex()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(descLeader, boolValue(leader))
	gauge(descTerm, float64(r.CurrentTerm()))
	gauge(descLast, float64(last))
	gauge(descCommit, float64(r.CommitIndex()))
	gauge(descApplied, float64(st.AppliedIndex()))
	f := r.GetConfiguration()
	if f.Error() != nil {
		return
	}
	servers := f.Configuration().Servers
	voters := 0
	for _, s := range servers {
		if s.Suffrage == raft.Voter {
			voters++
		}
	}
	gauge(descVoters, float64(voters))
	if !leader || c.src.Followers == nil {
		return
	}
	acked := c.src.Followers()
	for _, s := range servers {
		if string(s.ID) == st.ID() {
			continue
		}
		lag := last
		if got, ok := acked[string(s.Address)]; ok {
			lag = last - min(got, last)
		}
		gauge(descLag, float64(lag), string(s.ID))
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// raftBridge is the go-metrics sink hashicorp/raft's own metrics reach us
// through (commit and apply times, elections, replication RPCs, ...).
// raft reports to go-metrics' process-wide default, so the sink is the
// process's: set once, and registered on every registry that asks. In a
// daemon that is one manager's; in a test running several managers in
// one process their raft metrics add up.
var raftBridge struct {
	once sync.Once
	sink *gmprom.PrometheusSink
	err  error
}

func bridgeRaft() (*gmprom.PrometheusSink, error) {
	raftBridge.once.Do(func() {
		// The sink registers itself on the registry it is given: a
		// private one, so Prometheus's global registry stays empty.
		sink, err := gmprom.NewPrometheusSinkFrom(gmprom.PrometheusOpts{Registerer: prometheus.NewRegistry(), Name: "legion_raft_bridge"})
		if err != nil {
			raftBridge.err = err
			return
		}
		conf := gometrics.DefaultConfig("legion")
		conf.EnableHostname = false
		conf.EnableRuntimeMetrics = false // a goroutine nobody stops; Go's collector is registered instead
		if _, err := gometrics.NewGlobal(conf, sink); err != nil {
			raftBridge.err = err
			return
		}
		raftBridge.sink = sink
	})
	return raftBridge.sink, raftBridge.err
}
