package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/legionbsd/legion"
	"github.com/spf13/cobra"
)

// Docker's and kubectl's commands that Legion has under another name, or
// not at all: typed by habit, each is refused naming what does it here,
// whatever flags follow, rather than with "unknown command" alone. They
// are hidden from help.

// habitSub is one subcommand of a habit: the tool's words for it and
// what does it here.
type habitSub struct{ tool, here string }

// habit is a top-level command of docker or kubectl. With subs, each of
// its subcommands names Legion's; whole is said for one not listed (or,
// when empty, the list of those that are). Without subs, whole is said
// for the command, whatever follows.
type habit struct {
	tool  string
	subs  map[string]habitSub
	whole string
}

func dockerSubs(tool string, m map[string]string) map[string]habitSub {
	out := map[string]habitSub{}
	for sub, here := range m {
		out[sub] = habitSub{tool + " " + sub, here}
	}
	return out
}

// topHabits are the top-level commands typed by habit.
var topHabits = map[string]habit{
	"service": {tool: "docker service", subs: dockerSubs("docker service", map[string]string{
		"create":   "legion create service NAME --image IMAGE",
		"inspect":  "legion describe service NAME, or legion get service NAME -o yaml",
		"logs":     "legion logs NAME",
		"ls":       "legion get services",
		"ps":       "legion tasks NAME",
		"rm":       "legion delete service NAME",
		"rollback": "legion rollback NAME",
		"scale":    "legion scale NAME=REPLICAS",
		"update":   "legion set image NAME CONTAINER=IMAGE, legion set env, legion set resources, legion scale, or legion edit service NAME",
	})},
	"secret": {tool: "docker secret", subs: dockerSubs("docker secret", map[string]string{
		"create":  "legion create secret NAME FILE",
		"inspect": "legion describe secret NAME (which does not show its value)",
		"ls":      "legion get secrets",
		"rm":      "legion delete secret NAME",
	})},
	"config": {tool: "docker config and kubectl config", subs: func() map[string]habitSub {
		m := dockerSubs("docker config", map[string]string{
			"create":  "legion create config NAME FILE",
			"inspect": "legion describe config NAME",
			"ls":      "legion get configs",
			"rm":      "legion delete config NAME",
		})
		for sub, here := range map[string]string{
			"view":            "legion context show",
			"get-contexts":    "legion context ls",
			"current-context": "legion context ls (* marks it)",
			"use-context":     "legion context use NAME",
			"use":             "legion context use NAME",
			"set-context":     "legion context set NAME",
			"set-cluster":     "legion context set NAME --server ADDR",
			"set-credentials": "legion context set NAME --credentials FILE",
			"delete-context":  "legion context rm NAME",
		} {
			m[sub] = habitSub{"kubectl config " + sub, here}
		}
		return m
	}(), whole: "legion has no config command: kubectl config's contexts are legion context, and docker config's Configs are legion get, create, describe and delete config"},
	"swarm": {tool: "docker swarm", subs: dockerSubs("docker swarm", map[string]string{
		"init":       "legion init (a daemon's first manager), or legion up (one node in the foreground)",
		"join":       "legion join TOKEN",
		"join-token": "legion token show worker|manager (legion token rotate for a new one)",
		"leave":      "legion node rm NODE (on a manager, once the node's daemon is stopped)",
		"unlock":     "legion unlock",
		"unlock-key": "legion autolock show (legion autolock rotate for a new key)",
		"update":     "legion autolock enable|disable, or legion token rotate",
		"ca":         "legion ca rotate",
	})},
	"inspect":       {tool: "docker inspect", whole: "legion describe KIND NAME, or legion get KIND NAME -o yaml"},
	"cordon":        {tool: "kubectl cordon", whole: "legion node pause NODE keeps the node's tasks and places no new ones there (legion node activate NODE undoes it)"},
	"uncordon":      {tool: "kubectl uncordon", whole: "legion node activate NODE places tasks there again"},
	"drain":         {tool: "kubectl drain", whole: "legion node drain NODE [--wait] stops the node's tasks and runs them elsewhere"},
	"taint":         {tool: "kubectl taint", whole: "legion node taint NODE KEY[=VALUE]:EFFECT adds a taint, and KEY[:EFFECT]- removes it"},
	"annotate":      {tool: "kubectl annotate", whole: "Legion objects have labels, not annotations: legion label KIND/NAME KEY=VALUE"},
	"patch":         {tool: "kubectl patch", whole: "legion edit KIND NAME changes an object in an editor, and legion apply -f FILE a changed manifest; for one change, legion set image, scale, autoscale or label"},
	"explain":       {tool: "kubectl explain", whole: "each kind's fields are in Legion's docs/object-model.md; legion get KIND NAME -o yaml shows an object with its defaults, and legion validate -f FILE checks a manifest"},
	"api-resources": {tool: "kubectl api-resources", whole: "legion get KIND takes any of " + kindWords()},
	"api-versions":  {tool: "kubectl api-versions", whole: "every object is " + legion.APIVersion + " (legion version names the object model the manager reached speaks)"},
	"cp":            {tool: "kubectl cp", whole: "files reach a pod as a Config or Secret mounted in it (legion create config NAME FILE) or on a Volume; legion exec TASK -- COMMAND prints one out"},
	"expose":        {tool: "kubectl expose", whole: "a Service's endpoint is part of it: legion create service NAME -p PUBLISHED:TARGET, or spec.endpoint.ports (legion edit service NAME)"},
	"attach":        {tool: "kubectl attach", whole: "legion logs -f TASK follows its output, and legion exec -it TASK -- COMMAND runs a command in it"},
	"network":       {tool: "docker network", whole: "a cluster's pods share one network, each pod with an address of its own and services named in DNS; who may reach whom is NetworkPolicies (legion get networkpolicies -A) and each Namespace's isolation"},
	"replace":       {tool: "kubectl replace", whole: "legion apply -f FILE sets each object's labels and spec to the manifest's (its status kept); replace --force's delete and make again is legion delete -f FILE, then legion create -f FILE"},
	"debug":         {tool: "kubectl debug", whole: "legion exec -it TASK -- sh opens a shell in a running task, and legion logs TASK and legion describe task TASK say why one fails"},
	"proxy":         {tool: "kubectl proxy", whole: "the API is gRPC with mutual TLS, not HTTP: legion port-forward reaches a task's port, and a Route publishes a service over HTTP"},
	"stats":         {tool: "docker stats", whole: "legion top shows the cluster live, and legion top tasks what each task uses"},
	"auth":          {tool: "kubectl auth", whole: "who may do what is in RoleBindings: legion get rolebindings -A; legion user makes users' credentials"},
	// docker's own container and image commands: a node's containers
	// are tasks of the cluster's workloads, not started by hand.
	"images":  {tool: "docker images", whole: "legion image ls lists this node's images, and legion image rm removes one"},
	"pull":    {tool: "docker pull", whole: imagePulls},
	"push":    {tool: "docker push", whole: imagesBuiltElsewhere},
	"build":   {tool: "docker build", whole: imagesBuiltElsewhere},
	"tag":     {tool: "docker tag", whole: imagesBuiltElsewhere},
	"commit":  {tool: "docker commit", whole: imagesBuiltElsewhere},
	"save":    {tool: "docker save", whole: "Legion does not write image archives; legion image load takes docker save's tar, an OCI archive or an OCI layout tar"},
	"load":    {tool: "docker load", whole: "legion image load FILE adds an image to this node from docker save's tar, an OCI archive or an OCI layout tar"},
	"stop":    {tool: "docker stop", whole: "legion scale SERVICE=0 stops a service's tasks and keeps the service; legion delete service NAME removes it"},
	"start":   {tool: "docker start", whole: "legion scale SERVICE=N starts a service's tasks again; a stopped task is not started again, its service starts another"},
	"restart": {tool: "docker restart", whole: "legion rollout restart SERVICE replaces a service's tasks in a rolling update; legion delete task TASK stops one, which its service replaces"},
	"kill":    {tool: "docker kill", whole: "legion delete task TASK stops one task (with its container's stopSignal, then after stopGracePeriod SIGKILL), which its service replaces"},
	"rm":      {tool: "docker rm", whole: "legion delete KIND NAME removes an object (a task's container goes with its task); legion image rm removes an image"},
	"compose": {tool: "docker compose", whole: "legion up DIR|FILE runs a compose file on a one-node cluster in this terminal, and legion stack deploy -c FILE STACK on a cluster; legion stack convert shows the objects it makes"},
	"system":  {tool: "docker system", whole: "legion status shows the cluster, legion top what it uses, legion image ls a node's images (its agent removes those unused for an hour), legion events what happened"},
	"login":   {tool: "docker login", whole: "a registry's login is a Secret holding a Docker config JSON (legion create secret NAME ~/.docker/config.json), named in the pod's imagePullSecrets"},
	"logout":  {tool: "docker logout", whole: "a registry's login is a Secret named in pods' imagePullSecrets: legion delete secret NAME, or take it out of the pods"},
}

