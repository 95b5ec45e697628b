package cosign

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/legionbsd/legion/image"
	"github.com/legionbsd/legion/image/internal/regtest"
)

func startRegistry(t *testing.T) string {
	t.Helper()
	s := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(s.Close)
	return strings.TrimPrefix(s.URL, "http://")
}

func push(t *testing.T, ref string, img v1.Image) image.Reference {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img); err != nil {
		t.Fatal(err)
	}
	d, _ := img.Digest()
	out, err := image.ParseReference(r.Context().Name() + "@" + d.String())
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func newKey(t *testing.T) (*ecdsa.PrivateKey, []byte) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKIXPublicKey(&k.PublicKey)
	return k, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

func randomImage(t *testing.T) v1.Image {
	t.Helper()
	img, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func TestSignVerifyAndCopyRefused(t *testing.T) {
	ctx := context.Background()
	host := startRegistry(t)
	reg := &image.Registry{}
	key, pub := newKey(t)
	img := randomImage(t)
	ref := push(t, host+"/team/app:1", img)
	if err := Sign(ctx, reg, ref, key, nil); err != nil {
		t.Fatal(err)
	}
	pk, err := ParsePublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Verify(ctx, reg, ref, []*ecdsa.PublicKey{pk}, nil)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKIXPublicKey(&key.PublicKey)
	sum := sha256.Sum256(der)
	want := Result{Digest: ref.Digest(), KeyFingerprint: "sha256:" + hex.EncodeToString(sum[:])}
	if d := cmp.Diff(want, res); d != "" {
		t.Fatalf("result (-want +got):\n%s", d)
	}
	// The signature tag is where cosign puts it.
	tag, _ := SignatureTag(ref)
	if got := tag.TagStr(); got != strings.Replace(ref.Digest(), ":", "-", 1)+".sig" {
		t.Fatalf("signature tag %s", got)
	}

	// A copy in another repository, with its signature copied too, fails:
	// the payload names the first repository.
	mirror := push(t, host+"/mirror/app:1", img)
	sigImg, err := remote.Image(tag)
	if err != nil {
		t.Fatal(err)
	}
	mtag, _ := SignatureTag(mirror)
	if err := remote.Write(mtag, sigImg); err != nil {
		t.Fatal(err)
	}
	_, err = Verify(ctx, reg, mirror, []*ecdsa.PublicKey{pk}, nil)
	if !errors.Is(err, ErrBadSignature) || !strings.Contains(err.Error(), "names repository "+host+"/team/app") {
		t.Fatalf("mirror: got %v; want a refusal naming the signed repository", err)
	}
	// Another key does not verify it.
	_, other := newKey(t)
	opk, _ := ParsePublicKey(other)
	if _, err := Verify(ctx, reg, ref, []*ecdsa.PublicKey{opk}, nil); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("other key: got %v; want ErrBadSignature", err)
	}
	// A second signature with another key is added beside the first.
	key2, pub2 := newKey(t)
	if err := Sign(ctx, reg, ref, key2, nil); err != nil {
		t.Fatal(err)
	}
	pk2, _ := ParsePublicKey(pub2)
	for _, k := range []*ecdsa.PublicKey{pk, pk2} {
		if _, err := Verify(ctx, reg, ref, []*ecdsa.PublicKey{k}, nil); err != nil {
			t.Fatalf("after a second signature: %v", err)
		}
	}
}

