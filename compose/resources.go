package compose

import (
	"fmt"
	"strings"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/legionbsd/legion"
)

// stackNames maps compose keys to the names Legion gives them.
type stackNames struct {
	services, volumes, secrets, configs map[string]string
	networks                            map[string]string // key -> membership label
	jobs                                map[string]bool   // the services' keys that become Jobs
}

// convert turns the loaded project into admitted objects.
func (c *converter) convert(p *types.Project) ([]legion.Object, error) {
	names := &stackNames{
		services: map[string]string{}, volumes: map[string]string{}, secrets: map[string]string{},
		configs: map[string]string{}, networks: map[string]string{}, jobs: map[string]bool{},
	}
	var objs []legion.Object
	type pending struct {
		obj  legion.Object
		path string
		ext  any // x-legion, merged into the spec
	}
	var all []pending

	// Names first: services refer to volumes, secrets and configs.
	taken := map[legion.Kind]map[string]string{}
	claim := func(kind legion.Kind, path, key, name string) error {
		if taken[kind] == nil {
			taken[kind] = map[string]string{}
		}
		if other, dup := taken[kind][name]; dup {
			return fmt.Errorf("%s: %q and %s both become the %s name %q", path, key, other, kind, name)
		}
		taken[kind][name] = path
		return nil
	}
	for _, key := range sortedKeys(p.Volumes) {
		v := p.Volumes[key]
		path := "volumes." + key
		name := key
		if v.External && v.Name != "" {
			name = v.Name
		}
		n, err := c.objectName(path, name)
		if err != nil {
			return nil, err
		}
		names.volumes[key] = n
		if v.External {
			continue
		}
		if err := claim(legion.KindVolume, path, key, n); err != nil {
			return nil, err
		}
		vol := &legion.Volume{Header: c.header(legion.KindVolume, n, c.objectLabels(path, v.Labels))}
		c.volumeSpec(path, v, &vol.Spec)
		all = append(all, pending{vol, path, v.Extensions["x-legion"]})
	}
	for _, set := range []struct {
		section string
		kind    legion.Kind
		objs    map[string]types.FileObjectConfig
		names   map[string]string
	}{
		{"secrets", legion.KindSecret, fileObjects(p.Secrets), names.secrets},
		{"configs", legion.KindConfig, fileObjects(p.Configs), names.configs},
	} {
		for _, key := range sortedKeys(set.objs) {
			o := set.objs[key]
			path := set.section + "." + key
			name := key
			if o.External && o.Name != "" {
				name = o.Name
			}
			n, err := c.objectName(path, name)
			if err != nil {
				return nil, err
			}
			set.names[key] = n
			if o.External {
				continue
			}
			if err := claim(set.kind, path, key, n); err != nil {
				return nil, err
			}
			data, err := c.objectValue(path, o)
			if err != nil {
				return nil, err
			}
			h := c.header(set.kind, n, c.objectLabels(path, o.Labels))
			spec := legion.SecretSpec{Data: data}
			if set.kind == legion.KindSecret {
				all = append(all, pending{obj: &legion.Secret{Header: h, Spec: spec}, path: path})
			} else {
				all = append(all, pending{obj: &legion.Config{Header: h, Spec: spec}, path: path})
			}
		}
	}
	policies, err := c.networks(p, names, claim)
	if err != nil {
		return nil, err
	}
	for _, np := range policies {
		all = append(all, pending{obj: np, path: "networks"})
	}
	for _, key := range sortedKeys(p.Services) {
		n, err := c.objectName("services."+key, key)
		if err != nil {
			return nil, err
		}
		if err := claim(legion.KindService, "services."+key, key, n); err != nil {
			return nil, err
		}
		names.services[key] = n
		names.jobs[key] = jobMode(p.Services[key].Deploy) != ""
	}
	byKey := map[string]*legion.Service{}
	for _, key := range sortedKeys(p.Services) {
		s := p.Services[key]
		o, err := c.service(key, s, names)
		if err != nil {
			return nil, err
		}
		if svc, ok := o.(*legion.Service); ok {
			byKey[key] = svc
		}
		all = append(all, pending{o, "services." + key, s.Extensions["x-legion"]})
	}
	c.oneShots(p.Services, byKey)

	for _, pd := range all {
		o := pd.obj
		if pd.ext != nil {
			merged, err := mergeExtension(o, pd.ext)
			if err != nil {
				return nil, fmt.Errorf("%s.x-legion: %w", pd.path, err)
			}
			o = merged
		}
		if err := legion.Admit(o); err != nil {
			return nil, fmt.Errorf("%s: %s %s does not pass admission:\n%w", pd.path, o.GetKind(), o.GetMetadata().Name, err)
		}
		objs = append(objs, o)
	}
	sortObjects(objs)
	return objs, nil
}

// objectLabels are the stack label and the compose labels that are valid
// Legion labels.
func (c *converter) objectLabels(path string, in types.Labels) map[string]string {
	out := map[string]string{}
	for _, k := range sortedKeys(in) {
		if k == StackLabel {
			c.warn(path+".labels."+k, "set by Legion to the stack's name, ignored")
			continue
		}
		if err := validLabel(k, in[k]); err != nil {
			c.warn(path+".labels."+k, "%v, ignored", err)
			continue
		}
		out[k] = in[k]
	}
	out[StackLabel] = c.opts.Stack
	return out
}

