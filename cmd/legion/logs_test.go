package main

import (
	"bytes"
	"context"
	"io"

	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/cluster/dispatcher/dispatchertest"
	"github.com/legionbsd/legion/cluster/sessions/sessionstest"
	"github.com/legionbsd/legion/cluster/store"
	"github.com/legionbsd/legion/internal/golden"
	"github.com/legionbsd/legion/jail"
	"github.com/spf13/cobra"
	"go.uber.org/goleak"
)

var logsT0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func logRec(sec int, stream, text string, partial bool) jail.LogRecord {
	return jail.LogRecord{Time: logsT0.Add(time.Duration(sec) * time.Second), Stream: stream, Text: text, Partial: partial}
}

// rootWith is the CLI writing to out and errOut, set to run args.
func rootWith(out, errOut io.Writer, args ...string) *cobra.Command {
	root := newRootCommand()
	root.SetOut(out)
	root.SetErr(errOut)
	root.SetArgs(args)
	return root
}

// runLogs runs legion logs against m with separate stdout and stderr.
func runLogs(ctx context.Context, m *sessionstest.Manager, stdout, stderr *syncBuffer, args ...string) error {
	root := rootWith(stdout, stderr, append(append([]string{"logs"}, args...), "--server", m.Addr, "--credentials", m.AdminFile)...)
	return root.ExecuteContext(ctx)
}

func TestLogsCommand(t *testing.T) {
	// Registered first, so it runs after the servers' cleanups.
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, before) })
	m := sessionstest.Start(t)
	a := m.StartAgent(t, "n1")
	m.Put(t, "shop", "away.1", "n2", legion.TaskRunning, legion.Owner{}, "app")
	m.Put(t, "shop", "pair.1", "n1", legion.TaskRunning, legion.Owner{}, "app", "sidecar")
	done := m.Put(t, "shop", "batch.1", "n1", legion.TaskComplete, legion.Owner{}, "app")
	var saved string
	for _, r := range []jail.LogRecord{logRec(1, "stdout", "hello", false), logRec(2, "stderr", "warning: ", true),
		logRec(2, "stderr", "disk low", false), logRec(3, "stdout", "done", false)} {
		saved += jail.FormatRecord(r)
	}
	a.SaveOutput(t, done, "app", saved)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	t.Run("finished task", func(t *testing.T) {
		var out, errOut syncBuffer
		if err := runLogs(ctx, m, &out, &errOut, "-n", "shop", "batch.1"); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff("hello\ndone\n", out.String()); diff != "" {
			t.Errorf("stdout (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff("warning: disk low\n", errOut.String()); diff != "" {
			t.Errorf("stderr (-want +got):\n%s", diff)
		}
	})

	t.Run("timestamps", func(t *testing.T) {
		var out syncBuffer
		if err := runLogs(ctx, m, &out, &out, "-n", "shop", "--timestamps", "task/batch.1"); err != nil {
			t.Fatal(err)
		}
		golden.Check(t, filepath.Join("testdata", "logs_timestamps.golden"), out.String())
	})

	t.Run("since-time", func(t *testing.T) {
		var out, errOut syncBuffer
		at := logsT0.Add(3 * time.Second).Format(time.RFC3339Nano)
		if err := runLogs(ctx, m, &out, &errOut, "-n", "shop", "--since-time", at, "batch.1"); err != nil {
			t.Fatal(err)
		}
		if out.String() != "done\n" || errOut.String() != "" {
			t.Errorf("--since-time %s: stdout %q, stderr %q; want the last line alone", at, out.String(), errOut.String())
		}
	})

	t.Run("errors", func(t *testing.T) {
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"-n", "shop", "pair.1"}, "logs pair.1: task pair.1 has 2 containers (app, sidecar): choose one with -c"},
			{[]string{"-n", "shop", "nope"}, "logs nope: no task, service, job or stateful ordinal named nope in namespace shop"},
			{[]string{"-n", "shop", "away.1"}, "logs away.1: the agent of node n2 is not connected to this manager"},
			{[]string{"-n", "shop", "volume/x"}, `volume/x: expected a task, a service or a job (NAME, task/NAME, service/NAME or job/NAME), not a volume`},
			{[]string{"-n", "shop", "deploy/web"}, `not a deploy; a Deployment is a Service here: service/web`},
			{[]string{"-n", "shop", "pod/web-1-1"}, `not a pod; a pod is a task's, which Legion makes from a Service or Job: task/web-1-1`},
			{[]string{"-n", "shop", "--since", "-1m", "batch.1"}, "--since -1m0s: expected a positive duration"},
			{[]string{"-n", "shop", "--since-time", "yesterday", "batch.1"}, `--since-time "yesterday": expected a time as RFC 3339 writes it`},
			{[]string{"-n", "shop", "--since-time", "2026-12-05T10:00:00Z", "--since", "1m", "batch.1"}, "--since and --since-time: give one"},
			{[]string{"-n", "shop", "-p", "batch.1"}, "logs --previous: a task's output already holds every run of its containers"},
			{[]string{"-n", "shop", "-l", "app=web", "web"}, "logs -l app=web reads what its labels select: give no name with it (web)"},
			{[]string{"-n", "shop", "-l", "app in (web"}, "logs -l app in (web: unable to parse requirement"},
		} {
			var out syncBuffer
			err := runLogs(ctx, m, &out, &out, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("legion logs %s: %v, want an error containing %q", strings.Join(tc.args, " "), err, tc.want)
			}
		}
	})

	t.Run("follow a service's running task", func(t *testing.T) {
		if _, _, err := m.Store.Put(ctx, &legion.Service{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindService,
			Metadata: legion.Metadata{Name: "web", Namespace: "shop"}}}, storeWrite()); err != nil {
			t.Fatal(err)
		}
		svc := legion.Owner{Kind: legion.KindService, Name: "web"}
		m.Put(t, "shop", "web.1-old", "n1", legion.TaskShutdown, svc, "app")
		run := m.Put(t, "shop", "web.1-new", "n1", legion.TaskRunning, svc, "app")
		id := run.Metadata.UID + "-app"
		a.Logs.Append(id, logRec(10, "stdout", "listening", false))
		fctx, stop := context.WithCancel(ctx)
		defer stop()
		var out, errOut syncBuffer
		ended := make(chan error, 1)
		go func() { ended <- runLogs(fctx, m, &out, &errOut, "-n", "shop", "-f", "web") }()
		dispatchertest.Poll(t, "the first line", 10*time.Second, func() bool { return out.String() == "listening\n" })
		a.Logs.Append(id, logRec(11, "stdout", "GET /", false), logRec(12, "stderr", "slow", false))
		dispatchertest.Poll(t, "the new lines", 10*time.Second, func() bool {
			return out.String() == "listening\nGET /\n" && errOut.String() == "slow\n"
		})
		stop()
		if err := <-ended; err != nil {
			t.Errorf("a follow ended by the user: %v, want no error", err)
		}
		dispatchertest.Poll(t, "the agent's reader closed", 10*time.Second, func() bool { return a.Logs.Readers() == 0 })
		a.Logs.Wait()
	})
}