// imagePulls is how images get onto nodes, for docker pull's habits.
const imagePulls = "a node pulls an image when a task of it needs it (its container's pullPolicy says when), from the registry its reference names; legion image load adds one from an archive"

// imagesBuiltElsewhere answers docker's build and registry commands.
const imagesBuiltElsewhere = "Legion runs images and does not build or push them: build, tag and push with your image tools to a registry the nodes reach, or load an archive on a node with legion image load"

// subHabits are subcommands typed by habit under Legion's own commands,
// by the parent's name; here is said after "is", whole.
var subHabits = map[string]map[string]habitSub{
	"rollout": {
		"pause":  {"kubectl rollout pause", "not a thing here: an update goes on until it completes, and pauses by itself when a new task fails (update.failureAction: pause); a change to the spec (legion apply, set image) goes on from there, and legion rollback goes back"},
		"resume": {"kubectl rollout resume", "a change to the spec here: a paused update goes on once the spec changes again (legion apply, set image), or goes back with legion rollback"},
	},
	"volume": {
		"create":  {"docker volume create", "a Volume's manifest here (kind: Volume), applied with legion apply -f; a stateful service's claims make its own"},
		"inspect": {"docker volume inspect", "legion volume get NAME here, or legion describe volume NAME"},
		"rm":      {"docker volume rm", "legion delete volume NAME here, which removes its data"},
		"prune":   {"docker volume prune", "not a thing here: a Volume and its data go only when deleted by name (legion volume ls shows which tasks use each)"},
	},
	"image": {
		"inspect": {"docker image inspect", "legion image ls here, which lists this node's images with their digests and platforms"},
		"prune":   {"docker image prune", "done by each node's agent here: an image nothing has used for an hour goes, with the layers no other image holds (legion image rm removes one now)"},
	},
	"context": {
		"create":  {"docker context create", "legion context set NAME --server ADDR --credentials FILE here"},
		"inspect": {"docker context inspect", "legion context show here"},
	},
	"stack": {
		"config": {"docker stack config", "legion stack convert -c FILE STACK here, which prints the objects Legion makes of the compose files, merged (docker's prints the merged compose file)"},
	},
	"node": {
		"inspect": {"docker node inspect", "legion describe node NODE here, or legion get node NODE -o yaml"},
		"ps":      {"docker node ps", "legion describe node NODE here (its tasks), or legion get tasks -A -o wide"},
	},
}

