package sessions_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/dispatcher/dispatchertest"
	"github.com/legionbsd/legion/cluster/pki"
	"github.com/legionbsd/legion/cluster/sessions"
	"github.com/legionbsd/legion/cluster/sessions/sessionstest"
	"github.com/legionbsd/legion/cluster/store"
	legionpb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
)

func volumesClient(t *testing.T, m *sessionstest.Manager, creds *pki.Credentials) legionpb.VolumesClient {
	t.Helper()
	c, err := grpc.NewClient(m.Addr, grpc.WithTransportCredentials(credentials.NewTLS(creds.ClientConfig())))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return legionpb.NewVolumesClient(c)
}

// putVolume stores a zfs Volume with its status as written by the
// cluster.
func putVolume(t *testing.T, m *sessionstest.Manager, name string, labels map[string]string, st legion.VolumeStatus) *legion.Volume {
	t.Helper()
	o, _ := legion.New(legion.KindVolume)
	v := o.(*legion.Volume)
	v.Metadata.Namespace, v.Metadata.Name, v.Metadata.Labels = "shop", name, labels
	v.Spec = legion.VolumeSpec{Driver: legion.DriverZFS, Size: 10 << 30}
	v.Status = st
	got, _, err := m.Store.Put(context.Background(), v, store.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return got.(*legion.Volume)
}

func putNode(t *testing.T, m *sessionstest.Manager, name string) {
	t.Helper()
	o, _ := legion.New(legion.KindNode)
	o.GetMetadata().Name = name
	if _, _, err := m.Store.Put(context.Background(), o, store.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// backup reads a whole Backup stream: the chunks' headers and data.
func backup(t *testing.T, c legionpb.VolumesClient, name string) (headers [][]byte, data []byte, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := c.Backup(ctx, &legionpb.VolumeBackupRequest{Namespace: "shop", Name: name})
	if err != nil {
		return nil, nil, err
	}
	for {
		m, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return headers, data, nil
		}
		if err != nil {
			return headers, data, err
		}
		if len(m.Header) > 0 {
			if len(data) > 0 {
				t.Error("a header after data")
			}
			headers = append(headers, m.Header)
		}
		data = append(data, m.Data...)
	}
}

// A backup sends its header first, then the node's data of a snapshot
// taken for it and dropped after.
func TestBackupSendsHeaderThenData(t *testing.T) {
	t.Parallel()
	m := sessionstest.Start(t)
	n1 := m.StartAgent(t, "n1")
	data := randomBytes(t, 3*mib+5)
	n1.Volumes.Put("shop", "db", data)
	v := putVolume(t, m, "db", map[string]string{"app": "db", "ordinal": "0"}, legion.VolumeStatus{Node: "n1", Backend: "directory /var/db/legion/volumes/shop/db"})
	before := time.Now()
	headers, got, err := backup(t, volumesClient(t, m, m.Admin), "db")
	if err != nil {
		t.Fatal(err)
	}
	if len(headers) != 1 {
		t.Fatalf("%d headers, want one before the data", len(headers))
	}
	var h legion.VolumeBackupHeader
	if err := json.Unmarshal(headers[0], &h); err != nil {
		t.Fatal(err)
	}
	if h.Time.Before(before) || h.Time.After(time.Now()) {
		t.Errorf("header time %s, want the backup's", h.Time)
	}
	h.Time = time.Time{}
	want := legion.VolumeBackupHeader{Format: legion.VolumeBackupFormat, Namespace: "shop", Name: "db", Labels: v.Metadata.Labels,
		Spec: v.Spec, Node: "n1", Backend: "dir", Consistency: legion.ConsistencyFiles}
	if diff := cmp.Diff(want, h); diff != "" {
		t.Errorf("header (-want +got):\n%s", diff)
	}
	if !bytes.Equal(got, data) {
		t.Errorf("the backup's data: %d bytes (sum %08x), want %d (sum %08x)", len(got), sessionstest.Sum(got), len(data), sessionstest.Sum(data))
	}
	sends := n1.Volumes.Sends()
	if len(sends) != 1 || !strings.HasPrefix(sends[0].Snapshot, "legion-backup-") || !sends[0].DropSnapshot || sends[0].VolumeUid != v.Metadata.UID || sends[0].From != "" {
		t.Errorf("send offers %v, want one full send of its own dropped legion-backup- snapshot", sends)
	}
}

// A backup needs edit on Volumes, and a zfs Volume held by a node and
// not moving.
func TestBackupRefusals(t *testing.T) {
	t.Parallel()
	m := sessionstest.Start(t)
	n1 := m.StartAgent(t, "n1")
	n1.Volumes.Put("shop", "db", []byte("data"))
	putVolume(t, m, "db", nil, legion.VolumeStatus{Node: "n1", Backend: "zfs dataset tank/legion/volumes/shop/db"})
	putVolume(t, m, "free", nil, legion.VolumeStatus{})
	putVolume(t, m, "moving", nil, legion.VolumeStatus{Node: "n1", Backend: "zfs dataset tank/x",
		Migration: &legion.VolumeMigration{State: legion.MigrationCopying, From: "n1", To: "n2"}})
	b, _ := legion.New(legion.KindRoleBinding)
	b.GetMetadata().Name, b.GetMetadata().Namespace = "carol", "shop"
	b.(*legion.RoleBinding).Spec = legion.RoleBindingSpec{User: "carol", Role: legion.RoleView}
	if _, _, err := m.Store.Put(context.Background(), b, store.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	carol, _ := dispatchertest.Issue(t, m.CA, "carol", pki.RoleUser)
	admin := volumesClient(t, m, m.Admin)
	for _, tc := range []struct {
		name   string
		client legionpb.VolumesClient
		volume string
		code   codes.Code
		says   string
	}{
		{"free", admin, "free", codes.FailedPrecondition, "volume shop/free is free"},
		{"moving", admin, "moving", codes.FailedPrecondition, "volume shop/moving is moving from node n1 to node n2"},
		{"missing", admin, "nope", codes.NotFound, "no volume named nope"},
		{"view only", volumesClient(t, m, carol), "db", codes.PermissionDenied, "user carol is view in namespace shop; to use volume backup it needs edit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			headers, data, err := backup(t, tc.client, tc.volume)
			if status.Code(err) != tc.code || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("backup: %v, want %s saying %q", err, tc.code, tc.says)
			}
			if len(headers) != 0 || len(data) != 0 {
				t.Errorf("a refused backup sent %d headers and %d bytes", len(headers), len(data))
			}
		})
	}
	if calls := n1.Volumes.Calls(); len(calls) != 0 {
		t.Errorf("the node was asked %v", calls)
	}
}

func restoreHeader(name, node string) legion.VolumeBackupHeader {
	return legion.VolumeBackupHeader{Format: legion.VolumeBackupFormat, Namespace: "shop", Name: name, Labels: map[string]string{"app": "db"},
		Spec: legion.VolumeSpec{Driver: legion.DriverZFS, Size: 1 << 30, Node: "n1"}, Node: node, Backend: "dir", Consistency: legion.ConsistencyFiles, Time: t0}
}

// restore sends a header and data in chunks of 100 KiB.
func restore(t *testing.T, c legionpb.VolumesClient, h any, data []byte) (*legion.Volume, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := c.Restore(ctx)
	if err != nil {
		return nil, err
	}
	hdr, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	chunks := []*legionpb.VolumeChunk{{Header: hdr}}
	for len(data) > 0 {
		n := min(len(data), 100<<10)
		chunks = append(chunks, &legionpb.VolumeChunk{Data: data[:n]})
		data = data[n:]
	}
	for _, ch := range chunks {
		if err := st.Send(ch); err != nil {
			break // the answer says why
		}
	}
	resp, err := st.CloseAndRecv()
	if err != nil {
		return nil, err
	}
	var v legion.Volume
	if err := json.Unmarshal(resp.Volume, &v); err != nil {
		t.Fatal(err)
	}
	return &v, nil
}

// A restore has the named node keep the data, then makes the Volume
// bound there with the backup's labels and spec.
func TestRestoreMakesTheVolumeOnItsNode(t *testing.T) {
	t.Parallel()
	m := sessionstest.Start(t)
	m.StartAgent(t, "n1")
	n2 := m.StartAgent(t, "n2")
	putNode(t, m, "n2")
	data := randomBytes(t, 2*mib+7)
	made, err := restore(t, volumesClient(t, m, m.Admin), restoreHeader("db2", "n2"), data)
	if err != nil {
		t.Fatal(err)
	}
	size, sum, ok := n2.Volumes.Get("shop", "db2")
	if !ok || size != int64(len(data)) || sum != sessionstest.Sum(data) {
		t.Fatalf("n2 holds %d bytes (sum %08x, held %v), want %d (sum %08x)", size, sum, ok, len(data), sessionstest.Sum(data))
	}
	o, _, err := m.Store.Get(legion.KindVolume, "shop", "db2")
	if err != nil {
		t.Fatal(err)
	}
	v := o.(*legion.Volume)
	if v.Status.Node != "n2" || v.Status.Backend != "directory" || v.Metadata.Labels["app"] != "db" || v.Spec.Size != 1<<30 || v.Metadata.UID != made.Metadata.UID {
		t.Errorf("the Volume made: labels %v, spec %+v, status %+v", v.Metadata.Labels, v.Spec, v.Status)
	}
	// The backup's spec.node named where it was taken: kept, the data
	// would be moved straight back there.
	if v.Spec.Node != "" || !strings.Contains(v.Status.Message, "spec.node (n1) was cleared") {
		t.Errorf("spec.node %q, message %q: want it cleared and said", v.Spec.Node, v.Status.Message)
	}
}

// A restore never overwrites: a Volume of the name is refused before any
// data goes, the node's refusal of a name it holds data of surfaces, and
// a bad header is refused naming its field.
func TestRestoreRefusals(t *testing.T) {
	t.Parallel()
	m := sessionstest.Start(t)
	n2 := m.StartAgent(t, "n2")
	putNode(t, m, "n2")
	putVolume(t, m, "db", nil, legion.VolumeStatus{Node: "n2", Backend: "directory /x"})
	n2.Volumes.Put("shop", "stale", []byte("old data"))
	admin := volumesClient(t, m, m.Admin)
	badFormat := restoreHeader("x", "n2")
	badFormat.Format = "tar"
	noNode := restoreHeader("x", "")
	for _, tc := range []struct {
		name   string
		header any
		code   codes.Code
		says   string
		asked  bool // whether the node was asked
	}{
		{"name exists", restoreHeader("db", "n2"), codes.AlreadyExists, "volume shop/db exists", false},
		{"node holds data of it", restoreHeader("stale", "n2"), codes.AlreadyExists, "this node has data of volume shop/stale", true},
		{"format", badFormat, codes.InvalidArgument, `header.format "tar"`, false},
		{"no node", noNode, codes.InvalidArgument, "header.node: missing", false},
		{"unknown node", restoreHeader("x", "n7"), codes.NotFound, "no node n7", false},
		{"unknown field", map[string]any{"format": legion.VolumeBackupFormat, "nmae": "x"}, codes.InvalidArgument, `unknown field "nmae"`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(n2.Volumes.Calls())
			_, err := restore(t, admin, tc.header, []byte("new data"))
			if status.Code(err) != tc.code || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("restore: %v, want %s saying %q", err, tc.code, tc.says)
			}
			if asked := len(n2.Volumes.Calls()) > before; asked != tc.asked {
				t.Errorf("node asked: %v, want %v", asked, tc.asked)
			}
		})
	}
	if _, _, err := m.Store.Get(legion.KindVolume, "shop", "stale"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a Volume was made for a refused restore: %v", err)
	}
	if size, _, _ := n2.Volumes.Get("shop", "stale"); size != int64(len("old data")) {
		t.Errorf("the node's own data of stale: %d bytes", size)
	}
}