func TestPrintLogsPartialLines(t *testing.T) {
	t.Parallel()
	recs := func(rs ...jail.LogRecord) client.LogFrame {
		f := client.LogFrame{}
		for _, r := range rs {
			f.Records = append(f.Records, client.LogRecord{Time: r.Time, Stream: r.Stream, Partial: r.Partial, Text: r.Text})
		}
		return f
	}
	frames := []client.LogFrame{
		{Task: "t", Container: "c"},
		recs(logRec(1, "stdout", "a long ", true), logRec(1, "stderr", "err", false)),
		recs(logRec(2, "stdout", "line", false), logRec(3, "stdout", "", false)),
	}
	var out, errOut bytes.Buffer
	p := logPrinter{stdout: &out, stderr: &errOut, timestamps: true}
	for _, f := range frames {
		if err := p.print(f); err != nil {
			t.Fatal(err)
		}
	}
	want := "2026-11-30T12:00:01Z a long line\n2026-11-30T12:00:03Z \n"
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("stdout (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff("2026-11-30T12:00:01Z err\n", errOut.String()); diff != "" {
		t.Errorf("stderr (-want +got):\n%s", diff)
	}
}

func storeWrite() store.WriteOptions { return store.WriteOptions{} }

// An owner's logs leave out the tasks told to stop, not those that ended
// by themselves before or after a replacement said so.
func TestLogsLeaveOutOnlyTasksToldToStop(t *testing.T) {
	for _, tc := range []struct {
		desired, state legion.TaskState
		left           bool
	}{
		{legion.TaskRunning, legion.TaskRunning, false},
		{legion.TaskRunning, legion.TaskFailed, false},    // waiting for its replacement
		{legion.TaskShutdown, legion.TaskFailed, false},   // replaced after it failed
		{legion.TaskShutdown, legion.TaskRejected, false}, // likewise
		{legion.TaskComplete, legion.TaskComplete, false}, // a Job's
		{legion.TaskShutdown, legion.TaskComplete, false}, // a Service's, restarted
		{legion.TaskShutdown, legion.TaskRunning, true},   // being stopped
		{legion.TaskShutdown, legion.TaskShutdown, true},  // an update's old task
		{legion.TaskShutdown, legion.TaskOrphaned, true},  // its node went down
	} {
		tk := &legion.Task{Spec: legion.TaskSpec{DesiredState: tc.desired}, Status: legion.TaskStatus{State: tc.state}}
		if got := toldToStop(tk); got != tc.left {
			t.Errorf("desired %s, state %s: left out %v, want %v", tc.desired, tc.state, got, tc.left)
		}
	}
}

// A task of a followed service whose first read finds no output is read
// again once it starts, whichever comes first: the watch seeing its start
// or that read's answer. When the start comes first, the watch's read is
// turned away (the first read still holds the task), so the first read,
// on its answer, must read again itself.
func TestLogsReadATaskAgainWhateverTheOrder(t *testing.T) {
	t.Parallel()
	const key, name = "web-1-a/", "web-1-a"

	// The answer first: the task is released, and its start reads it.
	var r logReaders
	if !r.claim(key) {
		t.Fatal("a first claim was turned away")
	}
	if again := r.noOutput(key, name); again {
		t.Error("no start seen, yet the first read reads again")
	}
	r.sawStart(name)
	if !r.claim(key) {
		t.Error("the start seen after the answer cannot read the task")
	}

	// The start first: its read is turned away, so the answer reads again.
	var s logReaders
	s.claim(key)
	s.sawStart(name)
	if s.claim(key) {
		t.Fatal("the watch read a task whose first read is under way")
	}
	if again := s.noOutput(key, name); !again {
		t.Error("the start came while the first read was answered, and nothing reads the task again")
	}
	if s.claim(key) {
		t.Error("the task is released while its read again is under way")
	}
	if s.empty != 0 || len(s.started) != 1 {
		t.Errorf("a task read again counts as one with no output (%d), or is not being read (%v)", s.empty, s.started)
	}
}
