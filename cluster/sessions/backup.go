package sessions

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/rbac"
	"github.com/legionbsd/legion/cluster/store"
	legionpb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Leader gives a connection to the leader and the context to call it
// with (marked as forwarded once), or a nil connection when this manager
// leads.
type Leader func(ctx context.Context) (grpc.ClientConnInterface, context.Context, error)

// leaderStore is the replica of the leading manager, which Backup reads
// linearizably and Restore writes the new Volume to; *store.Store is one.
type leaderStore interface {
	IsLeader() bool
	Barrier(ctx context.Context) error
	Get(kind legion.Kind, namespace, name string) (legion.Object, uint64, error)
	Put(ctx context.Context, o legion.Object, opts store.WriteOptions) (obj, prev legion.Object, err error)
}

// atLeader is the store when this manager leads, or else a connection to
// the leader to forward the call to.
func (s *Service) atLeader(ctx context.Context) (leaderStore, grpc.ClientConnInterface, context.Context, error) {
	objs, err := s.objects()
	if err != nil {
		return nil, nil, nil, err
	}
	if ls, ok := objs.(leaderStore); ok && ls.IsLeader() {
		return ls, nil, ctx, nil
	}
	if s.leader == nil {
		return nil, nil, nil, status.Error(codes.Unavailable, "this manager does not lead the cluster and cannot forward: ask the leader")
	}
	conn, fctx, err := s.leader(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	if conn == nil {
		return nil, nil, nil, status.Error(codes.Unavailable, "leadership is changing: ask again")
	}
	return nil, conn, fctx, nil
}

type volumesServer struct {
	legionpb.UnimplementedVolumesServer
	s *Service
}

// backupSnapshot names a backup's own snapshot, apart from updates' and
// migrations' ones, so two backups at once do not meet either.
func backupSnapshot(nanos int64) string { return "legion-backup-" + strconv.FormatInt(nanos, 10) }

// Backup streams a bound ZFS Volume's data from its node: the header
// first, then the node's send of a snapshot it takes for the backup and
// destroys afterwards. It runs on the leader; a follower forwards it.
func (h volumesServer) Backup(req *legionpb.VolumeBackupRequest, out legionpb.Volumes_BackupServer) error {
	s := h.s
	ctx := out.Context()
	id, err := user(ctx, "volume backup")
	if err != nil {
		return err
	}
	ns := req.Namespace
	if ns == "" {
		ns = legion.DefaultNamespace
	}
	if req.Name == "" {
		return status.Error(codes.InvalidArgument, "volume backup: name: missing")
	}
	objs, err := s.objects()
	if err != nil {
		return err
	}
	// The data is as much as exec gives: edit on Volumes.
	if err := allowedKind(objs, id, rbac.Write, legion.KindVolume, "volume backup", ns); err != nil {
		return err
	}
	st, conn, fctx, err := s.atLeader(ctx)
	if err != nil {
		return err
	}
	if conn != nil {
		return forwardBackup(fctx, legionpb.NewVolumesClient(conn), &legionpb.VolumeBackupRequest{Namespace: ns, Name: req.Name}, out)
	}
	if err := st.Barrier(ctx); err != nil {
		return storeStatus(err)
	}
	v, err := getVolume(st, ns, req.Name)
	if err != nil {
		return err
	}
	if v.Spec.Driver != legion.DriverZFS {
		return status.Errorf(codes.FailedPrecondition, "volume %s/%s: driver %s: only zfs volumes are backed up here; back the data up where the %s server keeps it",
			ns, req.Name, v.Spec.Driver, v.Spec.Driver)
	}
	switch v.State() {
	case legion.VolumeFree:
		return status.Errorf(codes.FailedPrecondition, "volume %s/%s is free: no node holds data of it yet", ns, req.Name)
	case legion.VolumeMoving:
		return status.Errorf(codes.FailedPrecondition, "volume %s/%s is moving from node %s to node %s: back it up once it moved",
			ns, req.Name, v.Status.Migration.From, v.Status.Migration.To)
	}
	form, err := streamForm(v.Status.Backend)
	if err != nil {
		return status.Errorf(codes.FailedPrecondition, "volume %s/%s: %v", ns, req.Name, err)
	}
	now := s.now()
	hdr, err := json.Marshal(legion.VolumeBackupHeader{Format: legion.VolumeBackupFormat, Namespace: ns, Name: req.Name,
		Labels: v.Metadata.Labels, Spec: v.Spec, Node: v.Status.Node, Backend: form, Time: now.UTC(), Consistency: consistencyOf(form)})
	if err != nil {
		return status.Errorf(codes.Internal, "volume %s/%s: the backup header: %v", ns, req.Name, err)
	}
	if err := out.Send(&legionpb.VolumeChunk{Header: hdr}); err != nil {
		return err
	}
	return s.SendVolume(ctx, v.Status.Node, &legionpb.VolumeSendOffer{Namespace: ns, Volume: req.Name, VolumeUid: v.Metadata.UID,
		Snapshot: backupSnapshot(now.UnixNano()), DropSnapshot: true}, chunkWriter{out})
}

// streamForm is the backup stream's form from how the node keeps the
// data, the first word of Volume.status.backend as its agent said when
// claiming: a ZFS dataset sends a zfs stream, a directory a tar stream.
func streamForm(backend string) (string, error) {
	switch word, _, _ := strings.Cut(backend, " "); word {
	case "zfs":
		return "zfs", nil
	case "directory":
		return "dir", nil
	case "":
		return "", errors.New("status.backend: empty: its node has not said how it keeps the data")
	}
	return "", fmt.Errorf("status.backend %q: expected it to start with zfs or directory", backend)
}

// consistencyOf is what a backup of form holds: a ZFS snapshot is the
// data at one instant ("crash"); a directory's copy is made file after
// file while its tasks run ("files"), so a file written meanwhile may be
// older or newer than another.
func consistencyOf(form string) string {
	if form == "zfs" {
		return legion.ConsistencyCrash
	}
	return legion.ConsistencyFiles
}

// backendOf is status.backend of a Volume restored from a stream of form.
func backendOf(form string) string {
	if form == "dir" {
		return "directory"
	}
	return form
}

func forwardBackup(ctx context.Context, c legionpb.VolumesClient, req *legionpb.VolumeBackupRequest, out legionpb.Volumes_BackupServer) error {
	in, err := c.Backup(ctx, req)
	if err != nil {
		return err
	}
	for {
		m, err := in.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := out.Send(m); err != nil {
			return err
		}
	}
}

// chunkWriter sends each write as a backup's data chunk.
type chunkWriter struct{ out legionpb.Volumes_BackupServer }

func (w chunkWriter) Write(p []byte) (int, error) {
	if err := w.out.Send(&legionpb.VolumeChunk{Data: p}); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Restore takes a backup's header and stream, has the header's node keep
// the data, and then makes the Volume bound there. A Volume of that name
// is never overwritten. It runs on the leader; a follower forwards it.
func (h volumesServer) Restore(in legionpb.Volumes_RestoreServer) error {
	s := h.s
	ctx := in.Context()
	id, err := user(ctx, "volume restore")
	if err != nil {
		return err
	}
	first, err := in.Recv()
	if err != nil {
		return err
	}
	hdr, vol, err := restoreHeader(first)
	if err != nil {
		return err
	}
	ns, name := hdr.Namespace, hdr.Name
	objs, err := s.objects()
	if err != nil {
		return err
	}
	if err := allowedKind(objs, id, rbac.Write, legion.KindVolume, "volume restore", ns); err != nil {
		return err
	}
	st, conn, fctx, err := s.atLeader(ctx)
	if err != nil {
		return err
	}
	if conn != nil {
		return forwardRestore(fctx, legionpb.NewVolumesClient(conn), first, in)
	}
	if err := st.Barrier(ctx); err != nil {
		return storeStatus(err)
	}
	if _, _, err := st.Get(legion.KindVolume, ns, name); err == nil {
		return status.Errorf(codes.AlreadyExists, "volume %s/%s exists: a restore never overwrites a Volume; restore under another name", ns, name)
	} else if !errors.Is(err, store.ErrNotFound) {
		return storeStatus(err)
	}
	if _, _, err := st.Get(legion.KindNode, "", hdr.Node); errors.Is(err, store.ErrNotFound) {
		return status.Errorf(codes.NotFound, "header.node: no node %s in the cluster", hdr.Node)
	} else if err != nil {
		return storeStatus(err)
	}
	// Refused before any data reaches the node, as the apply of the
	// Volume would be (bound to that node); admitted again as it is made.
	vol.Status.Node = hdr.Node
	if err := s.admitVol(ctx, vol, nil); err != nil {
		return err
	}
	spec, err := json.Marshal(vol.Spec)
	if err != nil {
		return status.Errorf(codes.Internal, "volume %s/%s: spec: %v", ns, name, err)
	}
	// No uid yet: the Volume is made once the data is kept.
	if err := s.ReceiveVolume(ctx, hdr.Node, &legionpb.VolumeReceiveOffer{Namespace: ns, Volume: name, Restore: true, Spec: spec}, &chunkReader{in: in}); err != nil {
		return err
	}
	vol.Status.Backend = backendOf(hdr.Backend)
	var made legion.Object
	err = s.admitVol(ctx, vol, func() error {
		var err error
		made, _, err = st.Put(ctx, vol, store.WriteOptions{Precondition: store.Precondition{MustNotExist: true}})
		return err
	})
	if _, admission := status.FromError(err); admission && err != nil {
		return status.Errorf(status.Code(err), "volume %s/%s: the Volume is refused now that its data is on node %s: %s; %s",
			ns, name, hdr.Node, status.Convert(err).Message(), s.dropRestored(ctx, hdr.Node, ns, name))
	}
	if errors.Is(err, store.ErrExists) {
		return status.Errorf(codes.AlreadyExists, "volume %s/%s was made while its data was restored, and is left as it was; %s",
			ns, name, s.dropRestored(ctx, hdr.Node, ns, name))
	}
	if err != nil {
		return status.Errorf(status.Code(storeStatus(err)), "volume %s/%s: the data is on node %s, but making the Volume failed: %v", ns, name, hdr.Node, err)
	}
	data, err := legion.MarshalJSON(made)
	if err != nil {
		return status.Errorf(codes.Internal, "volume %s/%s: %v", ns, name, err)
	}
	return in.SendAndClose(&legionpb.VolumeRestoreResponse{Volume: data})
}

// dropRestored removes the data a restore sent to node for a Volume it
// did not make, and says what became of it. The node keeps a copy some
// Volume has taken as its own meanwhile (it no longer bears the restored
// mark). It runs past the caller's end, which must not leave the data.
func (s *Service) dropRestored(ctx context.Context, node, ns, name string) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), restoreDropTimeout)
	defer cancel()
	err := s.DropVolume(ctx, node, &legionpb.VolumeDropOffer{Namespace: ns, Volume: name, VolumeUid: legion.RestoredVolumeUID})
	if err != nil {
		s.log.Warn("removing a refused restore's data", "volume", ns+"/"+name, "node", node, "err", err)
		return fmt.Sprintf("the restored data is left on node %s, as removing it failed: %s", node, status.Convert(err).Message())
	}
	return fmt.Sprintf("the restored data is removed from node %s", node)
}

