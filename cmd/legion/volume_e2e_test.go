package main

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/cluster/sessions/sessionstest"
	"github.com/legionbsd/legion/cluster/store"
)

// Through the managers' real Volumes service and two nodes' sessions
// clients: `legion volume backup` writes node n1's data of shop/db to a
// file, and the client restores that file onto n2 under a new name, with
// the same bytes (checksum) and the backup's labels.
func TestVolumeBackupThenRestoreOnAnotherNode(t *testing.T) {
	t.Parallel()
	m := sessionstest.Start(t)
	n1, n2 := m.StartAgent(t, "n1"), m.StartAgent(t, "n2")
	data := bytes.Repeat([]byte("rows of the shop's database\n"), 20000)
	n1.Volumes.Put("shop", "db", data)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, n := range []string{"n1", "n2"} {
		node, _ := legion.New(legion.KindNode)
		node.GetMetadata().Name = n
		if _, _, err := m.Store.Put(ctx, node, store.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	o, _ := legion.New(legion.KindVolume)
	v := o.(*legion.Volume)
	v.Metadata.Namespace, v.Metadata.Name, v.Metadata.Labels = "shop", "db", map[string]string{"app": "db", "ordinal": "0"}
	v.Spec = legion.VolumeSpec{Driver: legion.DriverZFS, Size: 1 << 30}
	v.Status = legion.VolumeStatus{Node: "n1", Backend: "directory /var/db/legion/volumes/shop/db"}
	if _, _, err := m.Store.Put(ctx, v, store.WriteOptions{}); err != nil {
		t.Fatal(err)
	}

	file := filepath.Join(t.TempDir(), "db.backup")
	out, err := runLegion(t, "", "volume", "backup", "db", "-n", "shop", "-o", file, "--server", m.Addr, "--credentials", m.AdminFile)
	if err != nil {
		t.Fatalf("volume backup: %v\n%s", err, out)
	}
	if !strings.Contains(out, "taken on n1") || !strings.Contains(out, "Consistency: file by file") || strings.Contains(out, "crash-consistent") {
		t.Errorf("backup output:\n%s", out)
	}
	st, err := os.Stat(file)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("backup file: %v %v", st, err)
	}

	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, maxHeaderLine)
	h, err := readBackupHeader(file, r)
	if err != nil {
		t.Fatal(err)
	}
	if h.Node != "n1" || h.Backend != "dir" || h.Labels["ordinal"] != "0" || h.Consistency != legion.ConsistencyFiles {
		t.Errorf("header: %+v", h)
	}
	h.Name, h.Node = "db2", "n2"
	cl, err := client.New(client.Options{Server: m.Addr, CredentialsFile: m.AdminFile, Retry: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	made, err := cl.RestoreVolume(ctx, h, r)
	if err != nil {
		t.Fatalf("restore onto n2: %v", err)
	}
	if made.Metadata.Name != "db2" || made.Status.Node != "n2" || made.Metadata.Labels["ordinal"] != "0" || made.Spec.Size != 1<<30 {
		t.Errorf("volume made: %+v", made)
	}
	size, sum, ok := n2.Volumes.Get("shop", "db2")
	if !ok || size != int64(len(data)) || sum != sessionstest.Sum(data) {
		t.Errorf("n2 holds shop/db2: %v, %d bytes, checksum %x; want %d bytes, checksum %x", ok, size, sum, len(data), sessionstest.Sum(data))
	}
	stored, _, err := m.Store.Get(legion.KindVolume, "shop", "db2")
	if err != nil || stored.(*legion.Volume).Status.Node != "n2" {
		t.Errorf("stored shop/db2: %+v %v", stored, err)
	}

	// The name is taken now: the service refuses, and the CLI says so
	// with its message.
	f2, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f2.Close()
	r2 := bufio.NewReaderSize(f2, maxHeaderLine)
	h2, err := readBackupHeader(file, r2)
	if err != nil {
		t.Fatal(err)
	}
	h2.Name, h2.Node = "db2", "n2"
	if _, err := cl.RestoreVolume(ctx, h2, r2); client.Code(err).String() != "AlreadyExists" {
		t.Errorf("a second restore as shop/db2: %v (%s), want AlreadyExists", err, client.Code(err))
	}
}
