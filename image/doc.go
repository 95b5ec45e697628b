// Package image gets OCI images ready to run on a node, and is importable
// on its own by image-build tools (spec 6.1, 6.6).
//
// The parts:
//   - Registry: pulls through go-containerregistry, anonymous or with a
//     Login (ParseDockerConfig reads a Docker config's auths; LoginFor
//     picks one for a reference), bearer challenges, redirects and the
//     host's proxy; Resolve gives the digest a tag names (an index's for
//     an image of several platforms).
//   - PlatformRule: freebsd/<arch> first, then linux/<arch> where the node
//     runs Linux images; ErrPlatform names what an image offers.
//   - Layers: each blob checked against its digest and its tar against
//     the config's diff_id before anything is extracted (ErrDigest);
//     ApplyLayer applies whiteouts first, refuses ".." and paths through
//     links (ErrUnsafePath), keeps numeric owners, modes, setuid bits,
//     xattrs, and file flags through FileFlags (chflags via the system
//     runner on FreeBSD).
//   - Store: DirStore (<dir>/layers/<chain id hex>, a full copy each) and
//     ZFSStore (<root>/images/<chain id hex> cloned from the layer below,
//     snapshotted @layer; container roots are clones), by chain id.
//   - Images: the index <data-dir>/images/index.json (atomic writes, a
//     file lock), Pull with PullPolicy and per-namespace private images,
//     Load (OCI archive, OCI layout tar, docker save), List, Get, Remove,
//     PrepareRoot, Pin, GC and Collect (unused for an hour, then layers
//     nothing uses).
//   - Build hosts: Options.KeepBlobs keeps pulled blobs as they came;
//     Diff and Commit take a root built on the host as a new layer;
//     Export (OCI archive with Docker's manifest.json), Push and
//     PushIndex send images as they came, or packed as one layer when
//     their blobs were not kept.
//   - Progress: LogProgress lines, or TermProgress bars on a terminal.
//
// Signatures are in the sub-package image/cosign.
//
// It imports the standard library, sys, zfs and its libraries
// (go-containerregistry, klauspost/compress, x/sys, x/term). It must not
// import the legion object model, the agent or the cluster: it defines
// its own small types (Platform, Login, PullOptions) that those adapt to.
package image
