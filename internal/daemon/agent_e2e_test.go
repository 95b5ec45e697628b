package daemon

import (
	"bytes"
	"context"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/controller"
	"github.com/legionbsd/legion/cluster/dispatcher"
	"github.com/legionbsd/legion/cluster/dispatcher/dispatchertest"
	"github.com/legionbsd/legion/cluster/leader"
	"github.com/legionbsd/legion/cluster/pki"
	"github.com/legionbsd/legion/cluster/store"
	"github.com/legionbsd/legion/image"
	"github.com/legionbsd/legion/internal/agent"
	"github.com/legionbsd/legion/internal/agent/dispatcherclient"
	"github.com/legionbsd/legion/internal/testcluster"
	"github.com/legionbsd/legion/internal/testimage"
	"github.com/legionbsd/legion/internal/testpoll"
	"github.com/legionbsd/legion/jail/jailtest"
	"github.com/legionbsd/legion/jail/process"
	// The test binary is also the container supervisor, as the legion
	// binary is in production.
	_ "github.com/legionbsd/legion/jail/shim"
	"github.com/legionbsd/legion/netbsd/loopback"
)

func TestMain(m *testing.M) {
	jailtest.RefuseSupervisor()
	code := m.Run()
	// The test image's archive serves every test of the binary: it goes
	// when they are done.
	if imageOnce.dir != "" {
		os.RemoveAll(imageOnce.dir)
	}
	os.Exit(code)
}

const testImage = "localhost/legion-test/server:1"

// testPod is a manifest of kind (Job or Service) named name whose one
// container, c, runs the test image with args (a YAML list); specLines
// come first in its spec. Further container lines can be appended.
func testPod(kind, name, c, args string, specLines ...string) string {
	spec := ""
	for _, l := range specLines {
		spec += "  " + l + "\n"
	}
	return `apiVersion: legion/v1
kind: ` + kind + `
metadata: {name: ` + name + `}
spec:
` + spec + `  pod:
    containers:
      - name: ` + c + `
        image: ` + testImage + `
        pullPolicy: never
        args: ` + args + `
`
}

// listen8080 are the test server's arguments to serve HTTP on the pod's
// address at 8080.
const listen8080 = `[-listen, "$(LEGION_POD_IP):8080"]`

// servesHTTP are container lines of testPod naming port 8080 http and
// probing readiness there every period.
func servesHTTP(period string) string {
	return `        ports: [{name: http, containerPort: 8080}]
        probes:
          readiness: {http: {path: /ready, port: http}, period: ` + period + `}
`
}

// endpointHTTP, after a Service's pod, publishes its port http at 80.
const endpointHTTP = `  endpoint:
    ports: [{name: http, port: 80, targetPort: http}]
`

// buildImage compiles the test server once and loads it into a new image
// store.
var imageOnce struct {
	sync.Once
	dir, archive string
	err          error
}

// testImageArchive is the test image as an OCI archive, built once per
// test binary.
func testImageArchive(t testing.TB) string {
	t.Helper()
	imageOnce.Do(func() {
		img, err := testimage.Build(context.Background(), testimage.Options{User: "0"})
		if err != nil {
			imageOnce.err = err
			return
		}
		dir, err := os.MkdirTemp("", "legion-e2e-image-")
		if err != nil {
			imageOnce.err = err
			return
		}
		imageOnce.dir, imageOnce.archive = dir, filepath.Join(dir, "server.tar")
		imageOnce.err = testimage.WriteArchive(imageOnce.archive, img, testImage)
	})
	if imageOnce.err != nil {
		t.Fatalf("building the test image: %v", imageOnce.err)
	}
	return imageOnce.archive
}

func loadTestImage(t testing.TB, images *image.Images) {
	t.Helper()
	f, err := os.Open(testImageArchive(t))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := images.Load(context.Background(), f, testImage, time.Now()); err != nil {
		t.Fatalf("loading the test image: %v", err)
	}
}

