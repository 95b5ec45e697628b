package compose

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/template"
	"github.com/compose-spec/compose-go/v2/types"
)

// load parses, interpolates, merges and validates the files with
// compose-go. Everything that would make it touch the file system or a
// remote (include, env_file and label_file resolution, relative path
// resolution) is switched off: env files, and the files extends names,
// are read through Options.ReadFile, and include is warned about.
func (c *converter) load(ctx context.Context, files []File) (project *types.Project, err error) {
	// compose-go is not ours: a panic on some input it does not expect
	// must not take the CLI down, and is the file's error to report.
	defer func() {
		if r := recover(); r != nil {
			project, err = nil, fmt.Errorf("compose: the file could not be read (loader failure: %v)", r)
		}
	}()
	env := maps.Clone(c.opts.Env) // compose-go adds COMPOSE_PROJECT_NAME to it
	if env == nil {
		env = map[string]string{}
	}
	details := types.ConfigDetails{WorkingDir: ".", Environment: env}
	for _, f := range files {
		if f.Content == nil {
			f.Content = []byte{} // never let the loader read the file itself
		}
		details.ConfigFiles = append(details.ConfigFiles, types.ConfigFile{Filename: f.Name, Content: f.Content})
	}
	ext := &extendsFiles{read: c.opts.ReadFile}
	defer ext.close()
	project, err = loader.LoadWithContext(ctx, details, func(o *loader.Options) {
		o.SetProjectName(c.opts.Stack, true)
		o.SkipInclude = true
		o.SkipResolveEnvironment = true
		o.SkipResolveLabels = true
		o.ResolvePaths = false
		o.ResourceLoaders = []loader.ResourceLoader{ext}
		o.Profiles = c.opts.Profiles
		o.Interpolate.Substitute = quietSubstitute
	})
	if err != nil {
		return nil, fmt.Errorf("compose: %w", err)
	}
	for _, key := range sortedKeys(project.DisabledServices) {
		c.note("services."+key, "left out: none of its profiles (%s) is active (--profile)", strings.Join(project.DisabledServices[key].Profiles, ", "))
	}
	return project, nil
}

// extendsFiles gives compose-go the files extends names, read through
// Options.ReadFile: compose-go reads them from local paths, so each is
// copied into a directory of its own removed after loading.
type extendsFiles struct {
	read func(string) ([]byte, error)
	dir  string
	n    int
}

func (e *extendsFiles) Accept(string) bool { return true }

func (e *extendsFiles) Load(_ context.Context, name string) (string, error) {
	if e.read == nil {
		return "", fmt.Errorf("extends: %s: reading files is not available here", name)
	}
	data, err := e.read(name)
	if err != nil {
		return "", fmt.Errorf("extends: %w", err)
	}
	if e.dir == "" {
		if e.dir, err = os.MkdirTemp("", "legion-compose-"); err != nil {
			return "", err
		}
	}
	e.n++
	p := filepath.Join(e.dir, fmt.Sprintf("%d-%s", e.n, filepath.Base(name)))
	return p, os.WriteFile(p, data, 0o600)
}

func (e *extendsFiles) Dir(name string) string { return filepath.Dir(name) }

func (e *extendsFiles) close() {
	if e.dir != "" {
		os.RemoveAll(e.dir)
	}
}

// quietSubstitute interpolates like compose-go's default without logging:
// unset variables are reported as warnings by the scan instead.
func quietSubstitute(s string, m template.Mapping) (string, error) {
	return template.SubstituteWithOptions(s, m, template.WithoutLogging)
}

// unsetVariables lists the variables s refers to that are neither set nor
// given a default, which interpolation replaces by an empty string.
func unsetVariables(s string, lookup template.Mapping) []string {
	var unset []string
	record := func(sub string, m template.Mapping, cfg *template.Config) (string, error) {
		v, ok, err := template.DefaultReplacementAppliedFunc(sub, m, cfg)
		if err == nil && !ok {
			unset = append(unset, variableName(sub))
		}
		return v, err
	}
	_, _ = template.SubstituteWithOptions(s, lookup, template.WithoutLogging, template.WithReplacementFunction(record))
	return unset
}

// variableName takes the name out of $NAME or ${NAME...}.
func variableName(sub string) string {
	s := sub[1:]
	if len(s) > 0 && s[0] == '{' {
		s = s[1:]
	}
	end := 0
	for end < len(s) {
		ch := s[end]
		if ch == '_' || ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || end > 0 && ch >= '0' && ch <= '9' {
			end++
			continue
		}
		break
	}
	return s[:end]
}
