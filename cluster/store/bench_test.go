package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/legionbsd/legion"
)

// BenchmarkPut is sequential fsynced writes on one manager, without the
// API in front.
func BenchmarkPut(b *testing.B) {
	n := single(b)
	benchPuts(b, n.s, 1)
}

// BenchmarkPutThree is sequential fsynced writes on three managers over
// raft's in-memory transport (the API and gRPC left out).
func BenchmarkPutThree(b *testing.B) {
	ns := threeNodes(b)
	closeAtEnd(b, ns)
	benchPuts(b, ns[0].s, 1)
}

// BenchmarkPutConcurrent is 64 writers at once on one and on three
// managers: raft batches their entries into shared appends.
func BenchmarkPutConcurrent(b *testing.B) {
	b.Run("managers=1", func(b *testing.B) {
		n := single(b)
		benchPuts(b, n.s, 64)
	})
	b.Run("managers=3", func(b *testing.B) {
		ns := threeNodes(b)
		closeAtEnd(b, ns)
		benchPuts(b, ns[0].s, 64)
	})
}

// benchPuts makes b.N writes of new objects from the given number of
// writers and reports writes per second.
func benchPuts(b *testing.B, s *Store, writers int) { benchPutsSized(b, s, writers, 1) }

// benchPutsSized is benchPuts with values of size bytes.
func benchPutsSized(b *testing.B, s *Store, writers, size int) {
	value := strings.Repeat("x", size)
	ctx := context.Background()
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				if _, _, err := s.Put(ctx, config("default", fmt.Sprint("c", i), value), WriteOptions{}); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "writes/s")
	reportSyncs(b, s)
}

// BenchmarkPutSealing is the cost of encryption at rest: writes of
// 512-byte values on one and three managers, from 1 and 64 writers, with
// every value sealed under a data key and in the clear, side by side.
func BenchmarkPutSealing(b *testing.B) {
	for _, managers := range []int{1, 3} {
		for _, writers := range []int{1, 64} {
			for _, sealedRun := range []bool{false, true} {
				name := fmt.Sprintf("managers=%d/writers=%d/sealed=%v", managers, writers, sealedRun)
				b.Run(name, func(b *testing.B) {
					var keys [][]byte
					if sealedRun {
						keys = [][]byte{newKey(b), newKey(b), newKey(b)}
					}
					var s *Store
					if managers == 1 {
						var key []byte
						if keys != nil {
							key = keys[0]
						}
						n := openNodeKey(b, "m1", b.TempDir(), FastTiming(), key)
						defer n.s.Close()
						if err := n.s.Bootstrap("m1"); err != nil {
							b.Fatal(err)
						}
						waitFor(b, "leader", 5*time.Second, n.s.IsLeader)
						s = n.s
					} else {
						ns := threeNodesKeys(b, FastTiming(), keys)
						closeAtEnd(b, ns)
						s = ns[0].s
					}
					benchPutsSized(b, s, writers, 512)
				})
			}
		}
	}
}

// leaderWith is a sealed single-manager store holding objects Configs
// (c0, c1, ...) of size bytes each, closed when b ends.
func leaderWith(b *testing.B, objects, size int) *node {
	n := openNodeKey(b, "m1", b.TempDir(), FastTiming(), newKey(b))
	b.Cleanup(func() { n.s.Close() })
	if err := n.s.Bootstrap("m1"); err != nil {
		b.Fatal(err)
	}
	waitFor(b, "leader", 5*time.Second, n.s.IsLeader)
	writes := make([]Write, 0, 1000)
	for i := range objects {
		writes = append(writes, Write{Object: config("default", fmt.Sprint("c", i), strings.Repeat("x", size))})
		if len(writes) == cap(writes) || i == objects-1 {
			for _, err := range n.s.WriteAll(context.Background(), writes) {
				if err != nil {
					b.Fatal(err)
				}
			}
			writes = writes[:0]
		}
	}
	return n
}

// BenchmarkDump reads 100,000 objects of about 512 bytes as a backup
// does, reporting MB/s of their JSON.
func BenchmarkDump(b *testing.B) {
	const objects = 100_000
	n := leaderWith(b, objects, 384)
	ctx := context.Background()
	b.ResetTimer()
	var total int64
	for range b.N {
		count := 0
		_, _, err := n.s.Dump(ctx, func(raw []byte) error {
			total += int64(len(raw))
			count++
			return nil
		})
		if err != nil || count != objects {
			b.Fatalf("dump: %d objects, %v", count, err)
		}
	}
	b.ReportMetric(float64(total)/1e6/b.Elapsed().Seconds(), "MB/s")
}