// habitCommands are the hidden top-level commands of topHabits.
func habitCommands() []*cobra.Command {
	var out []*cobra.Command
	for _, name := range slices.Sorted(maps.Keys(topHabits)) {
		h := topHabits[name]
		out = append(out, &cobra.Command{
			Use:                name,
			Hidden:             true,
			DisableFlagParsing: true,
			RunE:               func(cmd *cobra.Command, args []string) error { return h.refuse(name, args) },
		})
	}
	return out
}

func (h habit) refuse(name string, args []string) error {
	if h.subs == nil {
		return fmt.Errorf("%s is not a command here: %s", h.tool, h.whole)
	}
	if len(args) > 0 {
		if s, ok := h.subs[args[0]]; ok {
			return fmt.Errorf("%s is %s here", s.tool, s.here)
		}
	}
	if h.whole != "" {
		return fmt.Errorf("%s", h.whole)
	}
	subs := slices.Sorted(maps.Keys(h.subs))
	return fmt.Errorf("legion has no %s command: each of %s's %s names the command that does it here (legion %s %s)", name, h.tool, strings.Join(subs, ", "), name, subs[0])
}

// addSubHabits adds subHabits, hidden, under the root's commands.
func addSubHabits(root *cobra.Command) {
	for _, parent := range root.Commands() {
		for _, sub := range slices.Sorted(maps.Keys(subHabits[parent.Name()])) {
			s := subHabits[parent.Name()][sub]
			parent.AddCommand(&cobra.Command{
				Use:                sub,
				Hidden:             true,
				DisableFlagParsing: true,
				RunE:               func(*cobra.Command, []string) error { return fmt.Errorf("%s is %s", s.tool, s.here) },
			})
		}
	}
}
