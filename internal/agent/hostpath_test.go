package agent

import (
	"testing"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/image"
	"github.com/legionbsd/legion/jail"
)

// A hostPath volume is the node's own path, mounted by nullfs (a bind
// mount on the process platform) where the container asks, read-only when
// it says so; nothing is made for it under the task's directory.
func TestHostPathVolumeMountsTheNodesPath(t *testing.T) {
	t.Parallel()
	a := &Agent{RunDir: t.TempDir()}
	task := &legion.Task{Header: legion.Header{Kind: legion.KindTask, Metadata: legion.Metadata{Namespace: "shop", Name: "web-1-1", UID: "u1"}}}
	c := legion.Container{Name: "web", Image: "web:1", Command: []string{"/bin/web"}, VolumeMounts: []legion.VolumeMount{
		{Name: "conf", Path: "/etc/web/web.conf", ReadOnly: true}, {Name: "data", Path: "/data"}}}
	task.Spec.Pod = legion.PodSpec{Containers: []legion.Container{c}, Volumes: []legion.PodVolume{
		{Name: "conf", HostPath: &legion.HostPathVolume{Path: "/srv/web/web.conf"}},
		{Name: "data", HostPath: &legion.HostPathVolume{Path: "/srv/web/data"}}}}
	files, err := a.writeFiles(task, nil)
	if err != nil {
		t.Fatal(err)
	}
	spec, _, err := containerSpec(task, "n1", &c, &image.Config{}, t.TempDir(), files, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]jail.Mount{
		"/etc/web/web.conf": {Source: "/srv/web/web.conf", Target: "/etc/web/web.conf", ReadOnly: true, Kind: jail.MountNullfs},
		"/data":             {Source: "/srv/web/data", Target: "/data", Kind: jail.MountNullfs},
	}
	for _, m := range spec.Mounts {
		if w, ok := want[m.Target]; ok {
			if m != w {
				t.Errorf("mount at %s: %+v, want %+v", m.Target, m, w)
			}
			delete(want, m.Target)
		}
	}
	if len(want) != 0 {
		t.Errorf("mounts %+v lack %v", spec.Mounts, want)
	}
}
