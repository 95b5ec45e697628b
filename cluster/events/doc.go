// Package events derives events from the changes a manager applies and
// keeps the recent ones in a bounded ring.
//
// Every manager applies the same log, so each derives the same events
// from its own replica without any write of its own: Derive compares an
// object before and after a change, Tracker keeps the "before" of every
// object it follows, and Ring holds what came out, bounded by count and
// age, for listing and following.
package events
