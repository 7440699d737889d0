// Package state keeps what setpoint must remember between runs, sharded by
// target object: for each attribute it acts on, the user's value at
// adoption, what it applied, when and for which specs, and each gate
// policy's own state (stability windows, cooldowns, behavior history).
//
// A State is held in memory and stored by a Backend. A backend stores one
// shard per target object, so a run that touches 1% of the objects writes
// 1% of the state, no shard grows with the size of the fleet, and the same
// shape maps onto one cluster object per target in in-cluster mode (far
// below the 1 MiB object limit, with the cluster's optimistic concurrency).
// The local backend (NewFile) is one file per object, each written
// atomically and checksummed, under a flock; see NewFile.
//
// Save tells which shards changed by comparing each shard's serialized
// bytes with what was loaded or last saved, so no change is missed for want
// of a dirty mark and a Save with nothing changed writes nothing.
package state

import (
	"context"
	"encoding/json"
	"errors"
	"hash/maphash"
	"slices"
	"strings"
	"time"

	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/values"
)

// Version is the shard format this release reads and writes. Version 1
// was the single-file state of earlier releases.
const Version = 2

// MaxShard bounds one shard's stored form (a shard file). Save refuses a
// bigger shard with an error naming its object; policies bound what they
// keep per attribute, so only a runaway policy gets near it.
const MaxShard = 256 << 10

var (
	// ErrLocked marks a failure to take the lock because another holder
	// has it; the error (a *LockedError) names the holder.
	ErrLocked = errors.New("state is locked")
	// ErrCorrupt marks a shard that fails its checksum or does not parse.
	// Such a shard is left as it is, never reset.
	ErrCorrupt = errors.New("state shard is corrupt")
	// ErrOldFormat marks state written by an earlier release (the
	// single-file format 1) or by a newer one.
	ErrOldFormat = errors.New("state is in another release's format")
	// ErrTooLarge marks a shard over MaxShard, refused by Save.
	ErrTooLarge = errors.New("state shard is too large")
)

// State is every target object's shard. It is not safe for concurrent use.
type State struct {
	objects map[addrs.Object]*Object
	// origin names the backend that saved describes; a state saved to
	// another backend writes every shard.
	origin string
	// saved is the digest of each shard's serialized attributes as the
	// backend holds it (as loaded, or as last saved).
	saved map[addrs.Object]digest
	// unreadable are the backend's shards Load could not read, by their
	// storage name, with why: Save never writes over them.
	unreadable map[string]error
}

// digest tells whether a shard's serialized attributes changed: two
// 64-bit maphashes under independent per-process seeds (a 128-bit hash, a
// tenth of SHA-256's cost; it never leaves the process). The file's
// checksum is SHA-256.
type digest [2]uint64

var detectSeeds = [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}

func detectSum(b []byte) digest {
	return digest{maphash.Bytes(detectSeeds[0], b), maphash.Bytes(detectSeeds[1], b)}
}

// Object is one shard: what setpoint remembers about one target object.
type Object struct {
	// Attrs holds each attribute's entry by canonical attribute path text
	// (addrs.Path.String()).
	Attrs map[string]*Entry `json:"attrs"`
}

// Entry is what is remembered of one attribute. An entry with nothing in
// it (no User, no Applied, no Policy) is not stored: after a reload it is
// absent.
type Entry struct {
	// User is the value the attribute had when setpoint adopted it: shown
	// in plans, restored when enforcement is turned off.
	User *values.Value `json:"user,omitempty"`
	// Applied is setpoint's last write.
	Applied *Applied `json:"applied,omitempty"`
	// Policy holds each gate policy's own state for this attribute, by
	// policy name (e.g. "nfr"), exactly what the policy reads; the policy
	// bounds its size. Each must be valid JSON.
	Policy map[string]json.RawMessage `json:"policy,omitempty"`
	// Released is the tombstone of a release: the specs that set the
	// attribute were deleted and setpoint handed it back. It keeps what
	// setpoint wrote and the user's value that write replaced, so a spec
	// that comes back does not adopt setpoint's own value as the user's,
	// and so the specs released count toward the vanished-specs guard
	// until a release is confirmed. One per attribute: bounded.
	Released *Released `json:"released,omitempty"`
	// ReleaseConfirmed says the user confirmed that the specs behind
	// Applied were deleted on purpose (setpoint state confirm-release): its
	// release is not held by the guard. Cleared when one of them returns.
	ReleaseConfirmed bool `json:"releaseConfirmed,omitempty"`
	// Pending is the intent journal: a provider call about to be made for
	// this attribute, saved before the call. The next run settles it from
	// what the provider reads back, so a process killed between the call
	// and the record neither loses what it created nor adopts it.
	Pending *Pending `json:"pending,omitempty"`
}

// Released is an attribute's release tombstone.
type Released struct {
	// Value is what setpoint had written (and left in place).
	Value values.Value `json:"value"`
	// User is the user's value setpoint's write replaced, if known.
	User *values.Value `json:"user,omitempty"`
	By   []string      `json:"by,omitempty"`
	At   time.Time     `json:"at"`
	// Confirmed: the deletion was confirmed, so these specs no longer
	// count toward the vanished-specs guard.
	Confirmed bool `json:"confirmed,omitempty"`
}

