package main

import (
	"strings"
	"testing"
)

func TestImageLoadListRemove(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out, err := runLegion(t, "", "image", "load", "--data-dir", dir, "../../examples/hello/hello.oci.tar")
	if err != nil || !strings.HasPrefix(out, "image/localhost/hello:1 loaded (") {
		t.Fatalf("load: %v\n%s", err, out)
	}
	out, err = runLegion(t, "", "image", "ls", "--data-dir", dir)
	if err != nil || !strings.Contains(out, "localhost/hello:1") || !strings.Contains(out, "loaded") {
		t.Fatalf("ls: %v\n%s", err, out)
	}
	if _, err := runLegion(t, "", "image", "rm", "--data-dir", dir, "localhost/nothing:1"); err == nil {
		t.Fatal("removing an image that is not there succeeded")
	}
	out, err = runLegion(t, "", "image", "rm", "--data-dir", dir, "localhost/hello:1")
	if err != nil || out != "image/localhost/hello:1 removed (1 layers freed)\n" {
		t.Fatalf("rm: %v\n%s", err, out)
	}
	out, _ = runLegion(t, "", "image", "ls", "--data-dir", dir)
	if strings.Contains(out, "localhost/hello:1") {
		t.Fatalf("the image is still listed:\n%s", out)
	}
	if _, err := runLegion(t, "", "image", "load", "--data-dir", dir, "../../examples/hello/hello.yaml"); err == nil {
		t.Fatal("loading a YAML file as an image succeeded")
	}
}
