package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/cluster/dispatcher/dispatchertest"
	"github.com/legionbsd/legion/cluster/pki"
	"github.com/legionbsd/legion/internal/grpcpings"
	pb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
)

// volumesServer is the Volumes service as a test scripts it.
type volumesServer struct {
	pb.UnimplementedVolumesServer
	backup  func(calls int, req *pb.VolumeBackupRequest, s grpc.ServerStreamingServer[pb.VolumeChunk]) error
	restore func(s grpc.ClientStreamingServer[pb.VolumeChunk, pb.VolumeRestoreResponse]) error

	mu    sync.Mutex
	calls int
}

func (v *volumesServer) Backup(req *pb.VolumeBackupRequest, s grpc.ServerStreamingServer[pb.VolumeChunk]) error {
	v.mu.Lock()
	v.calls++
	n := v.calls
	v.mu.Unlock()
	return v.backup(n, req, s)
}

func (v *volumesServer) Restore(s grpc.ClientStreamingServer[pb.VolumeChunk, pb.VolumeRestoreResponse]) error {
	v.mu.Lock()
	v.calls++
	v.mu.Unlock()
	return v.restore(s)
}

func (v *volumesServer) callCount() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.calls
}

// serveVolumes serves v with mutual TLS on loopback and returns an admin
// client to it that retries for retry.
func serveVolumes(t *testing.T, v *volumesServer, retry time.Duration) *client.Client {
	t.Helper()
	return serveScripted(t, func(g *grpc.Server) { pb.RegisterVolumesServer(g, v) }, retry)
}

// serveScripted serves the services register adds, with mutual TLS on
// loopback, and returns an admin client to them that retries for retry.
func serveScripted(t *testing.T, register func(*grpc.Server), retry time.Duration) *client.Client {
	t.Helper()
	return serveCounted(t, register, retry, nil)
}

// serveCounted is serveScripted with the server's pings counted by count
// (when not nil).
func serveCounted(t *testing.T, register func(*grpc.Server), retry time.Duration, count *grpcpings.Counter) *client.Client {
	t.Helper()
	ca := dispatchertest.NewCA(t)
	mgr, _ := dispatchertest.Issue(t, ca, "m1", pki.RoleManager)
	creds := credentials.NewTLS(mgr.ServerConfig())
	if count != nil {
		creds = count.Creds(creds)
	}
	g := grpc.NewServer(grpc.Creds(creds))
	register(g)
	lis := dispatchertest.Listen(t)
	served := make(chan error, 1)
	t.Cleanup(func() { g.Stop(); <-served })
	go func() { served <- g.Serve(lis) }()
	_, bundle := dispatchertest.Issue(t, ca, "admin", pki.RoleAdmin)
	file := filepath.Join(t.TempDir(), "admin.pem")
	if err := os.WriteFile(file, bundle, 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(client.Options{Server: lis.Addr().String(), CredentialsFile: file, Retry: retry})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func testHeader() legion.VolumeBackupHeader {
	return legion.VolumeBackupHeader{Format: legion.VolumeBackupFormat, Namespace: "shop", Name: "db",
		Labels: map[string]string{"app": "db"}, Spec: legion.VolumeSpec{Driver: legion.DriverZFS, Size: 10 << 30},
		Node: "w1", Backend: "zfs", Time: time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC), Consistency: "crash"}
}

func headerJSON(t *testing.T, h legion.VolumeBackupHeader) []byte {
	t.Helper()
	data, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// orderedWriter records the header and the data in the order they come.
type orderedWriter struct {
	events []string
	data   bytes.Buffer
	header legion.VolumeBackupHeader
}

func (w *orderedWriter) WriteBackupHeader(h legion.VolumeBackupHeader) error {
	w.events = append(w.events, "header")
	w.header = h
	return nil
}

func (w *orderedWriter) Write(p []byte) (int, error) {
	if len(w.events) == 0 || w.events[len(w.events)-1] != "data" {
		w.events = append(w.events, "data")
	}
	return w.data.Write(p)
}

// A backup hands back the header and writes exactly the stream's data;
// a writer that wants the header gets it before the first byte.
func TestBackupVolumeWritesHeaderThenData(t *testing.T) {
	t.Parallel()
	want := testHeader()
	parts := [][]byte{[]byte("first part "), bytes.Repeat([]byte{0, 1, 2, 255}, 100000), []byte(" last")}
	var asked []string
	v := &volumesServer{backup: func(_ int, req *pb.VolumeBackupRequest, s grpc.ServerStreamingServer[pb.VolumeChunk]) error {
		asked = append(asked, req.Namespace+"/"+req.Name)
		if err := s.Send(&pb.VolumeChunk{Header: headerJSON(t, want)}); err != nil {
			return err
		}
		for _, p := range parts {
			if err := s.Send(&pb.VolumeChunk{Data: p}); err != nil {
				return err
			}
		}
		return nil
	}}
	c := serveVolumes(t, v, -1)
	ctx := context.Background()

	var plain bytes.Buffer
	h, err := c.BackupVolume(ctx, "shop", "db", &plain)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, h); diff != "" {
		t.Errorf("header (-want +got):\n%s", diff)
	}
	if !bytes.Equal(plain.Bytes(), bytes.Join(parts, nil)) {
		t.Errorf("data: %d bytes, want the %d bytes sent", plain.Len(), len(bytes.Join(parts, nil)))
	}

	var ow orderedWriter
	if _, err := c.BackupVolume(ctx, "shop", "db", &ow); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"header", "data"}, ow.events); diff != "" {
		t.Errorf("what the header writer got, in order (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, ow.header); diff != "" || !bytes.Equal(ow.data.Bytes(), bytes.Join(parts, nil)) {
		t.Errorf("header writer: header diff %s, %d bytes of data", diff, ow.data.Len())
	}
	if diff := cmp.Diff([]string{"shop/db", "shop/db"}, asked); diff != "" {
		t.Errorf("volumes asked for (-want +got):\n%s", diff)
	}
}

