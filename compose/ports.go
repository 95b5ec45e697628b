package compose

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/legionbsd/legion"
)

// Ports reads one port in Docker's short syntax, as docker service create
// -p and a compose file's ports take it ("8080:80", "80", "8080:80/udp",
// "8000-8001:80-81"): each target a container port and a service port
// equal to it, published on the routing mesh when a published port is
// given. A host address is refused, as published ports listen on every
// address of every node; so is any protocol but tcp and udp.
func Ports(spec string) ([]legion.ContainerPort, []legion.ServicePort, error) {
	parsed, err := types.ParsePortConfig(spec)
	if err != nil {
		return nil, nil, fmt.Errorf("%q: %w (expected PUBLISHED:TARGET[/PROTOCOL], or TARGET alone)", spec, err)
	}
	var ctrs []legion.ContainerPort
	var svcs []legion.ServicePort
	for _, p := range parsed {
		if p.HostIP != "" {
			return nil, nil, fmt.Errorf("%q: a host address is not supported: published ports listen on every address", spec)
		}
		var proto legion.Protocol
		switch strings.ToLower(p.Protocol) {
		case "", "tcp":
			proto = legion.TCP
		case "udp":
			proto = legion.UDP
		default:
			return nil, nil, fmt.Errorf("%q: protocol %s: only tcp and udp are supported", spec, p.Protocol)
		}
		target := int(p.Target)
		if target < 1 || target > 65535 {
			return nil, nil, fmt.Errorf("%q: %d is not a port", spec, target)
		}
		ctrs = append(ctrs, legion.ContainerPort{ContainerPort: target, Protocol: proto})
		sp := legion.ServicePort{Protocol: proto, Port: target, TargetPort: legion.PortRef{Number: target}}
		if p.Published != "" {
			pub, err := strconv.Atoi(p.Published)
			if err != nil || pub < 1 || pub > 65535 {
				return nil, nil, fmt.Errorf("%q: published %q: expected a port", spec, p.Published)
			}
			sp.Publish, sp.PublishedPort = legion.PublishIngress, pub
		}
		svcs = append(svcs, sp)
	}
	return ctrs, svcs, nil
}

// AddPort adds the service port sp (its VIP port equal to its target, as
// Ports makes them) to ports. A target given again is published where
// it was not, and published once more where it was, as Docker publishes
// one target on several ports: that publish needs a VIP port of its own,
// the target when it is published on the target (the first publish then
// takes its own published port), else its published port. The error
// names what holds the VIP port that publish would need.
func AddPort(ports []legion.ServicePort, sp legion.ServicePort) ([]legion.ServicePort, error) {
	target := sp.TargetPort.Number
	i := slices.IndexFunc(ports, func(p legion.ServicePort) bool {
		return p.Protocol == sp.Protocol && p.TargetPort.Name == "" && p.TargetPort.Number == target
	})
	out := slices.Clone(ports)
	switch {
	case i < 0:
	case sp.PublishedPort == 0:
		return out, nil // the target is a port already
	case out[i].Publish == "":
		out[i].Publish, out[i].PublishedPort = sp.Publish, sp.PublishedPort
		return out, nil
	case out[i].PublishedPort == sp.PublishedPort && out[i].Publish == sp.Publish:
		return out, nil // the same publish again
	case sp.PublishedPort == target && out[i].Port == target:
		out[i].Port = out[i].PublishedPort
		if err := vipFree(out, i); err != nil {
			return nil, err
		}
	default:
		sp.Port = sp.PublishedPort
	}
	if i >= 0 && slices.ContainsFunc(out, func(p legion.ServicePort) bool { return sp.Name != "" && p.Name == sp.Name }) {
		sp.Name = "" // the target's name is its first port's
	}
	out = append(out, sp)
	if err := vipFree(out, len(out)-1); err != nil {
		return nil, err
	}
	return out, nil
}

// vipFree checks that no other port of ports has the VIP port of ports[i].
func vipFree(ports []legion.ServicePort, i int) error {
	p := ports[i]
	for j, o := range ports {
		if j == i || o.Port != p.Port || o.Protocol != p.Protocol {
			continue
		}
		what := fmt.Sprintf("target %d/%s", p.TargetPort.Number, p.Protocol)
		if p.PublishedPort != 0 {
			what += fmt.Sprintf(" published on %d", p.PublishedPort)
		}
		return fmt.Errorf("%s needs service port %d/%s, which target %d has already", what, p.Port, p.Protocol, o.TargetPort.Number)
	}
	return nil
}
