// Package compose converts compose files (the format docker stack deploy
// reads) into Legion objects, and plans what `legion stack deploy` and
// `legion stack rm` apply and delete.
//
// It is pure: it reads nothing but the compose text it is given and the
// files that text names (env_file, secret and config files), through the
// ReadFile function of Options. It must not import net, os, client or any
// package doing I/O; the CLI (cmd/legion) supplies files, the environment
// and a cluster client. Parsing, interpolation, YAML merge keys and
// extension fields are compose-go's; what Legion cannot express is
// returned as Warnings named by the key's path, or refused with Strict.
package compose