// A restore's Volume is admitted as its apply would be: refused before
// any data goes to the node, or, refused only as it is made (a quota
// taken meanwhile), with the error saying the data is on the node.
func TestRestoreIsAdmittedAsAnApply(t *testing.T) {
	t.Parallel()
	var refuseEarly, refuseMaking, madeMeanwhile atomic.Bool
	var m *sessionstest.Manager
	m = sessionstest.Start(t, func(o *sessions.Options) {
		o.AdmitVolume = func(ctx context.Context, v *legion.Volume, write func() error) error {
			if (write == nil && refuseEarly.Load()) || (write != nil && refuseMaking.Load()) {
				return status.Errorf(codes.ResourceExhausted, "over the quota of namespace %s: volumes 2 of 1", v.Metadata.Namespace)
			}
			if write == nil {
				return nil
			}
			if madeMeanwhile.Load() { // another user's apply of that name, while the data went to the node
				other := &legion.Volume{Header: legion.Header{Kind: legion.KindVolume, Metadata: legion.Metadata{Namespace: v.Metadata.Namespace, Name: v.Metadata.Name}}}
				if _, _, err := m.Store.Put(ctx, other, store.WriteOptions{}); err != nil {
					return err
				}
			}
			return write()
		}
	})
	n2 := m.StartAgent(t, "n2")
	putNode(t, m, "n2")
	admin := volumesClient(t, m, m.Admin)

	refuseEarly.Store(true)
	_, err := restore(t, admin, restoreHeader("early", "n2"), []byte("data"))
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "over the quota of namespace shop") {
		t.Fatalf("a restore its admission refuses: %v", err)
	}
	if calls := n2.Volumes.Calls(); len(calls) != 0 {
		t.Errorf("the node was asked to keep data of a refused restore: %v", calls)
	}

	refuseEarly.Store(false)
	refuseMaking.Store(true)
	_, err = restore(t, admin, restoreHeader("late", "n2"), []byte("data"))
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(),
		"volume shop/late: the Volume is refused now that its data is on node n2: over the quota of namespace shop: volumes 2 of 1; the restored data is removed from node n2") {
		t.Fatalf("a restore refused as its Volume is made: %v", err)
	}
	if _, _, err := m.Store.Get(legion.KindVolume, "shop", "late"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a Volume was made for a refused restore: %v", err)
	}
	// Its data goes with it: a node keeps nothing no Volume names.
	if _, _, ok := n2.Volumes.Get("shop", "late"); ok {
		t.Errorf("node n2 keeps the data of a refused restore; calls: %v", n2.Volumes.Calls())
	}
	if calls := n2.Volumes.Calls(); !slices.Contains(calls, "drop shop/late") {
		t.Errorf("node n2 was not asked to drop the refused restore's data: %v", calls)
	}

	refuseMaking.Store(false)
	madeMeanwhile.Store(true)
	_, err = restore(t, admin, restoreHeader("raced", "n2"), []byte("data"))
	if status.Code(err) != codes.AlreadyExists || !strings.Contains(err.Error(),
		"volume shop/raced was made while its data was restored, and is left as it was; the restored data is removed from node n2") {
		t.Fatalf("a restore whose Volume another apply made meanwhile: %v", err)
	}
	if _, _, ok := n2.Volumes.Get("shop", "raced"); ok {
		t.Errorf("node n2 keeps the data of a restore that lost its name; calls: %v", n2.Volumes.Calls())
	}
}
