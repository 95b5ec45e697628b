package compose

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// shape describes the keys of a compose file Legion maps. The scan warns
// about every key a shape does not list, by its path.
type shape struct {
	fields map[string]*shape // a mapping's known keys; empty: every key is unsupported
	each   *shape            // a mapping keyed by user names (services, volumes, ...)
	items  *shape            // a list's elements that are mappings
	note   string            // the key is unsupported: why
}

var leaf = &shape{}

func unsupported(why string) *shape { return &shape{note: why} }

func fields(f map[string]*shape) *shape { return &shape{fields: f} }

// composeShape is the part of the compose format stack conversion maps. It
// is built once and only read.
var composeShape = func() *shape {
	fileRef := fields(map[string]*shape{"source": leaf, "target": leaf, "uid": leaf, "gid": leaf, "mode": leaf})
	object := fields(map[string]*shape{"name": leaf, "file": leaf, "environment": leaf, "content": leaf, "external": leaf, "labels": leaf})
	deploy := fields(map[string]*shape{
		"mode": leaf, "replicas": leaf, "endpoint_mode": leaf, "labels": leaf,
		"placement": fields(map[string]*shape{
			"constraints": leaf,
			"preferences": {items: fields(map[string]*shape{"spread": leaf})},
		}),
		"resources": fields(map[string]*shape{
			"limits":       fields(map[string]*shape{"cpus": leaf, "memory": leaf, "pids": leaf}),
			"reservations": fields(map[string]*shape{"cpus": leaf, "memory": leaf}),
		}),
		"restart_policy":  fields(map[string]*shape{"condition": leaf, "delay": leaf, "max_attempts": leaf}),
		"update_config":   fields(map[string]*shape{"parallelism": leaf, "delay": leaf, "failure_action": leaf, "monitor": leaf, "order": leaf}),
		"rollback_config": unsupported("not supported, ignored: a rollback uses the restored spec's update settings"),
	})
	service := fields(map[string]*shape{
		"image": leaf, "pull_policy": leaf, "command": leaf, "entrypoint": leaf, "environment": leaf,
		"env_file":    {items: fields(map[string]*shape{"path": leaf, "required": leaf})},
		"working_dir": leaf, "user": leaf, "hostname": leaf, "stop_grace_period": leaf, "stop_signal": leaf,
		"ports":  {items: fields(map[string]*shape{"target": leaf, "published": leaf, "protocol": leaf, "mode": leaf, "name": leaf})},
		"expose": leaf,
		"volumes": {items: fields(map[string]*shape{"type": leaf, "source": leaf, "target": leaf, "read_only": leaf,
			"tmpfs": fields(map[string]*shape{"size": leaf}),
			"bind":  fields(map[string]*shape{"propagation": leaf, "selinux": leaf, "recursive": leaf})})},
		"tmpfs":   leaf,
		"secrets": {items: fileRef},
		"configs": {items: fileRef},
		"healthcheck": fields(map[string]*shape{"test": leaf, "interval": leaf, "timeout": leaf, "retries": leaf,
			"start_period": leaf, "start_interval": leaf, "disable": leaf}),
		"deploy":          deploy,
		"networks":        {each: fields(map[string]*shape{})},
		"cap_add":         leaf,
		"ulimits":         leaf,
		"pids_limit":      leaf,
		"cpus":            leaf,
		"mem_limit":       leaf,
		"mem_reservation": leaf,
		"scale":           leaf,
		"network_mode":    unsupported("not supported, ignored: every task has its own network stack"),
		"privileged":      unsupported("not supported, ignored: jails have no privileged mode"),
		"depends_on": {each: fields(map[string]*shape{"condition": leaf, "required": leaf,
			"restart": unsupported("a dependency's restart does not restart this service")})},
		"restart":        leaf,
		"build":          unsupported("Legion deploys the image"),
		"container_name": unsupported("not supported, ignored: Legion names the tasks"),
		"labels":         unsupported("not supported, ignored: container labels; deploy.labels label the Service"),
		"extends":        leaf,
		"profiles":       leaf,
	})
	return fields(map[string]*shape{
		"version":  leaf,
		"name":     unsupported("ignored: the stack's name is given on the command line"),
		"include":  unsupported("not supported, ignored: give each file with -c"),
		"services": {each: service},
		"volumes":  {each: fields(map[string]*shape{"name": leaf, "external": leaf, "labels": leaf, "driver": leaf, "driver_opts": leaf})},
		"secrets":  {each: object},
		"configs":  {each: object},
		"networks": {each: fields(map[string]*shape{"name": leaf, "external": leaf, "labels": leaf, "driver": leaf})},
	})
}()