type node struct {
	st      *store.Store
	disp    *dispatchertest.Manager
	sess    *dispatcherclient.Session
	dataDir string
	runDir  string
	cancel  context.CancelFunc
	done    sync.WaitGroup
	rt      *process.Runtime
	zone    string
	eps     *Endpoints
	images  *image.Images
	net     agent.Network
	dirs    agent.TaskDirs
	// vipOctet places the node's VIPs in 127/8 (LocalAddr), from ranges
	// of its own.
	vipOctet byte
	// platform is what the node's status reports.
	platform legion.Platform

	clock       *offsetClock
	agentCancel context.CancelFunc
	agentDone   chan struct{}
}

// startAgent runs an agent for the node until stopAgent; like a daemon
// restart, a new agent finds the pods the last one left.
func (n *node) startAgent(ctx context.Context) {
	actx, cancel := context.WithCancel(ctx)
	n.agentCancel, n.agentDone = cancel, make(chan struct{})
	a := &agent.Agent{Node: "n1", Manager: n.sess, Runtime: n.rt, Images: n.images, Network: n.net,
		DataDir: n.dataDir, RunDir: n.runDir, Endpoints: n.eps.Apply, TaskDirs: n.dirs, Platform: n.platform}
	go func() { defer close(n.agentDone); a.Run(actx) }()
}

func (n *node) stopAgent() {
	n.agentCancel()
	<-n.agentDone
}

// offsetClock is the planner's clock: real time, moved forward by the
// test when it must not wait for a cron schedule.
type offsetClock struct {
	mu  sync.Mutex
	off time.Duration
}

func (c *offsetClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.off)
}

func (c *offsetClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.off += d
	c.mu.Unlock()
}

func (c *offsetClock) offset() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.off
}

// shiftedSignals are the dispatcher's heartbeats and usage on the
// planner's clock: the dispatcher stamps them in real time.
type shiftedSignals struct {
	d     *dispatcher.Service
	clock *offsetClock
}

func (s shiftedSignals) Heartbeats() map[string]time.Time {
	off := s.clock.offset()
	out := s.d.Heartbeats()
	for k, v := range out {
		out[k] = v.Add(off)
	}
	return out
}

func (s shiftedSignals) Usage() []legion.Usage {
	off := s.clock.offset()
	out := s.d.Usage()
	for i := range out {
		out[i].Time = out[i].Time.Add(off)
	}
	return out
}

func poll(t testing.TB, what string, d time.Duration, cond func() bool) {
	t.Helper()
	testpoll.Until(t, what, d, 20*time.Millisecond, cond)
}

