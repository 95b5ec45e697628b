package sessionsclient

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion/internal/agent"
	legionpb "github.com/legionbsd/legion/internal/proto"
	"github.com/legionbsd/legion/jail"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// open prefers the live container, falls back to the saved output only
// when the container is gone, and refuses names that are no plain names.
func TestOpenPicksTheSource(t *testing.T) {
	dir := t.TempDir()
	saved := filepath.Join(agent.SavedOutputDir(dir, "u1"), "app.log")
	if err := os.MkdirAll(filepath.Dir(saved), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(saved, []byte("saved\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var asked []string
	live := map[string]string{"u2-app": "live\n"}
	broken := errors.New("disk on fire")
	read := func(_ context.Context, id string, _ jail.LogOptions) (io.ReadCloser, error) {
		asked = append(asked, id)
		if id == "u3-app" {
			return nil, broken
		}
		if s, ok := live[id]; ok {
			return io.NopCloser(strings.NewReader(s)), nil
		}
		return nil, jail.ErrNotFound
	}
	c, err := New(Config{Managers: func() []string { return nil }, TLS: nil, Logs: read, DataDir: dir})
	if err == nil {
		t.Fatal("New without TLS: no error")
	}
	c = &Client{cfg: Config{Logs: read, DataDir: dir}}
	for _, tc := range []struct {
		uid, container string
		want           string
		code           codes.Code
	}{
		{"u1", "app", "saved\n", codes.OK},
		{"u2", "app", "live\n", codes.OK},
		{"u3", "app", "", codes.Internal},
		{"u4", "app", "", codes.NotFound},
		{"..", "app", "", codes.InvalidArgument},
		{"u1", "../../etc/passwd", "", codes.InvalidArgument},
	} {
		rc, err := c.open(context.Background(), &legionpb.SessionOffer{TaskUid: tc.uid, Container: tc.container, Namespace: "ns", Task: "t"}, &legionpb.LogsOffer{})
		if status.Code(err) != tc.code {
			t.Errorf("%s/%s: %v, want %v", tc.uid, tc.container, err, tc.code)
			continue
		}
		if err != nil {
			continue
		}
		data, _ := io.ReadAll(rc)
		rc.Close()
		if string(data) != tc.want {
			t.Errorf("%s/%s: read %q, want %q", tc.uid, tc.container, data, tc.want)
		}
	}
	if strings.Join(asked, " ") != "u1-app u2-app u3-app u4-app" {
		t.Errorf("the runtime was asked for %q, want the four plain ids only", asked)
	}
}

func TestRecordKeepsTextOfLinesThatAreNoRecords(t *testing.T) {
	r, ok := record("not a record\n", time.Time{})
	if !ok || r.Text != "not a record" || r.Stream != "stdout" {
		t.Errorf("record of a plain line: %v %v", r, ok)
	}
}
