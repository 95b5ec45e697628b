// Package image gets OCI images ready to run on a node, and is importable
// on its own by image-build tools: registry pulls (go-containerregistry)
// with Docker-config logins, platform choice (freebsd/<arch>, then
// linux/<arch> where allowed), digest and diff_id verification, layer
// extraction with whiteouts, a layer store on ZFS (package zfs) or on
// directories, the image index with its file lock, pins, garbage
// collection, local images (load from OCI or Docker archives) and pull
// progress. Signatures live in the sub-package image/cosign.
//
// It imports the standard library, internal/sys, zfs and its libraries
// (go-containerregistry, klauspost/compress, x/sys). It must not import the
// legion object model, the agent or the cluster: it defines its own small
// types (Platform, Login, PullOptions) that those adapt to.
package image