// startNode runs a one-node cluster in the test: a store with the
// controller loop and the VIP allocator, its dispatcher on a loopback
// port, and an agent (the process runtime, a directory image store) that
// registers and follows its assignments through that dispatcher with a
// node certificate, as a daemon's does.
func startNode(t testing.TB) *node {
	t.Helper()
	base := t.TempDir()
	n := &node{dataDir: filepath.Join(base, "data"), runDir: filepath.Join(base, "run")}
	ca := dispatchertest.NewCA(t)
	st := dispatchertest.OpenStore(t)
	n.st = st
	n.disp = dispatchertest.Serve(t, ca, st, nil, nil)

	ds, err := image.NewDirStore(filepath.Join(n.dataDir, "layers"))
	if err != nil {
		t.Fatal(err)
	}
	images, err := image.Open(image.Options{DataDir: n.dataDir, Store: ds, Platform: image.PlatformRule{Arch: runtime.GOARCH, AllowLinux: true}})
	if err != nil {
		t.Fatal(err)
	}
	loadTestImage(t, images)
	rt, err := process.New(process.Config{DataDir: n.dataDir, Shim: os.Args[0]})
	if err != nil {
		t.Fatal(err)
	}
	n.rt = rt

	status := legion.NodeStatus{State: legion.NodeReady, Hostname: "n1",
		Platform:  legion.Platform{OS: "freebsd", Arch: "amd64"},
		Resources: legion.NodeResources{Capacity: legion.ResourceRequests{CPU: 4000, Memory: 8 << 30}, Allocatable: legion.ResourceRequests{CPU: 4000, Memory: 8 << 30}}}
	n.platform = status.Platform
	n.clock = &offsetClock{}
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	sess, err := dispatcherclient.New(dispatcherclient.Config{Managers: []string{n.disp.Addr},
		TLS:    dispatchertest.Credentials(t, ca, "n1", pki.RoleWorker).ClientConfig(),
		Status: func() legion.NodeStatus { return status }, Usage: newUsageSampler(rt, "n1").Usage})
	if err != nil {
		t.Fatal(err)
	}
	n.sess = sess
	n.zone = filepath.Join(n.runDir, "resolver", "zone.json")
	// Addresses of their own, apart from other tests and clusters
	// running beside these on the same host.
	plan, err := testcluster.FreePlan(t)
	if err != nil {
		t.Fatal(err)
	}
	n.vipOctet = plan.ServiceOctet()
	n.eps = &Endpoints{ZoneFile: n.zone, VIPOctet: n.vipOctet}
	n.images = images
	n.net = &LoopbackNetwork{Subnet: loopback.Image(plan.NodeSubnet(1))}
	t.Cleanup(func() {
		cancel()
		if n.agentDone != nil {
			n.stopAgent()
		}
		sess.Close()
		n.done.Wait()
		n.eps.Close()
		// Pods outlive the agent by design: remove what is left, with
		// their roots (mounts, on Linux as root).
		removeAllPods(t, n.dataDir)
		rt.Wait()
	})
	// Before the node stops (cleanups run last registered first).
	t.Cleanup(func() {
		if t.Failed() {
			testcluster.LogStuckWorkers(t)
		}
	})
	if err := sess.Start(ctx); err != nil {
		t.Fatalf("registering the node: %v", err)
	}
	n.done.Add(2)
	go func() { defer n.done.Done(); leader.RunVIPAllocator(ctx, st, nil) }()
	loop := &controller.Loop{Store: st, Signals: shiftedSignals{d: n.disp.Service, clock: n.clock}, LeaderSince: time.Now().Add(-time.Hour),
		Interval: 250 * time.Millisecond, Now: n.clock.Now}
	go func() { defer n.done.Done(); loop.Run(ctx) }()
	poll(t, "the node ready", 10*time.Second, func() bool {
		o, _, err := st.Get(legion.KindNode, "", "n1")
		return err == nil && o.(*legion.Node).Status.State == legion.NodeReady
	})
	n.startAgent(ctx)
	return n
}

func (n *node) apply(t testing.TB, manifest string) {
	t.Helper()
	objs, err := legion.ParseManifest("test", []byte(manifest))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if _, _, err := n.st.Put(context.Background(), o, store.WriteOptions{KeepStatus: true}); err != nil {
			t.Fatal(err)
		}
	}
}

func (n *node) tasksOf(t testing.TB, label, owner string) []*legion.Task {
	t.Helper()
	objs, _, err := n.st.List(legion.KindTask, "", func(o legion.Object) bool {
		return o.GetMetadata().Labels[label] == owner
	})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]*legion.Task, len(objs))
	for i, o := range objs {
		out[i] = o.(*legion.Task)
	}
	return out
}

func (n *node) job(t *testing.T, name string) *legion.Job {
	t.Helper()
	o, _, err := n.st.Get(legion.KindJob, "default", name)
	if err != nil {
		t.Fatal(err)
	}
	return o.(*legion.Job)
}

// jobOutput waits for a job to complete (failing the test if it fails)
// and returns what its container printed, as saved when its pod went.
func (n *node) jobOutput(t *testing.T, name, container string) string {
	t.Helper()
	poll(t, "job "+name+" to complete", 60*time.Second, func() bool {
		j := n.job(t, name)
		if j.Status.State == legion.JobFailed {
			t.Fatalf("job %s failed: %s", name, j.Status.Message)
		}
		return j.Status.State == legion.JobComplete
	})
	task := n.tasksOf(t, "legion.job", name)[0]
	saved, _ := os.ReadFile(filepath.Join(agent.SavedOutputDir(n.dataDir, task.Metadata.UID), container+".log"))
	return string(saved)
}