func TestCheckEnforceAndWarn(t *testing.T) {
	ctx := context.Background()
	host := startRegistry(t)
	reg := &image.Registry{}
	key, pub := newKey(t)
	signed := push(t, host+"/prod/api:1", randomImage(t))
	if err := Sign(ctx, reg, signed, key, nil); err != nil {
		t.Fatal(err)
	}
	unsigned := push(t, host+"/prod/worker:1", randomImage(t))
	free := push(t, host+"/dev/tool:1", randomImage(t))
	enforce := Policy{Name: "prod", Patterns: []string{host + "/prod/*"}, Keys: [][]byte{pub}, Mode: Enforce}
	warn := Policy{Name: "prod-warn", Patterns: []string{host + "/prod/**"}, Keys: [][]byte{pub}, Mode: Warn}
	for _, p := range []Policy{enforce, warn} {
		if err := p.Validate(); err != nil {
			t.Fatal(err)
		}
	}

	d, err := Check(ctx, reg, []Policy{enforce}, signed, nil)
	if err != nil || d.Verified == nil || d.Verified.Digest != signed.Digest() {
		t.Fatalf("signed under enforce: %+v, %v", d, err)
	}
	d, err = Check(ctx, reg, []Policy{enforce}, unsigned, nil)
	if !errors.Is(err, ErrUnsigned) || !d.Covered || d.Verified != nil {
		t.Fatalf("unsigned under enforce: %+v, %v; want ErrUnsigned", d, err)
	}
	d, err = Check(ctx, reg, []Policy{warn}, unsigned, nil)
	if err != nil || len(d.Warnings) != 1 || !strings.Contains(d.Warnings[0], "not signed") {
		t.Fatalf("unsigned under warn: %+v, %v; want one warning", d, err)
	}
	d, err = Check(ctx, reg, []Policy{enforce, warn}, free, nil)
	if err != nil || d.Covered {
		t.Fatalf("uncovered image: %+v, %v; want not covered", d, err)
	}
	// The registry down: unreadable, not unsigned.
	down := push(t, host+"/prod/gone:1", randomImage(t))
	downRef, _ := image.ParseReference("127.0.0.1:1/prod/gone@" + down.Digest())
	downPolicy := Policy{Name: "down", Patterns: []string{"127.0.0.1:1/**"}, Keys: [][]byte{pub}}
	if _, err := Check(ctx, reg, []Policy{downPolicy}, downRef, nil); !errors.Is(err, ErrUnreadable) {
		t.Fatalf("registry down: %v; want ErrUnreadable", err)
	}
	if _, err := Check(ctx, reg, []Policy{enforce}, mustRef(t, host+"/prod/api:1"), nil); err == nil {
		t.Fatal("a tag was checked; want a digest")
	}
}

