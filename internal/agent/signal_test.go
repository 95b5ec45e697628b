package agent

import (
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/image"
)

// Every stop signal admission accepts, as admission stores it, is one the
// agent sends, with the number the platform gives it; and the agent maps
// no signal admission would refuse.
func TestStopSignalsAdmittedAreSent(t *testing.T) {
	t.Parallel()
	names := legion.StopSignals()
	if len(names) == 0 {
		t.Fatal("admission accepts no stop signal")
	}
	for _, name := range names {
		written := strings.ToLower(strings.TrimPrefix(name, "SIG"))
		objs, err := legion.ParseManifest("t.yaml", []byte("apiVersion: legion/v1\nkind: Service\nmetadata: {name: web}\n"+
			"spec: {pod: {containers: [{name: main, image: example/web:1, stopSignal: "+written+"}]}}\n"))
		if err != nil {
			t.Errorf("%s: admission refused %q: %v", name, written, err)
			continue
		}
		task := testTask("t1")
		task.Spec.Pod = objs[0].(*legion.Service).Spec.Pod
		c := &task.Spec.Pod.Containers[0]
		cfg := &image.Config{Config: image.ContainerConfig{Cmd: []string{"/bin/sh"}}}
		spec, _, err := containerSpec(task, testNode, c, cfg, "/", map[string]string{}, nil, nil)
		if err != nil {
			t.Errorf("%s: admitted as %q, the agent builds no container: %v", name, c.StopSignal, err)
			continue
		}
		if want := unix.SignalNum(name); spec.StopSignal != want || want == 0 {
			t.Errorf("%s: the agent sends %d, the platform's number is %d", name, spec.StopSignal, want)
		}
	}
	for name := range signalNumbers {
		if !slices.Contains(names, name) {
			t.Errorf("the agent maps %s, which admission refuses", name)
		}
	}
}

// An image's STOPSIGNAL written by number or as a realtime signal is sent
// with the platform's number: SIGRTMIN+3 is 37 on Linux, 68 on FreeBSD.
// A number the two platforms disagree on fails the container, naming it.
func TestImageStopSignalByNumberAndRealtime(t *testing.T) {
	t.Parallel()
	rtMin, rtMax := 34, 64 // Linux, as its C library leaves them
	if runtime.GOOS == "freebsd" {
		rtMin, rtMax = 65, 126 // sys/signal.h
	}
	for written, want := range map[string]syscall.Signal{"9": syscall.SIGKILL, "15": syscall.SIGTERM,
		"SIGRTMIN+3": syscall.Signal(rtMin + 3), "RTMIN": syscall.Signal(rtMin), "SIGRTMAX-2": syscall.Signal(rtMax - 2)} {
		task := testTask("t1")
		c := &task.Spec.Pod.Containers[0]
		cfg := &image.Config{Config: image.ContainerConfig{Cmd: []string{"/bin/sh"}, StopSignal: written}}
		spec, _, err := containerSpec(task, testNode, c, cfg, "/", map[string]string{}, nil, nil)
		if err != nil {
			t.Errorf("STOPSIGNAL %s: %v", written, err)
			continue
		}
		if spec.StopSignal != want {
			t.Errorf("STOPSIGNAL %s: the agent sends %d, want %d", written, spec.StopSignal, want)
		}
	}
	task := testTask("t1")
	cfg := &image.Config{Config: image.ContainerConfig{Cmd: []string{"/bin/sh"}, StopSignal: "10"}}
	_, _, err := containerSpec(task, testNode, &task.Spec.Pod.Containers[0], cfg, "/", map[string]string{}, nil, nil)
	if err == nil || !strings.Contains(err.Error(), `stop signal "10" unknown`) {
		t.Errorf("STOPSIGNAL 10: %v; want it refused by name", err)
	}
}