// volumeSpec maps a top-level volume: Docker's local driver is a ZFS
// volume, or an NFS one when its options mount an NFS export.
func (c *converter) volumeSpec(path string, v types.VolumeConfig, spec *legion.VolumeSpec) {
	spec.Driver = legion.DriverZFS
	switch v.Driver {
	case "", "local":
	default:
		c.warn(path+".driver", "%q: not supported, a zfs volume is made", v.Driver)
		if len(v.DriverOpts) > 0 {
			c.warn(path+".driver_opts", "not supported, ignored")
		}
		return
	}
	if len(v.DriverOpts) == 0 {
		return
	}
	typ := v.DriverOpts["type"]
	if typ != "nfs" && typ != "nfs4" {
		c.warn(path+".driver_opts", "not supported, ignored (only local NFS mounts map, as an nfs volume)")
		return
	}
	var server string
	var rest []string
	for _, o := range strings.Split(v.DriverOpts["o"], ",") {
		if addr, ok := strings.CutPrefix(o, "addr="); ok {
			server = addr
		} else if o != "" {
			rest = append(rest, o)
		}
	}
	dev := v.DriverOpts["device"]
	if host, p, ok := strings.Cut(dev, ":"); ok {
		if server == "" {
			server = host
		}
		dev = p
	}
	if server == "" || !strings.HasPrefix(dev, "/") {
		c.warn(path+".driver_opts", "an NFS mount needs o: addr=<server> and device: :<path>; ignored")
		return
	}
	if typ == "nfs4" {
		rest = append(rest, "nfsv4")
	}
	spec.Driver = legion.DriverNFS
	spec.NFS = &legion.NFSVolume{Server: server, Path: dev, Options: strings.Join(rest, ",")}
}

// objectValue reads a secret's or config's value from its file, the
// environment or the file's content.
func (c *converter) objectValue(path string, o types.FileObjectConfig) ([]byte, error) {
	switch {
	case o.File != "":
		if c.opts.ReadFile == nil {
			return nil, fmt.Errorf("%s.file: %s: reading files is not available here", path, o.File)
		}
		data, err := c.opts.ReadFile(o.File)
		if err != nil {
			return nil, fmt.Errorf("%s.file: %w", path, err)
		}
		return data, nil
	case o.Environment != "":
		v, ok := c.opts.Env[o.Environment]
		if !ok {
			return nil, fmt.Errorf("%s.environment: variable %s is not set", path, o.Environment)
		}
		return []byte(v), nil
	case o.Content != "":
		return []byte(o.Content), nil
	}
	if v, ok := o.Extensions[types.SecretConfigXValue].(string); ok {
		return []byte(v), nil
	}
	return nil, fmt.Errorf("%s: expected file, environment or content (or external: true)", path)
}

// networks makes each compose network a policy segment: its services carry
// its membership label, and a NetworkPolicy lets members in from members.
// Tasks of a namespace reach each other unless the namespace is locked,
// so the segments separate services only in a locked namespace.
func (c *converter) networks(p *types.Project, names *stackNames, claim func(legion.Kind, string, string, string) error) ([]legion.Object, error) {
	used := map[string][]string{} // network -> services
	for _, key := range sortedKeys(p.Services) {
		for net := range p.Services[key].Networks {
			used[net] = append(used[net], key)
		}
	}
	var out []legion.Object
	for _, key := range sortedKeys(p.Networks) {
		path := "networks." + key
		n := p.Networks[key]
		if n.External {
			c.warn(path+".external", "not supported: the network is made a segment of this stack only")
		}
		switch n.Driver {
		case "", "overlay", "bridge":
		default:
			c.warn(path+".driver", "%q: not supported, ignored", n.Driver)
		}
		if len(used[key]) == 0 {
			continue
		}
		name, err := c.objectName(path, key)
		if err != nil {
			return nil, err
		}
		if err := claim(legion.KindNetworkPolicy, path, key, name); err != nil {
			return nil, err
		}
		// The label key's name part holds at most 63 characters.
		label := NetworkLabelPrefix + name
		if len(label) > 63 {
			label = strings.TrimRight(label[:63], "-")
		}
		names.networks[key] = label
		members := map[string]string{label: "true"}
		np := &legion.NetworkPolicy{
			Header: c.header(legion.KindNetworkPolicy, name, c.objectLabels(path, n.Labels)),
			Spec: legion.NetworkPolicySpec{
				Services: members,
				Ingress:  []legion.IngressRule{{From: []legion.Peer{{Services: map[string]string{label: "true"}}}}},
			},
		}
		out = append(out, np)
	}
	if segmented(p) {
		c.segmented = true
		c.note("networks", "the services are not all on one network: the segments separate them only in a namespace with isolation: locked (stack deploy makes a new namespace so; an existing one is the cluster admin's)")
	}
	return out, nil
}

// segmented reports whether two services share no network.
func segmented(p *types.Project) bool {
	keys := sortedKeys(p.Services)
	for i, a := range keys {
		for _, b := range keys[i+1:] {
			shared := false
			for net := range p.Services[a].Networks {
				if _, ok := p.Services[b].Networks[net]; ok {
					shared = true
					break
				}
			}
			if !shared {
				return true
			}
		}
	}
	return false
}

// fileObjects views secrets and configs alike: both are file objects.
func fileObjects[T types.SecretConfig | types.ConfigObjConfig](in map[string]T) map[string]types.FileObjectConfig {
	out := make(map[string]types.FileObjectConfig, len(in))
	for k, v := range in {
		out[k] = types.FileObjectConfig(v)
	}
	return out
}
