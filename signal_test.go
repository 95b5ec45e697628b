package legion

import (
	"strings"
	"testing"
)

// Admission stores a stop signal by its canonical name, however it was
// written, so two manifests that mean the same signal store the same spec.
func TestStopSignalStoredCanonical(t *testing.T) {
	t.Parallel()
	for _, written := range []string{"quit", "SIGQUIT", "Sigquit", "QUIT"} {
		o := admitOne(t, manifest("Service", "x", svcSpec("",
			"initContainers: [{name: i, image: n, stopSignal: "+written+"}], containers: [{name: a, image: n, stopSignal: "+written+"}]")))
		pod := o.(*Service).Spec.Pod
		if got := pod.Containers[0].StopSignal; got != "SIGQUIT" {
			t.Errorf("stopSignal %q stored as %q, want SIGQUIT", written, got)
		}
		if got := pod.InitContainers[0].StopSignal; got != "SIGQUIT" {
			t.Errorf("init container's stopSignal %q stored as %q, want SIGQUIT", written, got)
		}
	}
	for _, name := range StopSignals() {
		if got, ok := ParseStopSignal(strings.ToLower(strings.TrimPrefix(name, "SIG"))); !ok || got != name {
			t.Errorf("ParseStopSignal of %s in lower case without SIG: %q, %v", name, got, ok)
		}
	}
}

// A signal the agent cannot send on FreeBSD is refused, naming the field
// and what it takes: SIGPWR is Linux's alone.
func TestStopSignalUnknownRefused(t *testing.T) {
	t.Parallel()
	// 10 is SIGUSR1 on Linux and SIGBUS on FreeBSD; Linux has 31
	// realtime signals for programs.
	for _, bad := range []string{"SIGFOO", "SIGPWR", "pwr", "10", "0", "SIGRTMIN+31", "SIGRTMAX-31", "SIGRTMIN-1", "SIGRTMAX+1", "SIGRTMIN+", "RTMIN+1x"} {
		_, err := ParseManifest("t.yaml", []byte(manifest("Service", "x", svcSpec("", "containers: [{name: a, image: n, stopSignal: '"+bad+"'}]"))))
		want := `spec.pod.containers[0].stopSignal: "` + bad + `": expected one of SIGHUP, SIGINT, SIGQUIT, SIGKILL, SIGUSR1, SIGUSR2, SIGTERM, SIGWINCH, SIGSTOP, SIGRTMIN+n or SIGRTMAX-n (n up to 30), or the number of`
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("stopSignal %q: %v, want an error containing %q", bad, err, want)
		}
	}
}

// A number FreeBSD and Linux give the same signal, and the realtime
// signals counted from either end (systemd's images stop with
// SIGRTMIN+3), are stored by their canonical names.
func TestStopSignalByNumberAndRealtime(t *testing.T) {
	t.Parallel()
	for written, want := range map[string]string{"9": "SIGKILL", "15": "SIGTERM", "3": "SIGQUIT", "28": "SIGWINCH",
		"rtmin+3": "SIGRTMIN+3", "SIGRTMIN+03": "SIGRTMIN+3", "SIGRTMIN+0": "SIGRTMIN", "sigrtmin": "SIGRTMIN",
		"SIGRTMAX-2": "SIGRTMAX-2", "rtmax": "SIGRTMAX", "SIGRTMIN+30": "SIGRTMIN+30"} {
		o := admitOne(t, manifest("Service", "x", svcSpec("", "containers: [{name: a, image: n, stopSignal: '"+written+"'}]")))
		if got := o.(*Service).Spec.Pod.Containers[0].StopSignal; got != want {
			t.Errorf("stopSignal %q stored as %q, want %q", written, got, want)
		}
	}
	for name, want := range map[string][2]int{"SIGRTMIN": {1, 0}, "SIGRTMIN+3": {1, 3}, "SIGRTMAX-2": {0, 2}} {
		fromMin, n, ok := RealtimeStopSignal(name)
		if !ok || fromMin != (want[0] == 1) || n != want[1] {
			t.Errorf("RealtimeStopSignal(%s) = %v, %d, %v", name, fromMin, n, ok)
		}
	}
	for _, notCanonical := range []string{"SIGRTMIN+0", "SIGRTMIN+03", "rtmin+3", "SIGTERM"} {
		if _, _, ok := RealtimeStopSignal(notCanonical); ok {
			t.Errorf("RealtimeStopSignal(%s) took a name admission does not store", notCanonical)
		}
	}
}
