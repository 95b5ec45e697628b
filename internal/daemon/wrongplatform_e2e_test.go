package daemon

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/internal/testimage"
)

// otherArch is an architecture no test host is.
func otherArch() string {
	if runtime.GOARCH == "s390x" {
		return "riscv64"
	}
	return "s390x"
}

// A registry's image whose index offers only another platform: the agent
// rejects the task naming the node's platform (wrongPlatform), and the
// planner then keeps the service's next task off that platform, saying
// why, rather than failing it on the node again and again.
func TestImageForAnotherPlatformIsRejectedAndNotPlacedAgain(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	reg := testimage.NewRegistry(t)
	arch := otherArch()
	img, err := testimage.Pack([]byte("#!/bin/sh\n"), testimage.Options{GOOS: "freebsd", GOARCH: arch})
	if err != nil {
		t.Fatal(err)
	}
	idx := mutate.AppendManifests(empty.Index, mutate.IndexAddendum{Add: img,
		Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "freebsd", Architecture: arch}}})
	ref := reg.Ref("other/server", "1")
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(r, idx, remote.WithContext(ctx)); err != nil {
		t.Fatal(err)
	}

	n := startNode(t)
	n.apply(t, `apiVersion: legion/v1
kind: Service
metadata: {name: elsewhere}
spec:
  replicas: 1
  pod:
    containers:
      - name: main
        image: `+ref+`
`)
	var rejected *legion.Task
	poll(t, "the task rejected for its platform", 30*time.Second, func() bool {
		for _, tk := range n.tasksOf(t, "legion.service", "elsewhere") {
			if tk.Status.State == legion.TaskRejected {
				rejected = tk
				return true
			}
		}
		return false
	})
	if wp := rejected.Status.WrongPlatform; wp == nil || *wp != n.platform {
		t.Fatalf("wrongPlatform %+v, want the node's %+v", wp, n.platform)
	}
	if msg := rejected.Status.Message; !strings.Contains(msg, "freebsd/"+arch) || !strings.Contains(msg, "this node runs") {
		t.Errorf("message %q should say what the image offers and what the node runs", msg)
	}
	want := "has no image for its platform " + n.platform.OS + "/" + n.platform.Arch
	poll(t, "the next task held off the node", 30*time.Second, func() bool {
		for _, tk := range n.tasksOf(t, "legion.service", "elsewhere") {
			if tk.Metadata.UID != rejected.Metadata.UID && tk.Spec.Node == "" && strings.Contains(tk.Status.Message, want) {
				return true
			}
		}
		return false
	})
	for _, tk := range n.tasksOf(t, "legion.service", "elsewhere") {
		if tk.Metadata.UID != rejected.Metadata.UID && tk.Spec.Node != "" {
			t.Errorf("task %s placed on %s after the rejection (%s %q)", tk.Metadata.Name, tk.Spec.Node, tk.Status.State, tk.Status.Message)
		}
	}
}