// Intent actions of a Pending entry.
const (
	IntentApply   = "apply"   // set Value (update or create)
	IntentRelease = "release" // hand the field back
	IntentRestore = "restore" // write the user's value back and hand it over
	IntentDelete  = "delete"  // delete the object
)

// Pending is one journaled intent.
type Pending struct {
	Action string       `json:"action"`
	Value  values.Value `json:"value"`
	By     []string     `json:"by,omitempty"`
	At     time.Time    `json:"at"`
	// Create: the object did not exist; the rest of its attributes.
	Create map[string]values.Value `json:"create,omitempty"`
}

// Applied records setpoint's last write of an attribute.
type Applied struct {
	Value values.Value `json:"value"`
	At    time.Time    `json:"at"`
	// By lists the specs (kind/namespace/name) whose intents set the
	// applied value: enforcement turned off in one spec restores only what
	// that spec wrote.
	By []string `json:"by,omitempty"`
}

// IsEmpty reports whether the entry remembers nothing (and so is not
// stored).
func (e *Entry) IsEmpty() bool {
	return e == nil || (e.User == nil && e.Applied == nil && len(e.Policy) == 0 && e.Released == nil && !e.ReleaseConfirmed && e.Pending == nil)
}

// New returns an empty state.
func New() *State { return &State{objects: map[addrs.Object]*Object{}} }

// Entry returns the attribute's entry, creating it (and its object's
// shard) if need be.
func (s *State) Entry(a addrs.Attr) *Entry {
	if s.objects == nil {
		s.objects = map[addrs.Object]*Object{}
	}
	o := s.objects[a.Object]
	if o == nil {
		o = &Object{}
		s.objects[a.Object] = o
	}
	if o.Attrs == nil {
		o.Attrs = map[string]*Entry{}
	}
	k := a.Path.String()
	e := o.Attrs[k]
	if e == nil {
		e = &Entry{}
		o.Attrs[k] = e
	}
	return e
}

// Lookup returns the attribute's entry, if there is one; it creates
// nothing.
func (s *State) Lookup(a addrs.Attr) (*Entry, bool) {
	o := s.objects[a.Object]
	if o == nil {
		return nil, false
	}
	e, ok := o.Attrs[a.Path.String()]
	return e, ok && e != nil
}

// Delete drops an attribute's entry. An object left with no attribute is
// dropped too, and its shard is removed by the next Save.
func (s *State) Delete(a addrs.Attr) {
	o := s.objects[a.Object]
	if o == nil {
		return
	}
	delete(o.Attrs, a.Path.String())
	if len(o.Attrs) == 0 {
		delete(s.objects, a.Object)
	}
}

// Object returns one object's shard.
func (s *State) Object(o addrs.Object) (*Object, bool) {
	x, ok := s.objects[o]
	return x, ok && x != nil
}

// Each calls f for every object's shard, in no order: for a pass over the
// whole state that needs no order (Objects sorts, which a plan of 10,000
// objects should not pay for on every tick).
func (s *State) Each(f func(addrs.Object, *Object)) {
	for o, x := range s.objects {
		if x != nil {
			f(o, x)
		}
	}
}

// Objects lists the objects that have a shard, sorted by String() (ties,
// possible only for addresses whose parts hold '/', by their parts).
func (s *State) Objects() []addrs.Object {
	out := make([]addrs.Object, 0, len(s.objects))
	for o, x := range s.objects {
		if x != nil {
			out = append(out, o)
		}
	}
	slices.SortFunc(out, func(a, b addrs.Object) int {
		if c := strings.Compare(a.String(), b.String()); c != 0 {
			return c
		}
		for _, c := range [...]int{
			strings.Compare(a.Provider, b.Provider), strings.Compare(a.Kind, b.Kind),
			strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name),
		} {
			if c != 0 {
				return c
			}
		}
		return 0
	})
	return out
}

// Backend stores State.
//
// A backend that is not local (in-cluster: one object per target object,
// a Lease for the lock, the object's resourceVersion for optimistic
// concurrency) implements the same interface.
type Backend interface {
	// Lock takes the exclusive lock; with wait it retries until ctx ends,
	// without it fails at once with an error wrapping ErrLocked that names
	// the holder (pid, host, who, since). unlock gives the lock up; calling
	// it again does nothing.
	Lock(ctx context.Context, who string, wait bool) (unlock func() error, err error)
	// Load reads every shard. Nothing stored is an empty state. A shard
	// that cannot be read (ErrCorrupt, or another release's format) is
	// reported by name and left as it is; Load then returns, with that
	// error, the state of every shard it could read, and Save on that
	// state never writes over the unreadable ones, so a caller may carry
	// on for the other objects.
	Load(ctx context.Context) (*State, error)
	// Save writes only the shards whose content changed since Load (or
	// the last Save), removes shards that became empty, and reports how
	// many it wrote and removed. It writes every shard it can: a shard it
	// refuses (over MaxShard, an invalid policy value, an unreadable shard
	// in its place) is named in the error and the others are still
	// written. A state Load did not return writes every shard it holds and
	// removes none.
	Save(ctx context.Context, s *State) (SaveStats, error)
	// String says where it stores, for messages.
	String() string
}

// SaveStats says what a Save did.
type SaveStats struct{ Written, Removed int }