// A job runs to completion through the whole node: the planner places its
// task, the agent pulls nothing (a loaded image), runs the container as a
// supervised process, reports it complete, and keeps its output.
func TestJobRunsToCompletionAndKeepsItsOutput(t *testing.T) {
	n := startNode(t)
	n.apply(t, testPod("Job", "hello", "say", `[-say, "hello from a job", -exit, "0"]`))
	poll(t, "the job to complete", 60*time.Second, func() bool { return n.job(t, "hello").Status.State == legion.JobComplete })
	tasks := n.tasksOf(t, "legion.job", "hello")
	if len(tasks) != 1 || tasks[0].Status.State != legion.TaskComplete {
		t.Fatalf("tasks: %+v", tasks)
	}
	saved, err := os.ReadFile(filepath.Join(agent.SavedOutputDir(n.dataDir, tasks[0].Metadata.UID), "say.log"))
	if err != nil || !strings.Contains(string(saved), "stdout F hello from a job") {
		t.Fatalf("saved output %q, %v", saved, err)
	}
}

// A failing job's tasks are retried and the job fails after backoffLimit.
func TestFailingJobFailsAfterItsBackoffLimit(t *testing.T) {
	n := startNode(t)
	n.apply(t, testPod("Job", "broken", "fail", `[-err, "it went wrong", -exit, "3"]`, "backoffLimit: 0"))
	poll(t, "the job to fail", 60*time.Second, func() bool { return n.job(t, "broken").Status.State == legion.JobFailed })
	j := n.job(t, "broken")
	if j.Status.Failed != 1 || !strings.Contains(j.Status.Message, "3") {
		t.Fatalf("job status %+v", j.Status)
	}
}

// A secret reaches the container as an environment variable and as a
// file, and its value is nowhere under the data directory.
func TestSecretReachesTheContainerAndNotTheDisk(t *testing.T) {
	n := startNode(t)
	const value = "s3cr3t-value-for-the-e2e-test"
	n.apply(t, `apiVersion: legion/v1
kind: Secret
metadata: {name: token}
spec: {text: `+value+`}
---
`+testPod("Job", "reader", "cat", "[-cat, /run/secrets/token]")+`        secrets: [{name: token}]
`)
	if saved := n.jobOutput(t, "reader", "cat"); !strings.Contains(saved, value) {
		t.Fatalf("the container did not read the secret file: %q", saved)
	}
	// As an environment variable: a service answers its value over HTTP.
	n.apply(t, testPod("Service", "envsvc", "web", listen8080)+`        env: [{name: TOKEN, secret: token}]
`+servesHTTP("100ms"))
	poll(t, "the env service ready", 60*time.Second, func() bool { return readyTasks(n.tasksOf(t, "legion.service", "envsvc")) == 1 })
	ip := n.tasksOf(t, "legion.service", "envsvc")[0].Status.IP
	resp, err := http.Get("http://" + ip + ":8080/env/TOKEN")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.TrimSpace(string(body)) != value {
		t.Fatalf("the container's TOKEN is %q, want the secret's value", body)
	}
	// The saved output holds what the container printed, which here is
	// the secret itself; every other file under the data directory must
	// not hold it, the running container's record included.
	filepath.WalkDir(n.dataDir, func(p string, d fs.DirEntry, err error) error {
		// Regular files only: a running container's root holds devices.
		if err != nil || !d.Type().IsRegular() || strings.HasPrefix(p, agent.SavedOutputDir(n.dataDir, "")) || strings.HasSuffix(p, ".db") {
			return nil
		}
		if data, err := os.ReadFile(p); err == nil && bytes.Contains(data, []byte(value)) {
			t.Errorf("the secret's value is in %s", p)
		}
		return nil
	})
}

