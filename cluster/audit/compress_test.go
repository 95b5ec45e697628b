package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/klauspost/compress/zstd"
	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/dispatcher/dispatchertest"
	"github.com/legionbsd/legion/cluster/store"
)

// storedBatch is the value of the batch named name.
func storedBatch(t *testing.T, st *store.Store, name string) []byte {
	t.Helper()
	o, _, err := st.Get(legion.KindConfig, legion.SystemNamespace, name)
	if err != nil {
		t.Fatal(err)
	}
	return o.(*legion.Config).Spec.Data
}

// putBatch stores value as the batch named name, holding n events.
func putBatch(t *testing.T, st *store.Store, name string, n int, value []byte) {
	t.Helper()
	c, _ := legion.New(legion.KindConfig)
	m := c.GetMetadata()
	m.Namespace, m.Name, m.Labels = legion.SystemNamespace, name, map[string]string{CountLabel: strconv.Itoa(n)}
	c.(*legion.Config).Spec.Data = value
	if _, err := st.PutInPlace(context.Background(), c, store.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// A batch is stored as its events' JSON array compressed with zstd, a
// small part of the array's size, and read back whole.
func TestBatchesAreStoredCompressed(t *testing.T) {
	t.Parallel()
	st := dispatchertest.OpenStore(t)
	evs := make([]Event, batchEvents)
	for i := range evs {
		evs[i] = ev(i)
	}
	if _, err := Write(context.Background(), st, t0, evs); err != nil {
		t.Fatal(err)
	}
	value := storedBatch(t, st, batchName(t0, 0))
	array, _, err := encode(evs)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(value, zstdMagic) || len(value)*4 > len(array) {
		t.Fatalf("stored %d bytes starting %x for a %d-byte array; want a zstd frame of under a quarter of it", len(value), value[:4], len(array))
	}
	if got, err := BatchJSON(value); err != nil || !bytes.Equal(got, array) {
		t.Fatalf("BatchJSON: %d bytes, %v; want the array of %d", len(got), err, len(array))
	}
	got, err := Read(st, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(evs, got); d != "" {
		t.Fatalf("read back (-want +got):\n%s", d)
	}
}

// Batches written before they were compressed (the plain array) are read
// beside new ones, in the events' order.
func TestBatchesWrittenAsPlainJSONAreRead(t *testing.T) {
	t.Parallel()
	st := dispatchertest.OpenStore(t)
	old := ev(1)
	plain, err := json.Marshal([]Event{old})
	if err != nil {
		t.Fatal(err)
	}
	putBatch(t, st, batchName(t0, 0), 1, plain)
	if _, err := Write(context.Background(), st, t0.Add(time.Second), []Event{ev(2)}); err != nil {
		t.Fatal(err)
	}
	got, err := Read(st, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]Event{old, ev(2)}, got); d != "" {
		t.Fatalf("read back (-want +got):\n%s", d)
	}
}

// A compressed value that does not open, or that grows past what a batch
// can hold, is refused naming the batch.
func TestABatchThatDoesNotDecompressIsRefused(t *testing.T) {
	t.Parallel()
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	// A valid array, empty, of more bytes than the bound.
	huge := enc.EncodeAll(append(append([]byte{'['}, bytes.Repeat([]byte{' '}, maxBatchJSON)...), ']'), nil)
	for what, value := range map[string][]byte{
		"damaged":        append(append([]byte{}, zstdMagic...), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff),
		"past the bound": huge,
	} {
		st := dispatchertest.OpenStore(t)
		name := batchName(t0, 0)
		putBatch(t, st, name, 1, value)
		if _, err := Read(st, Filter{}); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: Read gave %v, want an error naming %s", what, err, name)
		}
	}
}
