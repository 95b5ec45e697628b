package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// NewManager registers a manager's families on reg: Raft state from src,
// hashicorp/raft's own metrics, the cluster (leader only) and the
// process's Go runtime. The GRPC it returns goes into the gRPC server's
// interceptor chains.
func NewManager(reg prometheus.Registerer, src Source) (*GRPC, error) {
	sink, err := bridgeRaft()
	if err != nil {
		return nil, err
	}
	for _, c := range []prometheus.Collector{raftCollector{src}, clusterCollector{src}, sink} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return NewGRPC(reg)
}

// RegisterProcess adds the process and Go runtime families (memory, GC,
// goroutines, open files); a daemon registers them once, for its manager
// and agent alike.
func RegisterProcess(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{Namespace: "legion"})} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
