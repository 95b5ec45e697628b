// Package legion is Legion's object model: the envelope every object
// shares, the typed spec and status of every kind, the quantities and
// durations they hold, and admission, which parses manifests strictly,
// writes every default out, stores quantities in one canonical form and
// checks what one object can check about itself.
//
// Admission is pure: it needs no store and does no I/O. Checks that need
// other objects (a Secret that must exist, a namespace's quota or security
// allow-list) belong to the server, which calls the helpers here.
//
// This package imports only the standard library, a YAML codec and the
// cron expression parser (a CronJob's schedule is checked at admission, so
// a bad schedule is refused when applied rather than found by the planner).
// It must not import any I/O package of this module.
package legion
