package leader

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"strings"
	"testing"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/controller"
	"github.com/legionbsd/legion/cluster/dispatcher/dispatchertest"
	"github.com/legionbsd/legion/cluster/store"
	"github.com/legionbsd/legion/image"
	"github.com/legionbsd/legion/image/cosign"
	"github.com/legionbsd/legion/internal/testimage"
)

// policyFixture is a registry holding shop/signed:1, signed, and
// shop/unsigned:1, and a store whose ImagePolicy shop enforces the key on
// shop/** of that registry and on patterns.
type policyFixture struct {
	host, signedDigest, fingerprint string
	client                          *image.Registry
	st                              *store.Store
	policy                          legion.Object
}

func newPolicyFixture(t *testing.T, patterns ...string) *policyFixture {
	t.Helper()
	reg := testimage.NewRegistry(t)
	f := &policyFixture{host: reg.Host(), client: &image.Registry{}}
	push := func(repo string) string {
		d, err := testimage.PushRandom(context.Background(), reg.Ref(repo, "1"), 128)
		if err != nil {
			t.Fatal(err)
		}
		return d.String()
	}
	f.signedDigest = push("shop/signed")
	push("shop/unsigned")
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pinned, err := image.ParseReference(f.host + "/shop/signed@" + f.signedDigest)
	if err != nil {
		t.Fatal(err)
	}
	if err := cosign.Sign(ctx, f.client, pinned, key, nil); err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKIXPublicKey(&key.PublicKey)
	pubPEM := string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	f.fingerprint, _ = cosign.Fingerprint(&key.PublicKey)

	f.st = dispatchertest.OpenStore(t)
	f.policy, _ = legion.New(legion.KindImagePolicy)
	f.policy.GetMetadata().Name = "shop"
	f.policy.(*legion.ImagePolicy).Spec = legion.ImagePolicySpec{Repositories: append([]string{f.host + "/shop/**"}, patterns...), Keys: []string{pubPEM}}
	f.setMode(t, legion.PolicyEnforce)
	return f
}