func mustRef(t *testing.T, s string) image.Reference {
	r, err := image.ParseReference(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestMatch(t *testing.T) {
	cases := []struct {
		pattern, repo string
		want          bool
	}{
		{"docker.io/library/*", "docker.io/library/nginx", true},
		{"docker.io/library/*", "docker.io/library/a/b", false},
		{"docker.io/library/*", "ghcr.io/library/nginx", false},
		{"docker.io/library/ng*x", "docker.io/library/nginx", true},
		{"docker.io/library/ng*x", "docker.io/library/nginz", false},
		{"ghcr.io/org/**", "ghcr.io/org/a/b/c", true},
		{"ghcr.io/org/**", "ghcr.io/org", true},
		{"ghcr.io/**/app", "ghcr.io/app", true},
		{"ghcr.io/**/app", "ghcr.io/x/y/app", true},
		{"ghcr.io/**/app", "ghcr.io/x/y/app2", false},
		{"ghcr.io/org/app", "ghcr.io/org/app", true},
		{"ghcr.io/org/app", "ghcr.io/org/app/sub", false},
		{"registry.local:5000/a/*", "registry.local:5000/a/b", true},
		{"registry.local:5000/a/*", "registry.local/a/b", false},
	}
	for _, c := range cases {
		if got := Match(c.pattern, c.repo); got != c.want {
			t.Errorf("Match(%q, %q) = %v; want %v", c.pattern, c.repo, got, c.want)
		}
	}
}

func TestValidate(t *testing.T) {
	_, pub := newKey(t)
	rsaPEM := []byte("-----BEGIN PUBLIC KEY-----\nnot a key\n-----END PUBLIC KEY-----\n")
	cases := []struct {
		p    Policy
		want string
	}{
		{Policy{Name: "a", Patterns: []string{"library/*"}, Keys: [][]byte{pub}}, "is no registry"},
		{Policy{Name: "a", Patterns: []string{"*.io/x"}, Keys: [][]byte{pub}}, "without wildcards"},
		{Policy{Name: "a", Patterns: []string{"docker.io/x:1"}, Keys: [][]byte{pub}}, "tag"},
		{Policy{Name: "a", Patterns: []string{"docker.io/x@sha256:00"}, Keys: [][]byte{pub}}, "digest"},
		{Policy{Name: "a", Patterns: []string{"docker.io/a**"}, Keys: [][]byte{pub}}, "whole segment"},
		{Policy{Name: "a", Patterns: []string{"docker.io/x"}, Keys: [][]byte{rsaPEM}}, "keys[0]"},
		{Policy{Name: "a", Patterns: []string{"docker.io/x"}, Keys: [][]byte{pub}, Mode: "audit"}, "mode"},
		{Policy{Name: "a", Patterns: []string{"docker.io/x", "localhost/y/**"}, Keys: [][]byte{pub}}, ""},
	}
	for _, c := range cases {
		err := c.p.Validate()
		if c.want == "" {
			if err != nil {
				t.Errorf("%v: %v", c.p.Patterns, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: got %v; want %q", c.p.Patterns, err, c.want)
		}
	}
}

func TestPayloadHubNames(t *testing.T) {
	d := "sha256:" + strings.Repeat("ab", 32)
	ref := mustRef(t, "nginx@"+d)
	body := func(repo, digest, typ string) []byte {
		return []byte(`{"critical":{"identity":{"docker-reference":"` + repo + `"},"image":{"docker-manifest-digest":"` + digest + `"},"type":"` + typ + `"},"optional":null}`)
	}
	typ := "cosign container image signature"
	cases := []struct {
		body []byte
		want string
	}{
		{body("index.docker.io/library/nginx", d, typ), ""},
		{body("docker.io/library/nginx", d, typ), ""},
		{body("nginx", d, typ), ""},
		{body("docker.io/library/redis", d, typ), "names repository docker.io/library/redis"},
		{body("docker.io/library/nginx", "sha256:"+strings.Repeat("cd", 32), typ), "names digest"},
		{body("docker.io/library/nginx", d, "atomic container signature"), "payload type"},
	}
	for _, c := range cases {
		err := checkPayload(c.body, ref)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: got %v; want %q", c.body, err, c.want)
		}
	}
}

func TestSignVerifyOnDistributionRegistry(t *testing.T) {
	ctx := context.Background()
	host := regtest.Distribution(t)
	reg := &image.Registry{}
	key, pub := newKey(t)
	ref := push(t, host+"/signed/app:1", randomImage(t))
	pol := Policy{Name: "p", Patterns: []string{host + "/signed/*"}, Keys: [][]byte{pub}}
	if _, err := Check(ctx, reg, []Policy{pol}, ref, nil); !errors.Is(err, ErrUnsigned) {
		t.Fatalf("before signing: %v; want ErrUnsigned", err)
	}
	if err := Sign(ctx, reg, ref, key, nil); err != nil {
		t.Fatal(err)
	}
	d, err := Check(ctx, reg, []Policy{pol}, ref, nil)
	if err != nil || d.Verified == nil || d.Verified.Digest != ref.Digest() {
		t.Fatalf("after signing: %+v, %v", d, err)
	}
}

func TestSignedIndexVerifiedByIndexDigest(t *testing.T) {
	ctx := context.Background()
	host := startRegistry(t)
	reg := &image.Registry{}
	key, pub := newKey(t)
	idx, err := random.Index(128, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := name.ParseReference(host + "/multi/app:1")
	if err := remote.WriteIndex(r, idx); err != nil {
		t.Fatal(err)
	}
	d, _ := idx.Digest()
	ref := mustRef(t, host+"/multi/app@"+d.String())
	if err := Sign(ctx, reg, ref, key, nil); err != nil {
		t.Fatal(err)
	}
	pk, _ := ParsePublicKey(pub)
	res, err := Verify(ctx, reg, ref, []*ecdsa.PublicKey{pk}, nil)
	if err != nil || res.Digest != d.String() {
		t.Fatalf("Verify = %+v, %v", res, err)
	}
	// A platform manifest of it is not what was signed.
	im, _ := idx.IndexManifest()
	child := mustRef(t, host+"/multi/app@"+im.Manifests[0].Digest.String())
	if _, err := Verify(ctx, reg, child, []*ecdsa.PublicKey{pk}, nil); !errors.Is(err, ErrUnsigned) {
		t.Fatalf("child manifest: %v; want ErrUnsigned", err)
	}
}
