package legion

import (
	"strings"
	"testing"
)

// spec.dependsOn and host path volumes: each check with a spec that
// passes and one refused with the expected error.
func TestDependsOnAndHostPathAdmission(t *testing.T) {
	t.Parallel()
	ctr := "containers: [{name: web, image: n, volumeMounts: [{name: d, path: /data}]}]"
	host := func(p string) string { return svcSpec("", ctr+", volumes: [{name: d, hostPath: {path: '"+p+"'}}]") }
	cases := []struct {
		name, good, bad, want string
	}{
		{"dependency is a name", svcSpec("dependsOn: [{service: db}], ", "containers: [{name: web, image: n}]"),
			svcSpec("dependsOn: [{service: DB}], ", "containers: [{name: web, image: n}]"), "spec.dependsOn[0].service"},
		{"not itself", svcSpec("dependsOn: [{service: db}], ", "containers: [{name: web, image: n}]"),
			svcSpec("dependsOn: [{service: x}], ", "containers: [{name: web, image: n}]"), `spec.dependsOn[0].service: "x" is this service`},
		{"once each", svcSpec("dependsOn: [{service: db}, {service: cache, condition: ready}], ", "containers: [{name: web, image: n}]"),
			svcSpec("dependsOn: [{service: db}, {service: db, condition: ready}], ", "containers: [{name: web, image: n}]"), `spec.dependsOn[1].service: "db" is already spec.dependsOn[0]`},
		{"condition", svcSpec("dependsOn: [{service: db, condition: completed}], ", "containers: [{name: web, image: n}]"),
			svcSpec("dependsOn: [{service: db, condition: healthy}], ", "containers: [{name: web, image: n}]"), `spec.dependsOn[0].condition: "healthy" is not valid: expected one of started, ready, completed`},
		{"host path absolute", host("/srv/data"), host("srv/data"), `spec.pod.volumes[0].hostPath.path: "srv/data" is not an absolute path`},
		{"host path clean", host("/srv/data"), host("/srv/../etc"), `spec.pod.volumes[0].hostPath.path: "/srv/../etc" is not clean: write /etc`},
		{"host path not the root", host("/srv"), host("/"), "spec.pod.volumes[0].hostPath.path: the node's root cannot be mounted"},
		{"host path is one source", host("/srv"), svcSpec("", ctr+", volumes: [{name: d, hostPath: {path: /srv}, tmpfs: {}}]"),
			"spec.pod.volumes[0]: expected exactly one of volume, claim, tmpfs or hostPath, got 2"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if errs := errorsOf(t, manifest("Service", "x", c.good)); errs != nil {
				t.Errorf("the passing case was refused: %q", errs)
			}
			if errs := errorsOf(t, manifest("Service", "x", c.bad)); !hasError(errs, c.want) {
				t.Errorf("want an error containing %q, got %q", c.want, errs)
			}
		})
	}
	// The default condition is written out.
	objs, err := ParseManifest("t", []byte(manifest("Service", "x", svcSpec("dependsOn: [{service: db}], ", "containers: [{name: web, image: n}]"))))
	if err != nil {
		t.Fatal(err)
	}
	if got := objs[0].(*Service).Spec.DependsOn[0].Condition; got != DependStarted {
		t.Errorf("default condition %q, want %q", got, DependStarted)
	}
}

// A host path volume needs hostPath in the namespace's allow-list, and the
// refusal says who can give it.
func TestHostPathNeedsTheNamespacesAllowance(t *testing.T) {
	t.Parallel()
	pod := &PodSpec{Containers: []Container{{Name: "web", Image: "n"}},
		Volumes: []PodVolume{{Name: "t", Tmpfs: &TmpfsVolume{}}, {Name: "d", HostPath: &HostPathVolume{Path: "/srv"}}}}
	msg := NamespaceSecurity{}.ExcessMessage("shop", pod, "spec.pod")
	for _, want := range []string{"not allowed in namespace shop", "spec.pod.volumes[1].hostPath: hostPath", "a cluster admin may add them to the Namespace's spec.security.allow"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	if ex := (NamespaceSecurity{Allow: []string{AllowHostPath}}).Excess(pod, "spec.pod"); len(ex) != 0 {
		t.Errorf("allowed namespace still refuses: %+v", ex)
	}
	ns := "apiVersion: legion/v1\nkind: Namespace\nmetadata: {name: shop}\nspec: {security: {allow: [hostPath]}}\n"
	if errs := errorsOf(t, ns); errs != nil {
		t.Errorf("a namespace allowing hostPath is refused: %q", errs)
	}
}
