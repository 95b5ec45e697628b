// Package cosign makes and checks cosign "simple signing" signatures of
// images with a key pair (ECDSA P-256), as ImagePolicy needs (spec 6.1,
// Signatures): the signature is a layer of <repo>:sha256-<hex>.sig whose
// bytes are the payload (type "cosign container image signature", naming
// the digest and the repository) and whose annotation holds the base64 DER
// signature. Policies match repositories with * (within a segment) and **
// (any number of whole segments), in enforce or warn mode.
//
// It uses sigstore's signature and payload packages and the registry
// client of package image. It must not import the legion object model:
// Policy is its own small type the cluster adapts to. Not covered, as in
// the spec: cosign v3 bundles, the transparency log, keyless signing and
// encrypted private keys.
package cosign
