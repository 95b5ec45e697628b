package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/store"
)

// Retention defaults (9): --audit-retention-days and --audit-max-events.
const (
	DefaultRetention = 30 * 24 * time.Hour
	DefaultMaxEvents = 100000
)

// BatchPrefix starts the name of every batch: audit-<unix ms>-<part>.
const BatchPrefix = "audit-"

// CountLabel holds how many events a batch has, so retention by count
// reads no batch's data.
const CountLabel = "legion.audit.count"

// Batch bounds: one Config stays well under the largest object.
const (
	batchEvents = 1000
	batchBytes  = 256 << 10
)

// Store is what the leader writes batches to: *store.Store.
type Store interface {
	PutInPlace(ctx context.Context, o legion.Object, opts store.WriteOptions) (prev legion.Object, err error)
	List(kind legion.Kind, namespace string, keep func(legion.Object) bool) ([]legion.Object, uint64, error)
	Delete(ctx context.Context, kind legion.Kind, namespace, name string, pre store.Precondition) (legion.Object, error)
}

// Write stores events as batches written at now, in order; it returns how
// many were written, so the caller keeps the rest for later.
func Write(ctx context.Context, st Store, now time.Time, events []Event) (int, error) {
	done, _, err := write(ctx, st, now, events)
	return done, err
}

// write is Write, also returning the batches it stored.
func write(ctx context.Context, st Store, now time.Time, events []Event) (done int, written []batch, err error) {
	for part := 0; done < len(events); part++ {
		data, n, err := encode(events[done:])
		if err != nil {
			return done, written, err
		}
		c, _ := legion.New(legion.KindConfig)
		m := c.GetMetadata()
		m.Namespace, m.Name = legion.SystemNamespace, batchName(now, part)
		m.Labels = map[string]string{CountLabel: strconv.Itoa(n)}
		if c.(*legion.Config).Spec.Data, err = compress(data); err != nil {
			return done, written, err
		}
		// Nothing is read back: a batch is up to 256 KiB of JSON.
		_, err = st.PutInPlace(ctx, c, store.WriteOptions{Precondition: store.Precondition{MustNotExist: true}})
		if errors.Is(err, store.ErrExists) {
			continue // a batch of the same millisecond: the next part's name
		}
		if err != nil {
			return done, written, fmt.Errorf("writing audit batch %s: %w", m.Name, err)
		}
		written = append(written, batch{name: m.Name, at: time.UnixMilli(now.UnixMilli()), count: n})
		done += n
	}
	return done, written, nil
}

// batchName sorts by time as text: the milliseconds are zero-padded.
func batchName(t time.Time, part int) string {
	return fmt.Sprintf("%s%013d-%d", BatchPrefix, t.UnixMilli(), part)
}

// encode makes the JSON array of as many events as fit one batch.
func encode(events []Event) ([]byte, int, error) {
	buf := []byte{'['}
	n := 0
	for _, e := range events {
		b, err := json.Marshal(e)
		if err != nil {
			return nil, 0, fmt.Errorf("encoding an audit event: %w", err)
		}
		if n > 0 && (n == batchEvents || len(buf)+len(b) > batchBytes) {
			break
		}
		if n > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, b...)
		n++
	}
	return append(buf, ']'), n, nil
}

// A batch's value is the JSON array of its events compressed with zstd.
// The array repeats itself (an actor, an action, a kind, a namespace
// again and again), and every byte of it is encoded, replicated, sealed
// and written by every manager's store: compressed it is a tenth or less
// of the size, which took a twentieth of a busy manager's CPU per write.
// Batches written before are the array itself and are read as they are.
var zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}

// maxBatchJSON bounds a batch's array when it is read: a batch holds at
// most batchBytes and one event, so a value that grows past this was not
// written as a batch.
const maxBatchJSON = 16 << 20

// The coders are made on first use (the CLI links this package too) and
// kept: the flusher writes once a second.
var (
	batchEncoder = sync.OnceValues(func() (*zstd.Encoder, error) {
		return zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
	})
	batchDecoder = sync.OnceValues(func() (*zstd.Decoder, error) {
		return zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(maxBatchJSON))
	})
)

// compress is a batch's value for the JSON array of its events.
func compress(array []byte) ([]byte, error) {
	enc, err := batchEncoder()
	if err != nil {
		return nil, fmt.Errorf("audit batch compressor: %w", err)
	}
	return enc.EncodeAll(array, make([]byte, 0, len(array)/4)), nil
}