func (f *policyFixture) setMode(t *testing.T, mode legion.ImagePolicyMode) {
	t.Helper()
	f.policy.(*legion.ImagePolicy).Spec.Mode = mode
	if err := legion.Admit(f.policy); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.st.Put(context.Background(), f.policy, store.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (f *policyFixture) apply(t *testing.T, manifest string) {
	t.Helper()
	objs, err := legion.ParseManifest("t", []byte(manifest))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if _, _, err := f.st.Put(context.Background(), o, store.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

func (f *policyFixture) images(t *testing.T, name string) *legion.ImagesStatus {
	t.Helper()
	o, _, err := f.st.Get(legion.KindService, "default", name)
	if err != nil {
		t.Fatal(err)
	}
	return o.(*legion.Service).Status.Images
}

func (f *policyFixture) resolver() *controller.ImageResolver {
	return &controller.ImageResolver{Store: f.st, Resolve: Resolve(f.client), Check: Check(f.st, f.client), Covers: Covers(f.st)}
}

// The leader's resolver, asking the registry itself (no image store),
// pins each tag and checks the image against the image policies: a signed
// image is recorded verified with its key, an unsigned one under enforce
// holds the pod with the reason.
func TestResolverChecksImagePolicies(t *testing.T) {
	t.Parallel()
	f := newPolicyFixture(t)
	host := f.host
	f.apply(t, `apiVersion: legion/v1
kind: Service
metadata: {name: good}
spec:
  pod: {containers: [{name: c, image: `+host+`/shop/signed:1}]}
---
apiVersion: legion/v1
kind: Service
metadata: {name: bad}
spec:
  pod: {containers: [{name: c, image: `+host+`/shop/unsigned:1}]}
`)
	ctx := context.Background()
	res := f.resolver()
	if failed := res.Pass(ctx); !failed {
		t.Fatal("the unsigned image did not fail the pass")
	}
	good := f.images(t, "good")
	if good == nil || good.Message != "" || good.Verified[host+"/shop/signed:1"] != (legion.VerifiedImage{Digest: f.signedDigest, Key: f.fingerprint}) {
		t.Fatalf("signed image status %+v, want verified by %s", good, f.fingerprint)
	}
	if d := good.Digests[host+"/shop/signed:1"]; d != f.signedDigest {
		t.Fatalf("tag pinned to %q, want the registry's %s", d, f.signedDigest)
	}
	bad := f.images(t, "bad")
	if bad == nil || !strings.Contains(bad.Message, "held by image policy") {
		t.Fatalf("unsigned image status %+v, want held", bad)
	}
	// Under warn the unsigned image runs with a warning.
	f.setMode(t, legion.PolicyWarn)
	if failed := res.Pass(ctx); failed {
		t.Fatal("the pass failed under warn")
	}
	bad = f.images(t, "bad")
	if bad == nil || bad.Message != "" || bad.Warning == "" {
		t.Fatalf("under warn: %+v, want a warning and no hold", bad)
	}
}

// An image its node never pulls (pullPolicy never, a localhost/ name) is
// no way round a policy covering it: never-pulled images are checked at
// their registry, and under enforce pinned to the digest checked, which
// the node must hold; a local image, which no registry holds, is held.
// Under warn both run, with a warning and nothing pinned.
func TestResolverChecksImagesTheNodeNeverPulls(t *testing.T) {
	t.Parallel()
	f := newPolicyFixture(t, "localhost/shop")
	host := f.host
	f.apply(t, `apiVersion: legion/v1
kind: Service
metadata: {name: signed}
spec:
  pod: {containers: [{name: c, image: `+host+`/shop/signed:1, pullPolicy: never}]}
---
apiVersion: legion/v1
kind: Service
metadata: {name: unsigned}
spec:
  pod: {containers: [{name: c, image: `+host+`/shop/unsigned:1, pullPolicy: never}]}
---
apiVersion: legion/v1
kind: Service
metadata: {name: local}
spec:
  pod: {containers: [{name: c, image: localhost/shop:1}]}
---
apiVersion: legion/v1
kind: Service
metadata: {name: free}
spec:
  pod: {containers: [{name: c, image: localhost/other:1}, {name: d, image: `+host+`/elsewhere:1, pullPolicy: never}]}
`)
	ctx := context.Background()
	res := f.resolver()
	res.Pass(ctx)
	signed := f.images(t, "signed")
	if signed == nil || signed.Message != "" || signed.Digests[host+"/shop/signed:1"] != f.signedDigest ||
		signed.Verified[host+"/shop/signed:1"].Key != f.fingerprint {
		t.Fatalf("a signed image never pulled: %+v, want it verified and pinned to %s", signed, f.signedDigest)
	}
	if im := f.images(t, "unsigned"); im == nil || !strings.Contains(im.Message, "held by image policy") {
		t.Fatalf("an unsigned image never pulled: %+v, want it held", im)
	}
	const noRegistry = "localhost/shop:1: held by image policy shop: a localhost/ image is in no registry, so no signature of it can be checked"
	if im := f.images(t, "local"); im == nil || !strings.Contains(im.Message, noRegistry) {
		t.Fatalf("a local image under the policy: %+v, want %q", im, noRegistry)
	}
	if im := f.images(t, "free"); im == nil || im.Message != "" || im.Warning != "" || len(im.Digests) != 0 {
		t.Fatalf("images no policy covers: %+v, want them passed, unpinned", im)
	}

	f.setMode(t, legion.PolicyWarn)
	if failed := res.Pass(ctx); failed {
		t.Fatal("the pass failed under warn")
	}
	for _, name := range []string{"unsigned", "local"} {
		im := f.images(t, name)
		if im == nil || im.Message != "" || im.Warning == "" || len(im.Digests) != 0 {
			t.Fatalf("%s under warn: %+v, want a warning, no hold and nothing pinned", name, im)
		}
	}
}
