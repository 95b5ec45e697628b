package sessionstest

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sync"

	"github.com/legionbsd/legion"
	legionpb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Volumes is a node's volume store in memory, for volume sessions. A
// Volume's data is either bytes given with Put or a block repeated up to
// a size (PutRepeated, for large streams); what a receive keeps is only
// its size and checksum.
type Volumes struct {
	mu       sync.Mutex
	vols     map[string]*memVolume // "namespace/name"
	faults   map[string]fault
	running  int
	received map[string]error // the last receive's end, by volume
	calls    []string
	sends    []*legionpb.VolumeSendOffer
}

type memVolume struct {
	data  []byte // sent as is, or repeated
	size  int64
	sum   uint32 // crc32 (Castagnoli) of the whole
	inUse bool
	uid   string // the Volume's, as the agent marks its copy; restored before the Volume is made
}

// fault makes a send or receive fail after some bytes, or hold there
// until its context ends.
type fault struct {
	after int64
	err   error // nil: hold
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Sum is the checksum Volumes keeps of a stream.
func Sum(data []byte) uint32 { return crc32.Checksum(data, castagnoli) }

func key(ns, name string) string { return ns + "/" + name }

func (v *Volumes) init() {
	if v.vols == nil {
		v.vols, v.faults, v.received = map[string]*memVolume{}, map[string]fault{}, map[string]error{}
	}
}

// Put stores a Volume holding data.
func (v *Volumes) Put(ns, name string, data []byte) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.init()
	v.vols[key(ns, name)] = &memVolume{data: data, size: int64(len(data)), sum: Sum(data)}
}

// PutRepeated stores a Volume of size bytes, block after block (its
// checksum is not kept).
func (v *Volumes) PutRepeated(ns, name string, block []byte, size int64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.init()
	v.vols[key(ns, name)] = &memVolume{data: block, size: size}
}

// InUse marks a Volume as used by a task of the node: a drop is refused.
func (v *Volumes) InUse(ns, name string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.vols[key(ns, name)].inUse = true
}

// Fail makes the next send or receive of the Volume fail with err after
// after bytes; a nil err holds it there until its session ends.
func (v *Volumes) Fail(ns, name string, after int64, err error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.init()
	v.faults[key(ns, name)] = fault{after: after, err: err}
}

// Get is the size and checksum of a Volume the node holds.
func (v *Volumes) Get(ns, name string) (size int64, sum uint32, ok bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	m := v.vols[key(ns, name)]
	if m == nil {
		return 0, 0, false
	}
	return m.size, m.sum, true
}

// Received is how the last receive of a Volume ended: nil for all of
// it kept, else the error its stream or store gave; ok is false before
// any receive ended.
func (v *Volumes) Received(ns, name string) (err error, ok bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	err, ok = v.received[key(ns, name)]
	return err, ok
}

// Running is how many volume calls have not returned.
func (v *Volumes) Running() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.running
}

// Calls lists the calls so far: "send ns/name", "receive ns/name",
// "drop ns/name".
func (v *Volumes) Calls() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]string(nil), v.calls...)
}

// Sends lists the send offers taken so far.
func (v *Volumes) Sends() []*legionpb.VolumeSendOffer {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]*legionpb.VolumeSendOffer(nil), v.sends...)
}

// begin records a call and returns its fault, if any.
func (v *Volumes) begin(what, ns, name string) (fault, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.init()
	v.calls = append(v.calls, what+" "+key(ns, name))
	v.running++
	f, ok := v.faults[key(ns, name)]
	delete(v.faults, key(ns, name))
	return f, ok
}

func (v *Volumes) end() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.running--
}

// SendVolume implements sessionsclient.VolumeData.
func (v *Volumes) SendVolume(ctx context.Context, o *legionpb.VolumeSendOffer, w io.Writer) error {
	f, faulty := v.begin("send", o.Namespace, o.Volume)
	defer v.end()
	v.mu.Lock()
	v.sends = append(v.sends, o)
	m := v.vols[key(o.Namespace, o.Volume)]
	v.mu.Unlock()
	if m == nil {
		return status.Errorf(codes.NotFound, "no volume %s/%s on this node", o.Namespace, o.Volume)
	}
	limit := m.size
	if faulty {
		limit = min(limit, f.after)
	}
	for sent := int64(0); sent < limit; {
		p := m.data[sent%int64(len(m.data)):]
		p = p[:min(int64(len(p)), limit-sent)]
		n, err := w.Write(p)
		sent += int64(n)
		if err != nil {
			return err
		}
	}
	if faulty {
		return hold(ctx, f)
	}
	return nil
}

// hold is a fault's end: its error, or the session's end.
func hold(ctx context.Context, f fault) error {
	if f.err != nil {
		return f.err
	}
	<-ctx.Done()
	return ctx.Err()
}

// ReceiveVolume implements sessionsclient.VolumeData: it keeps the
// stream's size and checksum once r ends cleanly, and refuses a restore
// over a Volume it holds.
func (v *Volumes) ReceiveVolume(ctx context.Context, o *legionpb.VolumeReceiveOffer, r io.Reader) (err error) {
	f, faulty := v.begin("receive", o.Namespace, o.Volume)
	defer v.end()
	k := key(o.Namespace, o.Volume)
	defer func() {
		v.mu.Lock()
		v.received[k] = err
		v.mu.Unlock()
	}()
	v.mu.Lock()
	held := v.vols[k] != nil
	v.mu.Unlock()
	if o.Restore && held {
		return status.Errorf(codes.AlreadyExists, "this node has data of volume %s already", k)
	}
	h := crc32.New(castagnoli)
	var n int64
	if faulty {
		n, err = io.CopyN(h, r, f.after)
		if err == nil {
			err = hold(ctx, f)
		}
	} else {
		n, err = io.Copy(h, r)
	}
	if err != nil {
		return fmt.Errorf("after %d bytes: %w", n, err)
	}
	if ctx.Err() != nil {
		return errors.New("the session ended")
	}
	v.mu.Lock()
	uid := o.VolumeUid
	if o.Restore && uid == "" {
		uid = legion.RestoredVolumeUID
	}
	v.vols[k] = &memVolume{size: n, sum: h.Sum32(), uid: uid}
	v.mu.Unlock()
	return nil
}

// DropVolume implements sessionsclient.VolumeData.
func (v *Volumes) DropVolume(ctx context.Context, o *legionpb.VolumeDropOffer) error {
	v.begin("drop", o.Namespace, o.Volume)
	defer v.end()
	k := key(o.Namespace, o.Volume)
	v.mu.Lock()
	defer v.mu.Unlock()
	m := v.vols[k]
	switch {
	case m == nil:
		return nil // dropped already
	case m.inUse:
		return status.Errorf(codes.FailedPrecondition, "volume %s is in use by a task of this node", k)
	case o.VolumeUid != "" && m.uid != "" && m.uid != o.VolumeUid:
		return status.Errorf(codes.FailedPrecondition, "volume %s: the node's copy is of Volume uid %s, not %s", k, m.uid, o.VolumeUid)
	}
	delete(v.vols, k)
	return nil
}