// An agent restart adopts the running pods: no container is started
// again and the tasks stay running.
func TestAgentRestartAdoptsRunningPods(t *testing.T) {
	n := startNode(t)
	n.apply(t, webService)
	poll(t, "three ready tasks", 60*time.Second, func() bool { return readyTasks(n.tasksOf(t, "legion.service", "web")) == 3 })
	pids := map[string]int{}
	cs, err := n.rt.List(context.Background(), map[string]string{agent.LabelNode: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		if !c.Infra {
			pids[c.ID] = c.Pid
		}
	}
	if len(pids) != 3 {
		t.Fatalf("%d containers, want 3", len(pids))
	}
	n.stopAgent()
	// A new network too: the addresses come back from the tasks' status.
	n.net = &LoopbackNetwork{Subnet: n.net.(*LoopbackNetwork).Subnet}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n.startAgent(ctx)
	poll(t, "the tasks reported adopted", 30*time.Second, func() bool {
		adopted := 0
		for _, task := range n.tasksOf(t, "legion.service", "web") {
			if strings.Contains(task.Status.Message, "adopted") {
				adopted++
			}
		}
		return adopted == 3
	})
	cs, err = n.rt.List(context.Background(), map[string]string{agent.LabelNode: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		if c.Infra {
			continue
		}
		if pids[c.ID] != c.Pid || c.State != "running" {
			t.Errorf("container %s: pid %d state %s, was pid %d: it was restarted", c.ID, c.Pid, c.State, pids[c.ID])
		}
	}
	if got := readyTasks(n.tasksOf(t, "legion.service", "web")); got != 3 {
		t.Fatalf("%d ready tasks after the restart, want 3", got)
	}
}

// A cron job makes a Job when its schedule comes due, and the Job runs.
// The planner's clock is moved past the next minute instead of waiting.
func TestCronJobRunsOnSchedule(t *testing.T) {
	n := startNode(t)
	n.apply(t, `apiVersion: legion/v1
kind: CronJob
metadata: {name: tick}
spec:
  schedule: "* * * * *"
  job:
    pod:
      containers:
        - name: say
          image: `+testImage+`
          pullPolicy: never
          args: [-say, tock, -exit, "0"]
`)
	cron := func() *legion.CronJob {
		o, _, err := n.st.Get(legion.KindCronJob, "default", "tick")
		if err != nil {
			t.Fatal(err)
		}
		return o.(*legion.CronJob)
	}
	poll(t, "the cron job seen", 20*time.Second, func() bool { return cron().Status.CountedFrom != nil })
	jobs := func() []*legion.Job {
		objs, _, _ := n.st.List(legion.KindJob, "default", func(o legion.Object) bool {
			return o.GetMetadata().Labels["legion.cronjob"] == "tick"
		})
		out := make([]*legion.Job, len(objs))
		for i, o := range objs {
			out[i] = o.(*legion.Job)
		}
		return out
	}
	n.clock.Advance(61 * time.Second)
	deadline := time.Now().Add(60 * time.Second)
	for {
		js := jobs()
		if len(js) >= 1 && js[0].Status.State == legion.JobComplete {
			break
		}
		if time.Now().After(deadline) {
			for _, j := range js {
				t.Logf("job %s: %+v", j.Metadata.Name, j.Status)
			}
			t.Logf("cron job status: %+v", cron().Status)
			for _, task := range n.tasksOf(t, "legion.job", js[len(js)-1].Metadata.Name) {
				t.Logf("task %s: node=%q desired=%s %+v", task.Metadata.Name, task.Spec.Node, task.Spec.DesiredState, task.Status)
			}
			t.Fatal("timed out waiting for a job made by the schedule, complete")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.HasPrefix(jobs()[0].Metadata.Name, "tick-") {
		t.Fatalf("job name %q, want tick-<minutes since the epoch>", jobs()[0].Metadata.Name)
	}
}
