package server

import (
	"context"
	"strings"
	"testing"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"google.golang.org/grpc/codes"
)

func nfsVolume(ns, name, path string) string {
	return volYAML(ns, name, "{driver: nfs, nfs: {server: 192.0.2.10, path: "+path+"}}")
}

// TestAdmissionVolumeSourcesAreTheAdmins: a Volume that mounts from
// elsewhere is mounted by the nodes from any export or LUN they reach, so
// a namespace user makes one, or points one elsewhere, only where the
// cluster admin let its Namespace; a zfs Volume is the namespace's own,
// and the admin's Volumes need no entry.
func TestAdmissionVolumeSourcesAreTheAdmins(t *testing.T) {
	t.Parallel()
	m, admin, mallory := teamUser(t)
	ctx := context.Background()
	const denied = "Volume team/finance: spec.driver: nfs would have the nodes mount what they can reach, not namespace team's alone: " +
		"its users may make such Volumes once Namespace team lists nfsVolumes in spec.security.allow"
	applyRefused(t, m, mallory, nfsVolume("team", "finance", "/exports/finance"), codes.PermissionDenied, denied)
	applyRefused(t, m, mallory, `apiVersion: legion/v1
kind: Volume
metadata: {name: lun, namespace: team}
spec: {driver: iscsi, iscsi: {portal: 192.0.2.10, target: iqn.2026-12.test:finance, lun: 0}}`, codes.PermissionDenied,
		"Volume team/lun: spec.driver: iscsi", "lists iscsiVolumes in spec.security.allow")
	applyOK(t, mallory, `apiVersion: legion/v1
kind: Volume
metadata: {name: data, namespace: team}
spec: {driver: zfs}`)

	// The admin's NFS Volume: the user may keep it as it is, not point it
	// at another export.
	applyOK(t, admin, nfsVolume("team", "shared", "/exports/team"))
	relabelled := strings.Replace(nfsVolume("team", "shared", "/exports/team"), "namespace: team}", "namespace: team, labels: {app: web}}", 1)
	applyOK(t, mallory, relabelled)
	applyRefused(t, m, mallory, nfsVolume("team", "shared", "/exports/finance"), codes.PermissionDenied, "Volume team/shared: spec.driver: nfs")

	// Allowed by the admin, the namespace's users make NFS Volumes, and
	// still no iSCSI ones.
	ns, _ := legion.New(legion.KindNamespace)
	ns.GetMetadata().Name = "team"
	ns.(*legion.Namespace).Spec.Security.Allow = []string{legion.AllowNFSVolumes}
	if _, err := admin.ApplyOne(ctx, ns, client.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	applyOK(t, mallory, nfsVolume("team", "finance", "/exports/finance"))
	applyRefused(t, m, mallory, `apiVersion: legion/v1
kind: Volume
metadata: {name: lun, namespace: team}
spec: {driver: iscsi, iscsi: {portal: 192.0.2.10, target: iqn.2026-12.test:finance, lun: 0}}`, codes.PermissionDenied, "lists iscsiVolumes")
}
