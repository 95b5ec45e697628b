package attach

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/legionbsd/legion/sys"
)

// nfsMountArgs are mount(8)'s arguments for an export: NFSv4 unless the
// options name a version as mount_nfs(8) takes one (nfsv2, nfsv3, nfsv4
// or vers=N).
func nfsMountArgs(server, path, options, dir string) []string {
	opts := "nfsv4"
	if options != "" {
		opts += "," + options
		for o := range strings.SplitSeq(options, ",") {
			k, _, _ := strings.Cut(strings.TrimSpace(o), "=")
			if k == "nfsv2" || k == "nfsv3" || k == "nfsv4" || k == "vers" {
				opts = options
				break
			}
		}
	}
	// mount_nfs takes an IPv6 address in brackets before the colon.
	if strings.Contains(server, ":") && !strings.HasPrefix(server, "[") {
		server = "[" + server + "]"
	}
	return []string{"-t", "nfs", "-o", opts, server + ":" + path, dir}
}

// attachNFS mounts the export in the task's own directory.
func (a *Attacher) attachNFS(ctx context.Context, rec record, server, path, options string) error {
	if err := os.MkdirAll(rec.Dir, 0o755); err != nil {
		return fmt.Errorf("nfs: making the mount point: %w", err)
	}
	res, err := a.Runner.Run(ctx, sys.Command("mount", nfsMountArgs(server, path, options, rec.Dir)...))
	if err != nil {
		return fmt.Errorf("nfs: mounting %s:%s: %s", server, path, exitText(res, err))
	}
	return nil
}

// detachNFS unmounts the task's mount of the export.
func (a *Attacher) detachNFS(ctx context.Context, rec record) error {
	if err := a.unmount(ctx, rec.Dir); err != nil {
		return fmt.Errorf("nfs: %w", err)
	}
	return nil
}
