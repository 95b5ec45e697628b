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

// The leader's resolver, asking the registry itself (no image store),
// pins each tag and checks the image against the image policies: a signed
// image is recorded verified with its key, an unsigned one under enforce
// holds the pod with the reason.
func TestResolverChecksImagePolicies(t *testing.T) {
	t.Parallel()
	reg := testimage.NewRegistry(t)
	host := reg.Host()
	push := func(repo string) string {
		d, err := testimage.PushRandom(context.Background(), reg.Ref(repo, "1"), 128)
		if err != nil {
			t.Fatal(err)
		}
		return d.String()
	}
	signedDigest := push("shop/signed")
	push("shop/unsigned")
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	client := &image.Registry{}
	pinned, err := image.ParseReference(host + "/shop/signed@" + signedDigest)
	if err != nil {
		t.Fatal(err)
	}
	if err := cosign.Sign(ctx, client, pinned, key, nil); err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKIXPublicKey(&key.PublicKey)
	pubPEM := string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	fingerprint, _ := cosign.Fingerprint(&key.PublicKey)

	st := dispatchertest.OpenStore(t)
	service := func(name string) *legion.Service {
		o, _, err := st.Get(legion.KindService, "default", name)
		if err != nil {
			t.Fatal(err)
		}
		return o.(*legion.Service)
	}
	policy, _ := legion.New(legion.KindImagePolicy)
	policy.GetMetadata().Name = "shop"
	policy.(*legion.ImagePolicy).Spec = legion.ImagePolicySpec{Repositories: []string{host + "/shop/**"}, Keys: []string{pubPEM}}
	if err := legion.Admit(policy); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Put(ctx, policy, store.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	objs, err := legion.ParseManifest("t", []byte(`apiVersion: legion/v1
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
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if _, _, err := st.Put(ctx, o, store.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	res := &controller.ImageResolver{Store: st, Resolve: Resolve(client), Check: Check(st, client)}
	if failed := res.Pass(ctx); !failed {
		t.Fatal("the unsigned image did not fail the pass")
	}
	good := service("good").Status.Images
	if good == nil || good.Message != "" || good.Verified[host+"/shop/signed:1"] != (legion.VerifiedImage{Digest: signedDigest, Key: fingerprint}) {
		t.Fatalf("signed image status %+v, want verified by %s", good, fingerprint)
	}
	if d := good.Digests[host+"/shop/signed:1"]; d != signedDigest {
		t.Fatalf("tag pinned to %q, want the registry's %s", d, signedDigest)
	}
	bad := service("bad").Status.Images
	if bad == nil || !strings.Contains(bad.Message, "held by image policy") {
		t.Fatalf("unsigned image status %+v, want held", bad)
	}
	// Under warn the unsigned image runs with a warning.
	policy.(*legion.ImagePolicy).Spec.Mode = legion.PolicyWarn
	if _, _, err := st.Put(ctx, policy, store.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if failed := res.Pass(ctx); failed {
		t.Fatal("the pass failed under warn")
	}
	bad = service("bad").Status.Images
	if bad == nil || bad.Message != "" || bad.Warning == "" {
		t.Fatalf("under warn: %+v, want a warning and no hold", bad)
	}
}
