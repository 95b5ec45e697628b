package compose

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/internal/golden"
)

// caseOptions reads a case directory: compose files (compose.yaml unless
// an options line files= lists them), the environment from env (KEY=VALUE
// lines) and options (stack=, namespace=, strict=true). Files the compose
// text names are read from the directory.
func caseOptions(t *testing.T, dir string) ([]File, Options) {
	t.Helper()
	// Relative bind mounts resolve against the directory the CLI would
	// give: a fixed one, so the golden files do not depend on the checkout.
	opts := Options{Stack: "app", Env: map[string]string{}, Dir: "/srv/compose/" + filepath.Base(dir)}
	names := []string{"compose.yaml"}
	for _, line := range readLines(t, filepath.Join(dir, "options")) {
		k, v, _ := strings.Cut(line, "=")
		switch k {
		case "stack":
			opts.Stack = v
		case "namespace":
			opts.Namespace = v
		case "strict":
			opts.Strict = v == "true"
		case "files":
			names = strings.Split(v, ",")
		case "profiles":
			opts.Profiles = strings.Split(v, ",")
		default:
			t.Fatalf("%s/options: unknown option %q", dir, k)
		}
	}
	for _, line := range readLines(t, filepath.Join(dir, "env")) {
		k, v, _ := strings.Cut(line, "=")
		opts.Env[k] = v
	}
	opts.ReadFile = func(name string) ([]byte, error) {
		if filepath.IsAbs(name) || strings.Contains(name, "..") {
			return nil, errors.New("test cases read only files of their directory")
		}
		return os.ReadFile(filepath.Join(dir, name))
	}
	var files []File
	for _, n := range names {
		data, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, File{Name: n, Content: data})
	}
	return files, opts
}

func readLines(t *testing.T, path string) []string {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}

// render is a case's outcome as the golden files hold it: the warnings,
// then the error or the objects as native YAML.
func render(t *testing.T, res *Result, err error) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("# warnings\n")
	if res != nil {
		for _, w := range res.Warnings {
			if !w.Unsupported {
				b.WriteString("note: ")
			}
			b.WriteString(w.String() + "\n")
		}
	}
	if err != nil {
		b.WriteString("# error\n" + err.Error() + "\n")
		return b.String()
	}
	out, rerr := Render(res.Objects)
	if rerr != nil {
		t.Fatal(rerr)
	}
	b.WriteString("# objects\n")
	b.Write(out)
	ns, rerr := legion.MarshalYAML(res.Namespace)
	if rerr != nil {
		t.Fatal(rerr)
	}
	b.WriteString("# namespace stack deploy makes when missing\n")
	b.Write(ns)
	return b.String()
}

func caseDirs(t *testing.T, root string) []string {
	t.Helper()
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, e := range entries {
		if e.IsDir() {
			dirs = append(dirs, filepath.Join(root, e.Name()))
		}
	}
	if len(dirs) == 0 {
		t.Fatalf("no cases under %s", root)
	}
	return dirs
}

// checkObjects asserts what every successful conversion must give: objects
// that pass admission as they are, all labelled with the stack, in the
// namespace, and a rendering that legion.ParseManifest reads back to the
// same objects.
func checkObjects(t *testing.T, opts Options, objs []legion.Object) {
	t.Helper()
	ns := opts.Namespace
	if ns == "" {
		ns = opts.Stack
	}
	for _, o := range objs {
		m := o.GetMetadata()
		if m.Labels[StackLabel] != opts.Stack {
			t.Errorf("%s %s: label %s = %q, want %q", o.GetKind(), m.Name, StackLabel, m.Labels[StackLabel], opts.Stack)
		}
		if m.Namespace != ns {
			t.Errorf("%s %s: namespace %q, want %q", o.GetKind(), m.Name, m.Namespace, ns)
		}
		again := legion.Clone(o)
		if err := legion.Admit(again); err != nil {
			t.Errorf("%s %s does not pass admission again: %v", o.GetKind(), m.Name, err)
		} else if diff := cmp.Diff(o, again); diff != "" {
			t.Errorf("%s %s changes when admitted again (-converted +admitted):\n%s", o.GetKind(), m.Name, diff)
		}
	}
	text, err := Render(objs)
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := legion.ParseManifest("convert", text)
	if err != nil {
		t.Fatalf("ParseManifest refuses convert's output: %v", err)
	}
	if diff := cmp.Diff(objs, parsed); diff != "" {
		t.Errorf("ParseManifest reads convert's output differently (-converted +parsed):\n%s", diff)
	}
}

