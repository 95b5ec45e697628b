// Package testimage builds Legion's test images without the internet: it
// compiles the small HTTP server under ./server with the local Go toolchain
// (CGO_ENABLED=0, so the binary is static) and packs it as a single-layer
// OCI image with go-containerregistry, to write as an OCI layout or archive
// or to push to a registry (such as go-containerregistry's in-process one).
//
// ./mkimage writes the image as an OCI archive from the command line, for
// `legion image load` on a machine without the internet.
//
// It is for tests and development only. It imports go-containerregistry
// and the standard library, never Legion's own packages, so any test may
// use it. Building needs the source tree (the server's directory is found
// from this file's path) and the go command.
package testimage
