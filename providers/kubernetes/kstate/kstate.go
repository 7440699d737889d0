// Package kstate keeps setpoint's state in a cluster: one ConfigMap per
// target object holding that object's shard (the file backend's format,
// checksummed, far below the 1 MiB object limit), written with the API
// server's optimistic concurrency, and a Lease as the lock, so a one-shot
// apply from a laptop and an in-cluster watch never write at once.
package kstate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"

	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/state"
)

// Labels and keys of what the backend stores.
const (
	LabelState       = "setpoint.dev/state"
	LabelEnvironment = "setpoint.dev/environment"
	AnnotationObject = "setpoint.dev/object"
	AnnotationHolder = "setpoint.dev/holder"
	DataKey          = "shard.json"
)

// ErrConflict is a shard another writer changed since it was read.
var ErrConflict = errors.New("changed by another writer since it was read")

// Backend stores an Environment's state in a namespace.
type Backend struct {
	core      k8s.Interface
	namespace string
	env       string
	prefix    string
	// LeaseDuration is how long a lock holder that stops renewing keeps
	// it; the holder renews every third of it.
	LeaseDuration time.Duration
	// Now is the clock (tests move it).
	Now func() time.Time

	// Shards is how many shard Leases there are (DefaultShards when 0).
	Shards int

	mu     sync.Mutex
	known  map[addrs.Object]stored
	holder *Holder

	// retryAfter is Lock's wait between tries (nil: time.After), a seam
	// for tests: a test knows the waiter was refused and is waiting.
	retryAfter func(time.Duration) <-chan time.Time
}

type stored struct {
	name, rv string
	data     []byte
}

var _ state.Backend = (*Backend)(nil)

// New returns the backend for the Environment named env, in namespace.
func New(core k8s.Interface, namespace, env string) *Backend {
	sum := sha256.Sum256([]byte(env))
	return &Backend{core: core, namespace: namespace, env: env, prefix: "setpoint-" + hex.EncodeToString(sum[:4]),
		LeaseDuration: 15 * time.Second, Now: time.Now, known: map[addrs.Object]stored{}}
}

func (b *Backend) String() string {
	return fmt.Sprintf("configmaps in namespace %s (environment %s)", b.namespace, b.env)
}

// Name is the ConfigMap of an object's shard: the environment's prefix
// and a hash of the address (names are bounded; the address is in an
// annotation and in the shard).
func (b *Backend) Name(o addrs.Object) string {
	sum := sha256.Sum256([]byte(o.Provider + "\x00" + o.Kind + "\x00" + o.Namespace + "\x00" + o.Name))
	return b.prefix + "-" + hex.EncodeToString(sum[:10])
}

func (b *Backend) selector() string {
	return LabelState + "=shard," + LabelEnvironment + "=" + envLabel(b.env)
}

// envLabel is a label value for an Environment name (≤ 63 characters).
func envLabel(env string) string {
	if len(env) > 63 {
		return env[:63]
	}
	return env
}

// listPage bounds one List's page: a large fleet's state is read in pages
// (a shard is at most state.MaxShard; a page of them must fit in memory).
const listPage = 100

// Load reads every shard of the Environment.
func (b *Backend) Load(ctx context.Context) (*state.State, error) {
	objs := map[addrs.Object]*state.Object{}
	known := map[addrs.Object]stored{}
	unreadable := map[string]error{}
	var bad []*state.ShardError
	opts := metav1.ListOptions{LabelSelector: b.selector(), Limit: listPage}
	for {
		l, err := b.core.CoreV1().ConfigMaps(b.namespace).List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("reading the state (%s): %w", b, err)
		}
		for _, cm := range l.Items {
			where := fmt.Sprintf("configmap %s/%s", b.namespace, cm.Name)
			o, x, err := state.DecodeShard(where, []byte(cm.Data[DataKey]))
			if err == nil && b.Name(o) != cm.Name {
				err = &state.ShardError{File: where, Object: o, Err: fmt.Errorf("%w: it holds the shard of %s, whose configmap is %s", state.ErrCorrupt, o, b.Name(o))}
			}
			if err != nil {
				var se *state.ShardError
				if errors.As(err, &se) {
					bad = append(bad, se)
				}
				unreadable[cm.Name] = err
				continue
			}
			objs[o] = x
			known[o] = stored{name: cm.Name, rv: cm.ResourceVersion, data: []byte(cm.Data[DataKey])}
		}
		if l.Continue == "" {
			break
		}
		opts.Continue = l.Continue
	}
	b.mu.Lock()
	b.known = known
	b.mu.Unlock()
	s := state.Loaded(b.String(), objs, unreadable)
	if len(bad) > 0 {
		return s, &state.LoadError{Shards: bad}
	}
	return s, nil
}