// TestGolden converts each construct under testdata/golden and compares
// warnings and objects (or the error) with its want.golden.
func TestGolden(t *testing.T) {
	t.Parallel()
	for _, dir := range caseDirs(t, "testdata/golden") {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			files, opts := caseOptions(t, dir)
			res, err := Convert(context.Background(), files, opts)
			if err == nil {
				checkObjects(t, opts, res.Objects)
			}
			var se *StrictError
			if opts.Strict && err != nil && !errors.As(err, &se) && !strings.HasSuffix(dir, "-error") {
				t.Errorf("strict conversion failed with %T, want *StrictError: %v", err, err)
			}
			golden.Check(t, filepath.Join(dir, "want.golden"), render(t, res, err))
		})
	}
}

// corpusWant is what each compose file of testdata/corpus must give:
// converted with this many Services, or refused with an error holding
// refusal (naming the key).
var corpusWant = map[string]struct {
	services int
	refusal  string
}{
	"airflow":                       {services: 6}, // flower is in a profile
	"awesome-react-express-mongodb": {refusal: "services.backend.image: missing: Legion deploys images and builds none; build this one"},
	"ci-runners-override":           {services: 2},
	"django-postgres-redis":         {services: 4},
	"docker-elk":                    {refusal: "services.elasticsearch.image: missing: Legion deploys images and builds none; build this one"},
	"dockprom":                      {services: 7},
	"elk":                           {services: 3},
	"gitea-external-secrets":        {services: 2},
	"home-assistant":                {services: 2},
	"immich":                        {services: 4},
	"jaeger-hotrod":                 {services: 2},
	"kafka-zookeeper":               {services: 4},
	"keycloak-postgres":             {services: 2},
	"loki-promtail":                 {services: 2},
	"mastodon":                      {services: 5},
	"matomo-mariadb":                {services: 3},
	"microservices-x-legion":        {services: 4},
	"minio-stateful":                {services: 1},
	"mongo-express-node":            {services: 3},
	"monitoring":                    {services: 3},
	"n8n-postgres":                  {services: 2},
	"nats-dnsrr":                    {services: 2},
	"nextcloud-anchors":             {services: 4},
	"nginx-tls-proxy":               {services: 2},
	"plausible":                     {services: 3},
	"portainer-agent":               {services: 2},
	"rabbitmq-workers":              {services: 3},
	"redash":                        {services: 8},
	"traefik-whoami":                {services: 2},
	"uptime-monitor-netraw":         {services: 2},
	"vaultwarden-caddy":             {services: 2},
	"voting-app":                    {services: 6},
	"wordpress-mysql":               {services: 2},
}

// TestCorpus converts compose files of public projects: each converts to
// objects that pass admission, with the Services and warnings expected,
// or is refused with the expected error.
func TestCorpus(t *testing.T) {
	t.Parallel()
	dirs := caseDirs(t, "testdata/corpus")
	if len(dirs) < 30 {
		t.Errorf("the corpus has %d files, want at least 30", len(dirs))
	}
	if len(dirs) != len(corpusWant) {
		t.Errorf("the corpus has %d files and corpusWant %d entries: keep them in step", len(dirs), len(corpusWant))
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			want, ok := corpusWant[filepath.Base(dir)]
			if !ok {
				t.Fatal("no expectation in corpusWant")
			}
			files, opts := caseOptions(t, dir)
			res, err := Convert(context.Background(), files, opts)
			if want.refusal != "" {
				if err == nil || !strings.Contains(err.Error(), want.refusal) {
					t.Fatalf("conversion: got %v, want a refusal containing %q", err, want.refusal)
				}
			} else {
				if err != nil {
					t.Fatalf("conversion failed: %v", err)
				}
				services := 0
				for _, o := range res.Objects {
					if o.GetKind() == legion.KindService {
						services++
					}
				}
				if services != want.services {
					t.Errorf("%d Services converted, want %d", services, want.services)
				}
				checkObjects(t, opts, res.Objects)
			}
			golden.Check(t, filepath.Join(dir, "want.golden"), render(t, res, err))
		})
	}
}
