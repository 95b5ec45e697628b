package legion

import "time"

// HeartbeatPeriod is how often a node's agent sends a heartbeat. Node
// health counts missed heartbeats in these periods, the dispatcher tells
// agents this period, and agents send at it until told otherwise, so the
// three agree through this one value.
const HeartbeatPeriod = 2 * time.Second

// Usage is what a running task's app containers used together, as its
// node reported it in a heartbeat (rctl pcpu and memoryuse on FreeBSD).
// The autoscaler reads it.
type Usage struct {
	Namespace string
	Task      string // task name
	Node      string // the reporting node; believed only if the task runs there
	Time      time.Time
	CPU       CPU
	Memory    Bytes
}