// restoreDropTimeout bounds removing a refused restore's data from its
// node, which answered the restore moments before.
const restoreDropTimeout = 30 * time.Second

// restoreHeader reads and checks the header of a restore's first chunk,
// and the Volume it makes (labels and spec as admission leaves them).
func restoreHeader(first *legionpb.VolumeChunk) (*legion.VolumeBackupHeader, *legion.Volume, error) {
	bad := func(format string, args ...any) error {
		return status.Errorf(codes.InvalidArgument, "volume restore: "+format, args...)
	}
	if len(first.Header) == 0 {
		return nil, nil, bad("the first chunk must carry the backup's header")
	}
	if len(first.Data) > 0 {
		return nil, nil, bad("the first chunk carries the header only, and this one has %d bytes of data", len(first.Data))
	}
	var hdr legion.VolumeBackupHeader
	dec := json.NewDecoder(bytes.NewReader(first.Header))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&hdr); err != nil {
		return nil, nil, bad("header: %v", err)
	}
	switch {
	case hdr.Format != legion.VolumeBackupFormat:
		return nil, nil, bad("header.format %q: expected %q", hdr.Format, legion.VolumeBackupFormat)
	case hdr.Namespace == "":
		return nil, nil, bad("header.namespace: missing")
	case hdr.Namespace == legion.SystemNamespace:
		return nil, nil, bad("header.namespace: %s is reserved", legion.SystemNamespace)
	case hdr.Name == "":
		return nil, nil, bad("header.name: missing")
	case hdr.Node == "":
		return nil, nil, bad("header.node: missing: the node to restore the data on")
	case hdr.Backend != "zfs" && hdr.Backend != "dir":
		return nil, nil, bad("header.backend %q: expected zfs or dir", hdr.Backend)
	case hdr.Spec.Driver != legion.DriverZFS:
		return nil, nil, bad("header.spec.driver %q: only zfs volumes are restored", hdr.Spec.Driver)
	}
	if err := legion.ValidName(hdr.Node); err != nil {
		return nil, nil, bad("header.node: %v", err)
	}
	o, err := legion.New(legion.KindVolume)
	if err != nil {
		return nil, nil, status.Errorf(codes.Internal, "volume restore: %v", err)
	}
	vol := o.(*legion.Volume)
	vol.Metadata.Namespace, vol.Metadata.Name, vol.Metadata.Labels = hdr.Namespace, hdr.Name, hdr.Labels
	vol.Spec = hdr.Spec
	if err := legion.Admit(vol); err != nil {
		return nil, nil, bad("header: %v", err)
	}
	// spec.node asks for the data on a node: left naming the backup's
	// node, it would move the restored data straight back there.
	if vol.Spec.Node != "" && vol.Spec.Node != hdr.Node {
		vol.Status.Message = fmt.Sprintf("restored on node %s from a backup taken on node %s; spec.node (%s) was cleared so the data stays where it was restored",
			hdr.Node, vol.Spec.Node, vol.Spec.Node)
		vol.Spec.Node = ""
	}
	return &hdr, vol, nil
}

