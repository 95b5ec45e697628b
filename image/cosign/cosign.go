package cosign

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/legionbsd/legion/image"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/payload"
)

const (
	// SignatureAnnotation holds a layer's base64 DER signature.
	SignatureAnnotation = "dev.cosignproject.cosign/signature"
	// PayloadMediaType is a signature layer's media type.
	PayloadMediaType types.MediaType = "application/vnd.dev.cosign.simplesigning.v1+json"
	// maxPayload bounds what is read of one payload.
	maxPayload = 1 << 20
)

// Errors a check fails with.
var (
	ErrUnsigned     = errors.New("image is not signed")
	ErrBadSignature = errors.New("no good signature")
	ErrUnreadable   = errors.New("signatures cannot be read")
)

// Result is a good signature: the digest it names and the key's
// fingerprint, recorded on the owner's status.
type Result struct {
	Digest         string `json:"digest"`
	KeyFingerprint string `json:"keyFingerprint"`
}

// Fingerprint is sha256: of a public key's DER SubjectPublicKeyInfo.
func Fingerprint(pub crypto.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(der)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// ParsePublicKey reads a PEM public key and accepts ECDSA P-256 only.
func ParsePublicKey(pemBytes []byte) (*ecdsa.PublicKey, error) {
	k, err := cryptoutils.UnmarshalPEMToPublicKey(pemBytes)
	if err != nil {
		return nil, fmt.Errorf("public key: %w", err)
	}
	ek, ok := k.(*ecdsa.PublicKey)
	if !ok || ek.Curve != elliptic.P256() {
		return nil, fmt.Errorf("public key: want ECDSA P-256, got %T", k)
	}
	return ek, nil
}

// SignatureTag is where cosign keeps an image's signatures:
// <repo>:sha256-<hex>.sig.
func SignatureTag(ref image.Reference) (name.Tag, error) {
	d := ref.Digest()
	if d == "" {
		return name.Tag{}, fmt.Errorf("signature of %s: want a reference by digest", ref)
	}
	return name.NewTag(ref.Name().Context().Name() + ":" + strings.Replace(d, ":", "-", 1) + ".sig")
}

// Sign signs an image by digest with a P-256 key and pushes the signature
// beside it, adding to the signatures already there (for tests and image
// build tools).
func Sign(ctx context.Context, reg *image.Registry, ref image.Reference, key *ecdsa.PrivateKey, login *image.Login) error {
	tag, err := SignatureTag(ref)
	if err != nil {
		return err
	}
	dig, ok := ref.Name().(name.Digest)
	if !ok {
		return fmt.Errorf("sign %s: want a reference by digest", ref)
	}
	body, err := json.Marshal(payload.Cosign{Image: dig})
	if err != nil {
		return err
	}
	signer, err := signature.LoadECDSASigner(key, crypto.SHA256)
	if err != nil {
		return err
	}
	sig, err := signer.SignMessage(bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("sign %s: %w", ref, err)
	}
	opts := reg.Options(ctx, login)
	var base v1.Image = mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	if existing, err := remote.Image(tag, opts...); err == nil {
		base = existing
	}
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:       static.NewLayer(body, PayloadMediaType),
		Annotations: map[string]string{SignatureAnnotation: base64.StdEncoding.EncodeToString(sig)},
	})
	if err != nil {
		return err
	}
	if err := remote.Write(tag, img, opts...); err != nil {
		return fmt.Errorf("push signature %s: %w", tag, err)
	}
	return nil
}

// Verify looks for a signature of ref (by digest) made by one of keys over
// a payload of the cosign type naming that digest and ref's repository.
func Verify(ctx context.Context, reg *image.Registry, ref image.Reference, keys []*ecdsa.PublicKey, login *image.Login) (Result, error) {
	tag, err := SignatureTag(ref)
	if err != nil {
		return Result{}, err
	}
	img, err := remote.Image(tag, reg.Options(ctx, login)...)
	if err != nil {
		if errors.Is(classify(err), image.ErrNotFound) {
			return Result{}, fmt.Errorf("%s: %w (no %s)", ref, ErrUnsigned, tag.TagStr())
		}
		return Result{}, fmt.Errorf("%s: %w: %v", ref, ErrUnreadable, err)
	}
	m, err := img.Manifest()
	if err != nil {
		return Result{}, fmt.Errorf("%s: %w: %v", ref, ErrUnreadable, err)
	}
	var why []string
	for i, l := range m.Layers {
		b64 := l.Annotations[SignatureAnnotation]
		if b64 == "" {
			continue
		}
		sig, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			why = append(why, fmt.Sprintf("layer %d: signature not base64", i))
			continue
		}
		layer, err := img.LayerByDigest(l.Digest)
		if err != nil {
			return Result{}, fmt.Errorf("%s: %w: %v", ref, ErrUnreadable, err)
		}
		body, err := readPayload(layer)
		if err != nil {
			return Result{}, fmt.Errorf("%s: %w: %v", ref, ErrUnreadable, err)
		}
		for _, k := range keys {
			v, err := signature.LoadECDSAVerifier(k, crypto.SHA256)
			if err != nil {
				return Result{}, err
			}
			if v.VerifySignature(bytes.NewReader(sig), bytes.NewReader(body)) != nil {
				continue
			}
			if err := checkPayload(body, ref); err != nil {
				why = append(why, fmt.Sprintf("layer %d: %v", i, err))
				continue
			}
			fp, err := Fingerprint(k)
			if err != nil {
				return Result{}, err
			}
			return Result{Digest: ref.Digest(), KeyFingerprint: fp}, nil
		}
		if len(why) == 0 || !strings.HasPrefix(why[len(why)-1], fmt.Sprintf("layer %d:", i)) {
			why = append(why, fmt.Sprintf("layer %d: signed by none of the keys", i))
		}
	}
	if len(why) == 0 {
		return Result{}, fmt.Errorf("%s: %w (%s holds no signature)", ref, ErrUnsigned, tag.TagStr())
	}
	return Result{}, fmt.Errorf("%s: %w: %s", ref, ErrBadSignature, strings.Join(why, "; "))
}

func readPayload(l v1.Layer) ([]byte, error) {
	rc, err := l.Compressed()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, maxPayload+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxPayload {
		return nil, fmt.Errorf("payload over %d bytes", maxPayload)
	}
	return b, nil
}

// checkPayload accepts a payload of the cosign type naming ref's digest
// and repository (index.docker.io read as docker.io).
func checkPayload(body []byte, ref image.Reference) error {
	var p payload.SimpleContainerImage
	if err := json.Unmarshal(body, &p); err != nil {
		return fmt.Errorf("payload: %w", err)
	}
	if p.Critical.Type != payload.CosignSignatureType {
		return fmt.Errorf("payload type %q, want %q", p.Critical.Type, payload.CosignSignatureType)
	}
	if p.Critical.Image.DockerManifestDigest != ref.Digest() {
		return fmt.Errorf("payload names digest %s, not %s", p.Critical.Image.DockerManifestDigest, ref.Digest())
	}
	named, err := image.ParseReference(p.Critical.Identity.DockerReference)
	if err != nil {
		return fmt.Errorf("payload docker-reference: %w", err)
	}
	if named.Repository() != ref.Repository() {
		return fmt.Errorf("payload names repository %s, not %s", named.Repository(), ref.Repository())
	}
	return nil
}