// BatchJSON is the JSON array of the events of a batch's value (a
// Config's data in the system namespace named with BatchPrefix).
func BatchJSON(value []byte) ([]byte, error) {
	if !bytes.HasPrefix(value, zstdMagic) {
		return value, nil // written before batches were compressed
	}
	dec, err := batchDecoder()
	if err != nil {
		return nil, fmt.Errorf("audit batch decompressor: %w", err)
	}
	array, err := dec.DecodeAll(value, nil)
	if err != nil {
		return nil, fmt.Errorf("decompressing: %w", err)
	}
	return array, nil
}

// batch is a stored batch's name, time and count.
type batch struct {
	name  string
	at    time.Time
	count int
}

func batches(st Store) ([]batch, []legion.Object, error) {
	objs, _, err := st.List(legion.KindConfig, legion.SystemNamespace, func(o legion.Object) bool {
		return strings.HasPrefix(o.GetMetadata().Name, BatchPrefix)
	})
	if err != nil {
		return nil, nil, err
	}
	out := make([]batch, 0, len(objs))
	for _, o := range objs {
		m := o.GetMetadata()
		ms, _, _ := strings.Cut(strings.TrimPrefix(m.Name, BatchPrefix), "-")
		at, _ := strconv.ParseInt(ms, 10, 64)
		n, _ := strconv.Atoi(m.Labels[CountLabel])
		out = append(out, batch{name: m.Name, at: time.UnixMilli(at), count: n})
	}
	slices.SortFunc(out, func(a, b batch) int { return strings.Compare(a.name, b.name) })
	slices.SortFunc(objs, func(a, b legion.Object) int { return strings.Compare(a.GetMetadata().Name, b.GetMetadata().Name) })
	return out, objs, nil
}

// Retention is how long batches are kept and how many events at most.
type Retention struct {
	Age       time.Duration // DefaultRetention when zero
	MaxEvents int           // DefaultMaxEvents when zero
}

func (r Retention) withDefaults() Retention {
	if r.Age <= 0 {
		r.Age = DefaultRetention
	}
	if r.MaxEvents <= 0 {
		r.MaxEvents = DefaultMaxEvents
	}
	return r
}

// Prune deletes the batches older than the retention, then the oldest
// while more events are kept than the limit; it returns how many batches
// went.
func Prune(ctx context.Context, st Store, now time.Time, r Retention) (int, error) {
	bs, _, err := batches(st)
	if err != nil {
		return 0, err
	}
	gone, err := prune(ctx, st, now, r, bs)
	return len(gone), err
}

// prune is Prune over bs, the stored batches in name order; it returns
// those it deleted (a prefix of bs).
func prune(ctx context.Context, st Store, now time.Time, r Retention, bs []batch) ([]batch, error) {
	r = r.withDefaults()
	total := 0
	for _, b := range bs {
		total += b.count
	}
	gone := 0
	for _, b := range bs {
		if !b.at.Before(now.Add(-r.Age)) && total <= r.MaxEvents {
			break
		}
		if _, err := st.Delete(ctx, legion.KindConfig, legion.SystemNamespace, b.name, store.Precondition{}); err != nil && !errors.Is(err, store.ErrNotFound) {
			return bs[:gone], fmt.Errorf("deleting audit batch %s: %w", b.name, err)
		}
		total -= b.count
		gone++
	}
	return bs[:gone], nil
}

// Read lists the kept events f matches, oldest first.
func Read(st Store, f Filter) ([]Event, error) {
	_, objs, err := batches(st)
	if err != nil {
		return nil, err
	}
	var out []Event
	for _, o := range objs {
		data, err := BatchJSON(o.(*legion.Config).Spec.Data)
		if err != nil {
			return nil, fmt.Errorf("audit batch %s: %w", o.GetMetadata().Name, err)
		}
		var evs []Event
		if err := json.Unmarshal(data, &evs); err != nil {
			return nil, fmt.Errorf("audit batch %s: %w", o.GetMetadata().Name, err)
		}
		out = append(out, Select(evs, f)...)
	}
	// Batches follow the time they were written; events handed on late
	// sit in later batches, so order by the events' own time.
	slices.SortStableFunc(out, func(a, b Event) int { return a.Time.Compare(b.Time) })
	return out, nil
}