// A restore sends the header alone first, with the format filled in, then
// every byte of the data, and returns the Volume the server made.
func TestRestoreVolumeSendsHeaderFirstThenData(t *testing.T) {
	t.Parallel()
	data := bytes.Repeat([]byte("0123456789abcdef"), 50000) // several messages' worth
	var (
		first    *pb.VolumeChunk
		received bytes.Buffer
		headers  int
	)
	v := &volumesServer{restore: func(s grpc.ClientStreamingServer[pb.VolumeChunk, pb.VolumeRestoreResponse]) error {
		for {
			m, err := s.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return err
			}
			if first == nil {
				first = m
				continue
			}
			if len(m.Header) > 0 {
				headers++
			}
			received.Write(m.Data)
		}
		var h legion.VolumeBackupHeader
		if err := json.Unmarshal(first.Header, &h); err != nil {
			return status.Error(codes.InvalidArgument, err.Error())
		}
		vol := &legion.Volume{Header: legion.Header{APIVersion: "legion/v1", Kind: legion.KindVolume,
			Metadata: legion.Metadata{Namespace: h.Namespace, Name: h.Name, Labels: h.Labels, Version: 7}},
			Spec: h.Spec, Status: legion.VolumeStatus{Node: h.Node, Backend: "zfs dataset tank/legion/volumes/" + h.Namespace + "/" + h.Name}}
		out, err := json.Marshal(vol)
		if err != nil {
			return err
		}
		return s.SendAndClose(&pb.VolumeRestoreResponse{Volume: out})
	}}
	c := serveVolumes(t, v, -1)
	h := testHeader()
	h.Format, h.Name, h.Node = "", "db2", "w2"
	vol, err := c.RestoreVolume(context.Background(), h, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if first == nil || len(first.Data) != 0 {
		t.Fatalf("first message %v: want the header alone", first)
	}
	var sent legion.VolumeBackupHeader
	if err := json.Unmarshal(first.Header, &sent); err != nil {
		t.Fatal(err)
	}
	wantSent := h
	wantSent.Format = legion.VolumeBackupFormat
	if diff := cmp.Diff(wantSent, sent); diff != "" {
		t.Errorf("header sent (-want +got):\n%s", diff)
	}
	if headers != 0 || !bytes.Equal(received.Bytes(), data) {
		t.Errorf("after the header: %d more headers, %d bytes of data; want none and the %d bytes read", headers, received.Len(), len(data))
	}
	if vol.Metadata.Name != "db2" || vol.Status.Node != "w2" || vol.Metadata.Labels["app"] != "db" || vol.Metadata.Version != 7 {
		t.Errorf("volume made: %+v", vol)
	}
}

