// Package zfs manages ZFS datasets, clones and snapshots by running zfs(8)
// through the system runner (sys), so every command it issues can
// be asserted in tests with sys.Fake and the answers the spec's lab
// recorded are handled in one place (zfs create -p succeeding on an
// existing dataset, "dataset does not exist", "dependent clones", ...).
//
// It imports only the standard library and sys; it must not
// import the legion object model, image or jail packages: they build on it.
package zfs
