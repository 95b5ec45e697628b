package agent

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/jail"
)

// filesTask mounts a Secret and a Config as files and takes one of each
// into its environment.
func filesTask() *legion.Task {
	task := testTask("t1")
	c := &task.Spec.Pod.Containers[0]
	c.Secrets = []legion.FileRef{{Name: "db", Target: "/run/secrets/db", Mode: 0o400}}
	c.Configs = []legion.FileRef{{Name: "app", Target: "/etc/app.conf", Mode: 0o444}}
	c.Env = []legion.EnvVar{{Name: "TOKEN", Secret: "token"}, {Name: "MODE", Config: "mode"}, {Name: "PLAIN", Value: "x-$(TOKEN)"}}
	return task
}

func filesValues() map[string][]byte {
	return map[string][]byte{
		ValueKey(legion.KindSecret, "default", "db"):    []byte("hunter2"),
		ValueKey(legion.KindSecret, "default", "token"): []byte("s3cret"),
		ValueKey(legion.KindConfig, "default", "app"):   []byte("listen 8080\n"),
		ValueKey(legion.KindConfig, "default", "mode"):  []byte("fast"),
	}
}

// The Secrets and Configs delivered with the assignments are written into
// the task's private directory and mounted read-only where the container
// asks; those taken into the environment go in an environment file, off
// the runtime's records.
func TestAgentWritesSecretsAndConfigs(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.start(t)
	r.assign(filesValues(), filesTask())
	r.mgr.await(t, "web-t1", "the task running", isState(legion.TaskRunning, ""))

	dir := r.agent.taskDir("t1")
	for _, f := range []struct {
		path, text string
		mode       os.FileMode
	}{{filepath.Join(dir, "secrets", "db"), "hunter2", 0o400}, {filepath.Join(dir, "configs", "app"), "listen 8080\n", 0o444}} {
		b, err := os.ReadFile(f.path)
		if err != nil || string(b) != f.text {
			t.Errorf("%s: %q, %v; want %q", f.path, b, err, f.text)
			continue
		}
		if fi, err := os.Stat(f.path); err != nil || fi.Mode().Perm() != f.mode {
			t.Errorf("%s: mode %v, %v; want %v", f.path, fi.Mode().Perm(), err, f.mode)
		}
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("task directory %s: %v, %v; want private (0700)", dir, fi.Mode().Perm(), err)
	}

	i := slices.IndexFunc(r.rt.created(), func(s jail.ContainerSpec) bool { return s.ID == "t1-main" })
	if i < 0 {
		t.Fatalf("main not created: %q", r.rt.createdIDs())
	}
	spec := r.rt.created()[i]
	for _, want := range []jail.Mount{
		{Source: filepath.Join(dir, "secrets", "db"), Target: "/run/secrets/db", ReadOnly: true, Kind: jail.MountNullfs},
		{Source: filepath.Join(dir, "configs", "app"), Target: "/etc/app.conf", ReadOnly: true, Kind: jail.MountNullfs},
	} {
		if !slices.Contains(spec.Mounts, want) {
			t.Errorf("mounts %+v lack %+v", spec.Mounts, want)
		}
	}
	if !slices.Contains(spec.Env, "PLAIN=x-s3cret") {
		t.Errorf("env %q: PLAIN should expand the secret's value", spec.Env)
	}
	for _, kv := range spec.Env {
		if strings.HasPrefix(kv, "TOKEN=") || strings.HasPrefix(kv, "MODE=") {
			t.Errorf("a Secret's or Config's value in the runtime's spec: %q", kv)
		}
	}
	if spec.EnvFile == "" || !strings.HasPrefix(spec.EnvFile, dir+string(filepath.Separator)) {
		t.Fatalf("env file %q, want one in the task's directory %s", spec.EnvFile, dir)
	}
	b, err := os.ReadFile(spec.EnvFile)
	if err != nil {
		t.Fatal(err)
	}
	var env []string
	if err := json.Unmarshal(b, &env); err != nil || !slices.Equal(env, []string{"TOKEN=s3cret", "MODE=fast"}) {
		t.Errorf("env file: %q, %v; want TOKEN and MODE", env, err)
	}
	if fi, err := os.Stat(spec.EnvFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("env file mode: %v, %v", fi.Mode().Perm(), err)
	}
}

// A Secret or Config the task needs but the assignments did not bring
// fails the task with a message naming it, and leaves no files behind.
func TestAgentFailsTaskMissingValue(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		missing legion.Kind
		name    string
		msg     string
	}{
		{legion.KindSecret, "db", "container main: Secret default/db not delivered to this node"},
		{legion.KindConfig, "app", "container main: Config default/app not delivered to this node"},
		{legion.KindSecret, "token", "container main: env TOKEN: secret default/token not delivered to this node"},
		{legion.KindConfig, "mode", "container main: env MODE: config default/mode not delivered to this node"},
	} {
		t.Run(string(tc.missing)+"/"+tc.name, func(t *testing.T) {
			t.Parallel()
			r := newRig(t)
			values := filesValues()
			delete(values, ValueKey(tc.missing, "default", tc.name))
			r.start(t)
			r.assign(values, filesTask())
			st := r.mgr.await(t, "web-t1", "the task failed", func(s legion.TaskStatus) bool { return s.State.Terminal() })
			if st.State != legion.TaskFailed || st.Message != tc.msg {
				t.Errorf("ended %s %q, want failed %q", st.State, st.Message, tc.msg)
			}
			if r.rt.startCount("t1-main") != 0 {
				t.Error("the container started without its value")
			}
			awaitGone(t, r, "t1")
		})
	}
}