func forwardRestore(ctx context.Context, c legionpb.VolumesClient, first *legionpb.VolumeChunk, in legionpb.Volumes_RestoreServer) error {
	out, err := c.Restore(ctx)
	if err != nil {
		return err
	}
	m := first
	for {
		if err := out.Send(m); err != nil {
			// The leader ended the call: its answer says why.
			_, err := out.CloseAndRecv()
			return err
		}
		m, err = in.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err // ctx ends, and the forwarded call with it
		}
	}
	resp, err := out.CloseAndRecv()
	if err != nil {
		return err
	}
	return in.SendAndClose(resp)
}

// chunkReader reads a restore's data chunks; the caller closing its side
// is the stream's end.
type chunkReader struct {
	in  legionpb.Volumes_RestoreServer
	buf []byte
}

func (r *chunkReader) Read(p []byte) (int, error) {
	for len(r.buf) == 0 {
		m, err := r.in.Recv()
		if err != nil {
			return 0, err
		}
		if len(m.Header) > 0 {
			return 0, status.Error(codes.InvalidArgument, "volume restore: a header after the first chunk")
		}
		r.buf = m.Data
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

// getVolume reads a Volume.
func getVolume(st leaderStore, ns, name string) (*legion.Volume, error) {
	o, _, err := st.Get(legion.KindVolume, ns, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, status.Errorf(codes.NotFound, "no volume named %s in namespace %s", name, ns)
	}
	if err != nil {
		return nil, storeStatus(err)
	}
	v, ok := o.(*legion.Volume)
	if !ok {
		return nil, status.Errorf(codes.Internal, "volume %s/%s: stored as a %s", ns, name, o.GetKind())
	}
	return v, nil
}

// storeStatus gives a store error the code callers retry on.
func storeStatus(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrNotLeader), errors.Is(err, store.ErrNoQuorum), errors.Is(err, store.ErrClosed):
		return status.Error(codes.Unavailable, err.Error())
	case errors.Is(err, store.ErrExists):
		return status.Error(codes.AlreadyExists, err.Error())
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.Error(codes.Internal, err.Error())
}