// BenchmarkSnapshot takes a snapshot of 100,000 objects of about 512
// bytes as raft does: stall-ms is the time on raft's apply goroutine
// (fsm.Snapshot), which every write waits for; persist-ms the copy into
// the sink after it (fsm.Snapshot's FSMSnapshot.Persist), while writes go
// on.
func BenchmarkSnapshot(b *testing.B) {
	n := leaderWith(b, 100_000, 512)
	b.ResetTimer()
	var stall, persist time.Duration
	for range b.N {
		t0 := time.Now()
		fs, err := n.s.fsm.Snapshot()
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		var sink memSink
		err = fs.Persist(&sink)
		fs.Release()
		if err != nil {
			b.Fatal(err)
		}
		stall, persist = stall+t1.Sub(t0), persist+time.Since(t1)
	}
	b.ReportMetric(float64(stall.Milliseconds())/float64(b.N), "stall-ms")
	b.ReportMetric(float64(persist.Milliseconds())/float64(b.N), "persist-ms")
}

// reportSyncs reports how many entries each log append (one fdatasync)
// carried in the benchmark: how well concurrent writes share a sync.
func reportSyncs(b *testing.B, s *Store) {
	if a := s.logs.wal.appends.Load(); a > 0 {
		b.ReportMetric(float64(s.logs.wal.appended.Load())/float64(a), "entries/sync")
	}
}

// BenchmarkDecodeCommand is what each replica's state machine pays to
// read a 512-byte Config's command from its log entry: as encode writes
// it (object first, taken as it lies) and, for comparison, json.Unmarshal
// of the same command in json.Marshal's form (as every entry was read
// before).
func BenchmarkDecodeCommand(b *testing.B) {
	obj, err := legion.MarshalJSON(config("default", "bench", strings.Repeat("x", 512)))
	if err != nil {
		b.Fatal(err)
	}
	c := command{Op: opPut, Kind: legion.KindConfig, Namespace: "default", Name: "bench", Object: obj}
	encoded, err := c.encode()
	if err != nil {
		b.Fatal(err)
	}
	marshalled, err := json.Marshal(&c)
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		data   []byte
		decode func([]byte, *command) error
	}{
		{"object-first", encoded, decodeCommand},
		{"json.Unmarshal", marshalled, func(d []byte, c *command) error { return json.Unmarshal(d, c) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(tc.data)))
			b.ReportAllocs()
			for b.Loop() {
				var got command
				if err := tc.decode(tc.data, &got); err != nil || len(got.Object) != len(obj) {
					b.Fatalf("decoded %d object bytes, %v", len(got.Object), err)
				}
			}
		})
	}
}

// BenchmarkApplyCommand is what each replica's state machine pays, on the
// goroutine every write of the cluster waits for, to apply the writes a
// rollout makes most of: an agent's report of a task's status, a
// controller's creation of a task that requires its Service, and its
// update of a task it tells to stop.
func BenchmarkApplyCommand(b *testing.B) {
	svc := &legion.Service{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindService,
		Metadata: legion.Metadata{Namespace: "default", Name: "web", UID: "00000000-0000-4000-8000-000000000001", Version: 1}}}
	replicas := 100
	svc.Spec.Replicas = &replicas
	svc.Spec.Pod.Containers = []legion.Container{{Name: "app", Image: "example.org/web@sha256:" + strings.Repeat("a", 64),
		Command: []string{"/bin/web", "--listen", ":8080"}, Env: []legion.EnvVar{{Name: "MODE", Value: "production"}}}}
	svc.Status.Spec = &svc.Spec
	task := &legion.Task{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindTask,
		Metadata: legion.Metadata{Namespace: "default", Name: "web.1-abcdef", Labels: map[string]string{"app": "web"}}}}
	task.Spec.Owner = legion.Owner{Kind: legion.KindService, Name: "web"}
	task.Spec.Pod = svc.Spec.Pod
	task.Spec.Node, task.Spec.Slot, task.Spec.DesiredState = "node-017", 1, legion.TaskRunning
	stored := func(o legion.Object) []byte {
		data, err := legion.MarshalJSON(o)
		if err != nil {
			b.Fatal(err)
		}
		return data
	}
	report := legion.Clone(task).(*legion.Task)
	report.Status = legion.TaskStatus{State: legion.TaskRunning, Ready: true, IP: "10.0.3.17", Message: "started"}
	svcKey, taskKey := legion.Key(legion.KindService, "default", "web"), legion.Key(legion.KindTask, "default", task.Metadata.Name)
	status, err := putCommand(opStatus, report, WriteOptions{}) // as agents' reports are written
	if err != nil {
		b.Fatal(err)
	}
	stopping := legion.Clone(task).(*legion.Task)
	stopping.Metadata.Version, stopping.Spec.DesiredState, stopping.Spec.StopReason = 1, legion.TaskShutdown, "replaced by an update"
	for _, tc := range []struct {
		name string
		c    command
	}{
		{"status", *status},
		{"create-requiring-owner", command{Op: opPut, Kind: legion.KindTask, Namespace: "default", Name: task.Metadata.Name,
			MustNotExist: true, Object: stored(task),
			Requires: []Requirement{{Kind: legion.KindService, Namespace: "default", Name: "web", UID: svc.Metadata.UID}}}},
		{"update-stopping", command{Op: opPut, Kind: legion.KindTask, Namespace: "default", Name: task.Metadata.Name,
			Version: 1, Object: stored(stopping),
			Requires: []Requirement{{Kind: legion.KindService, Namespace: "default", Name: "web", UID: svc.Metadata.UID}}}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			w := &batchWriter{d: &delta{objects: map[string][]byte{svcKey: stored(svc)}}}
			// The task as stored before each write: there for the status,
			// a deleted key (nil) for the creation.
			var before []byte
			if tc.c.Op == opStatus || tc.c.Version != 0 {
				was := legion.Clone(task).(*legion.Task)
				was.Metadata.Version = 1
				before = stored(was)
			}
			index := uint64(2)
			for b.Loop() {
				w.d.objects[taskKey] = before
				r, ev := applyCommand(w, &tc.c, index)
				if r.err != nil || ev == nil {
					b.Fatalf("applying: %v", r.err)
				}
				index++
			}
		})
	}
}

