package state

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"

	"github.com/setpoint-dev/setpoint/engine/addrs"
)

// Backends other than the file one (state in a cluster) store the same
// shards: one object's bytes, as a shard file holds them, checksummed.

// EncodeShard is the stored form of one object's shard; nil when the
// object remembers nothing (it is not stored).
func EncodeShard(o addrs.Object, x *Object) ([]byte, error) {
	var enc encoder
	canon, err := enc.attrs(x, true)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o, err)
	}
	if canon == nil {
		return nil, nil
	}
	b := shardBytes(o, sha256.Sum256(canon), canon)
	if len(b) > MaxShard {
		return nil, fmt.Errorf("%s: its shard is %d bytes, over %d", o, len(b), MaxShard)
	}
	return b, nil
}

// DecodeShard reads a shard's stored form (where names it in errors),
// checking its format and checksum.
func DecodeShard(where string, b []byte) (addrs.Object, *Object, error) {
	if len(b) > MaxShard {
		return addrs.Object{}, nil, &ShardError{File: where, Err: fmt.Errorf("%w: %d bytes, over %d", ErrCorrupt, len(b), MaxShard)}
	}
	var f shardFile
	if err := json.Unmarshal(b, &f); err != nil {
		return addrs.Object{}, nil, &ShardError{File: where, Err: fmt.Errorf("%w: %v", ErrCorrupt, err)}
	}
	l, _ := decodeShard(where, "", f, false, nil)
	if l.err != nil {
		return l.err.Object, nil, l.err
	}
	return l.obj, &Object{Attrs: l.attrs}, nil
}

// Loaded assembles what a backend read into a State: the objects by
// address (nil for a shard that was read but holds nothing) and the
// shards it could not read, by storage name. origin names the backend.
func Loaded(origin string, objs map[addrs.Object]*Object, unreadable map[string]error) *State {
	s := New()
	s.origin = origin
	s.saved = map[addrs.Object]digest{}
	var enc encoder
	for o, x := range objs {
		if x == nil {
			continue
		}
		s.objects[o] = x
		if det, err := enc.attrs(x, false); err == nil {
			s.saved[o] = detectSum(det)
		}
	}
	if len(unreadable) > 0 {
		s.unreadable = unreadable
	}
	return s
}
