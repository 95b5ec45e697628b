package agent

import (
	"strings"
	"testing"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/image"
)

// A container of a Linux image is made a Linux one (linprocfs, linsysfs
// and the rest on jails); a FreeBSD image's is not.
func TestLinuxImageMakesALinuxContainer(t *testing.T) {
	t.Parallel()
	for _, os := range []string{"linux", "freebsd"} {
		r := newRig(t)
		r.images.os = os
		r.start(t)
		task := testTask("lx-" + os)
		r.assign(nil, task)
		r.mgr.await(t, task.Metadata.Name, "the task running", func(s legion.TaskStatus) bool { return s.State == legion.TaskRunning })
		var got *bool
		for _, s := range r.rt.created() {
			if s.ID == containerID(task, "main") {
				got = &s.Linux
			}
		}
		if got == nil || *got != (os == "linux") {
			t.Errorf("image of %s: container spec Linux %v, want %v", os, got, os == "linux")
		}
	}
}

// An image with nothing for the node's platform rejects the task with the
// node's platform, not as unstartable: the planner places it elsewhere.
func TestImageWithoutThePlatformRejectsTheTask(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.agent.Platform = legion.Platform{OS: "freebsd", Arch: "amd64"}
	r.images.fail = map[string]error{"example/web:1": &image.ErrPlatform{Image: "example/web:1",
		Offers: []image.Platform{{OS: "linux", Arch: "amd64"}}, Rule: image.PlatformRule{Arch: "amd64"}}}
	r.start(t)
	task := testTask("wp1")
	r.assign(nil, task)
	st := r.mgr.await(t, task.Metadata.Name, "the task rejected", func(s legion.TaskStatus) bool { return s.State.Terminal() })
	if st.State != legion.TaskRejected || st.WrongPlatform == nil || *st.WrongPlatform != r.agent.Platform || st.Permanent {
		t.Fatalf("status %s wrongPlatform %+v permanent %v, want rejected with %+v and not permanent", st.State, st.WrongPlatform, st.Permanent, r.agent.Platform)
	}
	if want := "only on nodes started with --linux"; !strings.Contains(st.Message, want) {
		t.Errorf("message %q does not say %q", st.Message, want)
	}
}
