package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// -f is repeatable, as kubectl's is: every manifest given is read (the
// last alone was before), standard input once; and an http(s) URL is
// fetched, as kubectl apply -f fetches one, an answer other than 200
// refused.
func TestManifestsOfSeveralFilesAndURLs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a := filepath.Join(dir, "a.yaml")
	if err := os.WriteFile(a, []byte("apiVersion: legion/v1\nkind: Config\nmetadata: {name: from-file}\nspec: {text: x}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/web.yaml" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte("apiVersion: legion/v1\nkind: Config\nmetadata: {name: from-url}\nspec: {text: y}\n"))
	}))
	t.Cleanup(srv.Close)

	out, err := runLegion(t, "apiVersion: legion/v1\nkind: Config\nmetadata: {name: from-stdin}\nspec: {text: z}\n",
		"validate", "-f", a, "-f", srv.URL+"/web.yaml", "-f", "-")
	if err != nil {
		t.Fatalf("validate -f FILE -f URL -f -: %v\n%s", err, out)
	}
	for _, want := range []string{"name: from-file", "name: from-url", "name: from-stdin"} {
		if !strings.Contains(out, want) {
			t.Errorf("validate of three -f lacks %q:\n%s", want, out)
		}
	}
	if _, err := runLegion(t, "", "validate", "-f", srv.URL+"/nothere.yaml"); err == nil || !strings.Contains(err.Error(), "/nothere.yaml: the server answered 404 Not Found") {
		t.Errorf("validate -f of a URL answering 404: %v", err)
	}
	if _, err := runLegion(t, "", "validate", "-f", "-", "-f", "-"); err == nil || !strings.Contains(err.Error(), "standard input is read once") {
		t.Errorf("validate -f - -f -: %v", err)
	}
}
