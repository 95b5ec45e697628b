package scheduler

import (
	"strings"

	"github.com/legionbsd/legion"
)

// imagesReady says whether an owner's current pod may get new tasks: once
// every node runs pins, a pod naming an image a registry serves waits
// until the leader has passed over this very pod (status.images keyed by
// the pod's hash, without a failure): tags resolved, so every task runs
// the same digests and an update waits with its old tasks running, and
// every image, by tag or by digest, checked against the image policies.
// Local images and pullPolicy never ask no registry, and wait only while
// an image policy enforces: one may cover them too.
func (p *planner) imagesReady(o *owner) bool {
	if o.imageGate != 0 {
		return o.imageGate == 1
	}
	o.imageGate = 1
	if !p.allPins || !needsResolving(o.pod) && !p.enforcing {
		return true
	}
	var im *legion.ImagesStatus
	if o.svc != nil {
		im = o.svc.Status.Images
	} else if o.job != nil {
		im = o.job.Status.Images
	}
	if im == nil || im.PodHash != o.hash || im.Message != "" {
		o.imageGate = 2
	}
	if im != nil && im.PodHash == o.hash && im.Message != "" {
		// Said on the owner too, where its tasks would otherwise say why.
		o.messages = append(o.messages, "no task started until its images resolve: "+im.Message)
	}
	return o.imageGate == 1
}

// needsResolving: a container of the pod names an image, by tag or by
// digest, that a registry serves.
func needsResolving(pod *legion.PodSpec) bool {
	for _, c := range pod.AllContainers() {
		if c.PullPolicy != legion.PullNever && !strings.HasPrefix(c.Image, "localhost/") {
			return true
		}
	}
	return false
}
