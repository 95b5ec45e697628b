package compose

import (
	"fmt"
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
