// Package compose converts compose files (the format docker stack deploy
// reads) into Legion objects, and plans what `legion stack deploy` and
// `legion stack rm` apply and delete.
//
// Convert parses with compose-go (interpolation from the environment it is
// given, never a .env file; YAML anchors and merge keys; x- extensions),
// then maps each service to a Service (a Job in deploy.mode
// replicated-job or global-job), top-level volumes, secrets and
// configs to Volumes, Secrets and Configs (external ones are referred to,
// not made), and each compose network to a policy segment: a
// NetworkPolicy letting in, from its members, the Services labelled
// legion.network.<network>. Segments separate services only in a namespace
// whose isolation is locked, which is what Result.Namespace asks for when
// the networks split the services. An x-legion extension on a service or
// top-level volume is merged into the generated spec. Every object is
// labelled legion.stack=<stack> and has been through legion.Admit.
//
// What Legion cannot carry over is returned as Warnings named by the key's
// path; Options.Strict refuses the unsupported ones.
//
// The package is pure: it reads nothing but the compose text it is given
// and the files that text names (env_file, secret and config files),
// through Options.ReadFile. It must not import os, net, package client or
// anything else doing I/O; the CLI (cmd/legion) supplies the files, the
// environment and a cluster client, and carries out the plans.
package compose