// The server's refusals reach the caller with its message and code.
func TestVolumeCallsSurfaceTheServersError(t *testing.T) {
	t.Parallel()
	v := &volumesServer{
		backup: func(_ int, req *pb.VolumeBackupRequest, _ grpc.ServerStreamingServer[pb.VolumeChunk]) error {
			return status.Errorf(codes.FailedPrecondition, "volume %s/%s: only zfs Volumes are backed up here", req.Namespace, req.Name)
		},
		restore: func(s grpc.ClientStreamingServer[pb.VolumeChunk, pb.VolumeRestoreResponse]) error {
			if _, err := s.Recv(); err != nil {
				return err
			}
			// Refused on the header while the client is still sending.
			return status.Error(codes.AlreadyExists, "volume shop/db exists: a restore never overwrites a Volume")
		},
	}
	c := serveVolumes(t, v, -1)
	ctx := context.Background()
	var buf bytes.Buffer
	_, err := c.BackupVolume(ctx, "shop", "logs", &buf)
	if client.Code(err) != codes.FailedPrecondition || err.Error() != "volume shop/logs: only zfs Volumes are backed up here" {
		t.Errorf("backup: %v (%s)", err, client.Code(err))
	}
	h := testHeader()
	_, err = c.RestoreVolume(ctx, h, io.LimitReader(zeros{}, 64<<20))
	if !errors.Is(err, client.ErrExists) || err.Error() != "volume shop/db exists: a restore never overwrites a Volume" {
		t.Errorf("restore: %v (%s)", err, client.Code(err))
	}
	h.Node = ""
	if _, err := c.RestoreVolume(ctx, h, strings.NewReader("x")); err == nil || !strings.Contains(err.Error(), "header node") {
		t.Errorf("restore without a node: %v", err)
	}
	h = testHeader()
	h.Format = "legion-volume-backup/9"
	if _, err := c.RestoreVolume(ctx, h, strings.NewReader("x")); err == nil || !strings.Contains(err.Error(), `expected "legion-volume-backup/1"`) {
		t.Errorf("restore of another format: %v", err)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// A backup is asked again while no manager answers before the first
// byte; once data came, a break is the caller's to handle.
func TestBackupVolumeRetriesOnlyBeforeTheFirstByte(t *testing.T) {
	t.Parallel()
	h := testHeader()
	v := &volumesServer{backup: func(n int, _ *pb.VolumeBackupRequest, s grpc.ServerStreamingServer[pb.VolumeChunk]) error {
		if n == 1 {
			return status.Error(codes.Unavailable, "no leader")
		}
		if err := s.Send(&pb.VolumeChunk{Header: headerJSON(t, h)}); err != nil {
			return err
		}
		if n == 3 {
			if err := s.Send(&pb.VolumeChunk{Data: []byte("part")}); err != nil {
				return err
			}
			return status.Error(codes.Unavailable, "the node went away")
		}
		return s.Send(&pb.VolumeChunk{Data: []byte("whole")})
	}}
	c := serveVolumes(t, v, 10*time.Second)
	var buf bytes.Buffer
	if _, err := c.BackupVolume(context.Background(), "shop", "db", &buf); err != nil || buf.String() != "whole" {
		t.Fatalf("after one UNAVAILABLE: %q, %v", buf.String(), err)
	}
	if n := v.callCount(); n != 2 {
		t.Fatalf("%d calls, want 2 (one refused, one whole)", n)
	}
	buf.Reset()
	_, err := c.BackupVolume(context.Background(), "shop", "db", &buf)
	if client.Code(err) != codes.Unavailable || buf.String() != "part" || v.callCount() != 3 {
		t.Fatalf("a break after data: %v, %q, %d calls; want UNAVAILABLE, the part and no retry", err, buf.String(), v.callCount())
	}
}

// A stream that does not start with a header is not taken as a backup.
func TestBackupVolumeRefusesAStreamWithoutHeader(t *testing.T) {
	t.Parallel()
	v := &volumesServer{backup: func(_ int, _ *pb.VolumeBackupRequest, s grpc.ServerStreamingServer[pb.VolumeChunk]) error {
		return s.Send(&pb.VolumeChunk{Data: []byte("data first")})
	}}
	c := serveVolumes(t, v, -1)
	var buf bytes.Buffer
	_, err := c.BackupVolume(context.Background(), "shop", "db", &buf)
	if err == nil || !strings.Contains(err.Error(), "first message has no header") || buf.Len() != 0 {
		t.Fatalf("%v, %d bytes written", err, buf.Len())
	}
}
