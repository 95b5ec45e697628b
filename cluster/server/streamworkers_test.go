package server

import (
	"runtime"
	"strings"
	"testing"
	"time"
)

// workersParked counts the goroutines waiting in gRPC's pool of stream
// workers.
func workersParked() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	return strings.Count(string(buf), "grpc.(*Server).serverWorker(")
}

// Calls are served by a pool of long-lived workers, which keep the stacks
// they grew (streamWorkers), and the pool goes with the server. Not
// parallel: it counts every goroutine of the process.
func TestCallsAreServedByAPoolOfWorkers(t *testing.T) {
	before := workersParked()
	m := newManager(t)
	defer m.stop()
	initCluster(t, m)
	if got := workersParked() - before; got < streamWorkers/2 {
		t.Fatalf("%d stream workers waiting after a call, want about %d", got, streamWorkers)
	}
	m.stop()
	waitFor(t, "the stream workers to end with the server", 10*time.Second, func() bool { return workersParked() <= before })
}