// Save writes the shards that changed since Load, each with the
// resourceVersion it was read at: a shard another writer changed in
// between is refused (ErrConflict), never overwritten, and the others are
// still written.
func (b *Backend) Save(ctx context.Context, s *state.State) (state.SaveStats, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var st state.SaveStats
	var errs []error
	present := map[addrs.Object]bool{}
	for _, o := range s.Objects() {
		x, _ := s.Object(o)
		data, err := state.EncodeShard(o, x)
		if err != nil {
			errs = append(errs, err)
			present[o] = true // not removed for failing to encode
			continue
		}
		if data == nil {
			continue
		}
		present[o] = true
		k, had := b.known[o]
		if had && string(k.data) == string(data) {
			continue
		}
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: b.Name(o), Namespace: b.namespace,
				Labels:      map[string]string{LabelState: "shard", LabelEnvironment: envLabel(b.env)},
				Annotations: map[string]string{AnnotationObject: o.String()}},
			Data: map[string]string{DataKey: string(data)},
		}
		var out *corev1.ConfigMap
		if had {
			cm.ResourceVersion = k.rv
			out, err = b.core.CoreV1().ConfigMaps(b.namespace).Update(ctx, cm, metav1.UpdateOptions{FieldManager: "setpoint"})
		} else {
			out, err = b.core.CoreV1().ConfigMaps(b.namespace).Create(ctx, cm, metav1.CreateOptions{FieldManager: "setpoint"})
		}
		if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
			errs = append(errs, fmt.Errorf("state of %s (configmap %s/%s): %w; nothing of it was written, run again", o, b.namespace, cm.Name, ErrConflict))
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("writing the state of %s: %w", o, err))
			continue
		}
		b.known[o] = stored{name: out.Name, rv: out.ResourceVersion, data: data}
		st.Written++
	}
	for o, k := range b.known {
		if present[o] {
			continue
		}
		rv := k.rv
		err := b.core.CoreV1().ConfigMaps(b.namespace).Delete(ctx, k.name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
		switch {
		case apierrors.IsNotFound(err):
		case apierrors.IsConflict(err):
			errs = append(errs, fmt.Errorf("state of %s (configmap %s/%s): %w; not removed", o, b.namespace, k.name, ErrConflict))
			continue
		case err != nil:
			errs = append(errs, fmt.Errorf("removing the state of %s: %w", o, err))
			continue
		}
		delete(b.known, o)
		st.Removed++
	}
	return st, errors.Join(errs...)
}

// Lock takes every shard's Lease (see Shards): a one-shot run excludes
// every in-cluster holder, and each other. A Lease is free, expired (its
// holder stopped renewing for LeaseDuration) or already this call's. While
// held they are renewed; unlock releases them at once.
func (b *Backend) Lock(ctx context.Context, who string, wait bool) (func() error, error) {
	if b.holder != nil {
		// In-cluster: the shard Leases the holder keeps are the lock;
		// reconciles run only for the shards it holds.
		return func() error { return nil }, nil
	}
	me := newHolder(who, b.Now())
	after := b.retryAfter
	if after == nil {
		after = time.After
	}
	delay := 50 * time.Millisecond
	for {
		unlock, err := b.lockAll(ctx, me)
		if err == nil {
			return unlock, nil
		}
		var locked *state.LockedError
		if !errors.As(err, &locked) || !wait {
			return nil, err
		}
		select {
		case <-ctx.Done():
			locked.Waited = ctx.Err()
			return nil, locked
		case <-after(delay):
		}
		delay = min(delay*2, time.Second)
	}
}

// lockAll takes the Lease of every shard, after checking that no Lease
// of the Environment (of any shard count) is held by another.
func (b *Backend) lockAll(ctx context.Context, me holder) (func() error, error) {
	l := b.leases()
	all, err := b.core.CoordinationV1().Leases(b.namespace).List(ctx, metav1.ListOptions{LabelSelector: LabelLock + "=shard," + LabelEnvironment + "=" + envLabel(b.env)})
	if err != nil {
		return nil, fmt.Errorf("reading the state locks (leases in %s): %w", b.namespace, err)
	}
	for i := range all.Items {
		if held(&all.Items[i], b.Now()) && holderID(&all.Items[i]) != me.id {
			return nil, l.lockedBy(&all.Items[i])
		}
	}
	var got []string
	release := func() error {
		var errs []error
		for _, name := range got {
			if err := l.release(name, me.id); err != nil {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	}
	for i := range b.shardCount() {
		name := b.ShardLease(i)
		if err := l.acquire(ctx, name, me); err != nil {
			_ = release()
			return nil, err
		}
		got = append(got, name)
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(b.LeaseDuration / 3)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				for _, name := range got {
					_ = l.renew(name, me.id)
				}
			}
		}
	}()
	var once sync.Once
	var uerr error
	return func() error {
		once.Do(func() {
			close(stop)
			<-done
			uerr = release()
		})
		return uerr
	}, nil
}