// BenchmarkReadReportedTask is the leader's read of a task an agent
// reports on: the whole task (Get), as a report read it before, and the
// node, status and version alone (Decode), as it reads it now.
//
//	go test -run '^$' -bench ReadReportedTask ./cluster/store
func BenchmarkReadReportedTask(b *testing.B) {
	n := single(b)
	objs, err := legion.ParseManifest("bench", []byte(`apiVersion: legion/v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  replicas: 100
  pod:
    containers:
    - name: web
      image: registry.example/web:2
      command: [/usr/local/bin/web, --listen, ":8080"]
      env: [{name: MODE, value: production}, {name: LOG, value: info}]
      ports: [{name: http, containerPort: 8080}]
      resources: {requests: {cpu: 100m, memory: 64Mi}, limits: {memory: 128Mi}}
      probes: {readiness: {http: {path: /healthz, port: 8080}}}
  endpoint:
    ports: [{name: http, port: 80, targetPort: 8080}]
`))
	if err != nil {
		b.Fatal(err)
	}
	svc := objs[0].(*legion.Service)
	if err := legion.Admit(svc); err != nil {
		b.Fatal(err)
	}
	o, _ := legion.New(legion.KindTask)
	task := o.(*legion.Task)
	task.Metadata = legion.Metadata{Name: "web-1-1", Namespace: "default", Labels: map[string]string{"app": "web"}}
	task.Spec = legion.TaskSpec{Owner: legion.Owner{Kind: legion.KindService, Name: "web"}, Slot: 1, Node: "node-001",
		DesiredState: legion.TaskRunning, Pod: svc.Spec.Pod, OwnerGeneration: 1, PodHash: "0123456789abcdef",
		Images: map[string]string{"registry.example/web:2": "sha256:" + strings.Repeat("ab", 32)}}
	task.Status = legion.TaskStatus{State: legion.TaskRunning, Ready: true, IP: "10.200.1.2", Message: "started"}
	if _, _, err := n.s.Put(context.Background(), task, WriteOptions{}); err != nil {
		b.Fatal(err)
	}
	b.Run("get-whole", func(b *testing.B) {
		for b.Loop() {
			o, _, err := n.s.Get(legion.KindTask, "default", "web-1-1")
			if err != nil || o.(*legion.Task).Spec.Node != "node-001" {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode-part", func(b *testing.B) {
		for b.Loop() {
			var p taskPart
			if _, err := n.s.Decode(legion.KindTask, "default", "web-1-1", &p); err != nil || p.Spec.Node != "node-001" {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkWriteAll is one WriteAll of a planning pass's most tasks
// (scheduler.MaxCreatesPerPass, 2,048 writes of about 1 KB), on one and
// on three managers: how long the pass waits for its writes.
func BenchmarkWriteAll(b *testing.B) {
	const writes = 2048
	value := strings.Repeat("x", 1<<10)
	run := func(b *testing.B, s *Store) {
		ctx := context.Background()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			ws := make([]Write, writes)
			for j := range ws {
				ws[j] = Write{Object: config("default", fmt.Sprintf("c%d-%d", i, j), value),
					Options: WriteOptions{Precondition: Precondition{MustNotExist: true}}}
			}
			for j, err := range s.WriteAll(ctx, ws) {
				if err != nil {
					b.Fatalf("write %d: %v", j, err)
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/pass")
		reportSyncs(b, s)
	}
	b.Run("managers=1", func(b *testing.B) { run(b, single(b).s) })
	b.Run("managers=3", func(b *testing.B) {
		ns := threeNodes(b)
		closeAtEnd(b, ns)
		run(b, ns[0].s)
	})
}