// scan reads a compose file as written and warns about every key Legion
// does not map and every variable interpolation leaves empty. Keys whose
// meaning depends on their value are checked on the loaded project.
func (c *converter) scan(f File) error {
	dec := yaml.NewDecoder(bytes.NewReader(f.Content))
	for {
		var doc any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("compose: %s: %w", f.Name, err)
		}
		c.walk(doc, composeShape, "")
		top, _ := doc.(map[string]any)
		for _, k := range sortedKeys(top) {
			if !strings.HasPrefix(k, "x-") {
				c.unsetVars(top[k], k)
			}
		}
	}
}

func (c *converter) walk(v any, s *shape, path string) {
	if s.note != "" {
		c.unmapped(path, s.note)
		return
	}
	switch v := v.(type) {
	case map[string]any:
		if s.each != nil {
			for _, k := range sortedKeys(v) {
				if path == "services" {
					c.scanService = join(path, k)
				}
				c.walk(v[k], s.each, join(path, k))
			}
			if path == "services" {
				c.scanService = ""
			}
			return
		}
		if s.fields == nil {
			return
		}
		for _, k := range sortedKeys(v) {
			if strings.HasPrefix(k, "x-") {
				continue
			}
			child, ok := s.fields[k]
			if !ok {
				c.unmapped(join(path, k), "")
				continue
			}
			c.walk(v[k], child, join(path, k))
		}
	case []any:
		if s.items == nil {
			return
		}
		for i, e := range v {
			if _, ok := e.(map[string]any); ok {
				c.walk(e, s.items, fmt.Sprintf("%s[%d]", path, i))
			}
		}
	}
}

// unmapped records a key Legion does not map: a service's are gathered
// into one warning for the service (warnUnmapped), others warned at once.
func (c *converter) unmapped(path, why string) {
	svc := c.scanService
	rel, ok := strings.CutPrefix(path, svc+".")
	if svc == "" || !ok {
		if why == "" {
			why = "not supported, ignored"
		}
		c.warn(path, "%s", why)
		return
	}
	why = strings.TrimPrefix(strings.TrimPrefix(why, "not supported, ignored"), ": ")
	if why != "" {
		rel += " (" + why + ")"
	}
	if c.unmappedKeys == nil {
		c.unmappedKeys = map[string][]string{}
	}
	if !slices.Contains(c.unmappedKeys[svc], rel) {
		c.unmappedKeys[svc] = append(c.unmappedKeys[svc], rel)
	}
}

// warnUnmapped gives each service's unmapped keys as one warning.
func (c *converter) warnUnmapped() {
	for _, svc := range sortedKeys(c.unmappedKeys) {
		c.warn(svc, "not mapped, ignored: %s", strings.Join(c.unmappedKeys[svc], ", "))
	}
}

func (c *converter) unsetVars(v any, path string) {
	switch v := v.(type) {
	case string:
		lookup := func(name string) (string, bool) {
			if name == "COMPOSE_PROJECT_NAME" { // compose-go sets it to the stack's name
				return c.opts.Stack, true
			}
			val, ok := c.opts.Env[name]
			return val, ok
		}
		for _, name := range unsetVariables(v, lookup) {
			c.note(path, "variable %s is not set: replaced by an empty string", name)
		}
	case map[string]any:
		for _, k := range sortedKeys(v) {
			c.unsetVars(v[k], join(path, k))
		}
	case []any:
		for i, e := range v {
			c.unsetVars(e, fmt.Sprintf("%s[%d]", path, i))
		}
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
