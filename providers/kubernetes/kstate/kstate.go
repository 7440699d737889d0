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
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
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

	mu    sync.Mutex
	known map[addrs.Object]stored
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

// listPage bounds one List's page: a large fleet's state is read in pages.
const listPage = 500

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

// LockName is the Lease that is the Environment's lock.
func (b *Backend) LockName() string { return b.prefix + "-lock" }

// Lock takes the Environment's Lease: free, expired (its holder stopped
// renewing for LeaseDuration) or already this process's. While held it is
// renewed; unlock releases it at once.
func (b *Backend) Lock(ctx context.Context, who string, wait bool) (func() error, error) {
	host, _ := os.Hostname()
	me := state.Holder{PID: os.Getpid(), Host: host, Who: who, Since: b.Now().UTC()}
	id := fmt.Sprintf("%s/%d/%d", host, me.PID, me.Since.UnixNano())
	delay := 50 * time.Millisecond
	for {
		rv, err := b.acquire(ctx, id, me)
		if err == nil {
			return b.hold(id, rv), nil
		}
		var locked *state.LockedError
		if !errors.As(err, &locked) || !wait {
			return nil, err
		}
		select {
		case <-ctx.Done():
			locked.Waited = ctx.Err()
			return nil, locked
		case <-time.After(delay):
		}
		delay = min(delay*2, time.Second)
	}
}

func (b *Backend) acquire(ctx context.Context, id string, me state.Holder) (string, error) {
	leases := b.core.CoordinationV1().Leases(b.namespace)
	now := metav1.NewMicroTime(b.Now())
	secs := int32(b.LeaseDuration / time.Second)
	holder, _ := json.Marshal(me)
	l, err := leases.Get(ctx, b.LockName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		l = &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: b.LockName(), Namespace: b.namespace,
			Labels: map[string]string{LabelEnvironment: envLabel(b.env)}, Annotations: map[string]string{AnnotationHolder: string(holder)}},
			Spec: coordv1.LeaseSpec{HolderIdentity: &id, LeaseDurationSeconds: &secs, AcquireTime: &now, RenewTime: &now}}
		out, err := leases.Create(ctx, l, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return "", b.lockedBy(nil)
		}
		if err != nil {
			return "", fmt.Errorf("taking the state lock (lease %s/%s): %w", b.namespace, b.LockName(), err)
		}
		return out.ResourceVersion, nil
	}
	if err != nil {
		return "", fmt.Errorf("reading the state lock (lease %s/%s): %w", b.namespace, b.LockName(), err)
	}
	if held(l, b.Now()) && (l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != id) {
		return "", b.lockedBy(l)
	}
	l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds, l.Spec.AcquireTime, l.Spec.RenewTime = &id, &secs, &now, &now
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[AnnotationHolder] = string(holder)
	out, err := leases.Update(ctx, l, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) {
		return "", b.lockedBy(nil) // someone else took it first
	}
	if err != nil {
		return "", fmt.Errorf("taking the state lock (lease %s/%s): %w", b.namespace, b.LockName(), err)
	}
	return out.ResourceVersion, nil
}

// held reports whether a Lease has a holder whose renewal has not expired.
func held(l *coordv1.Lease, now time.Time) bool {
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" || l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return false
	}
	return now.Before(l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second))
}

func (b *Backend) lockedBy(l *coordv1.Lease) error {
	e := &state.LockedError{Path: fmt.Sprintf("lease %s/%s", b.namespace, b.LockName())}
	if l != nil {
		var h state.Holder
		if json.Unmarshal([]byte(l.Annotations[AnnotationHolder]), &h) == nil && h.PID != 0 {
			e.Holder = &h
		}
	}
	return e
}

// hold renews the Lease until unlock, which releases it.
func (b *Backend) hold(id, rv string) func() error {
	stop := make(chan struct{})
	done := make(chan struct{})
	var mu sync.Mutex
	cur := rv
	go func() {
		defer close(done)
		t := time.NewTicker(b.LeaseDuration / 3)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				mu.Lock()
				if r, err := b.renew(id, cur, false); err == nil {
					cur = r
				}
				mu.Unlock()
			}
		}
	}()
	var once sync.Once
	var err error
	return func() error {
		once.Do(func() {
			close(stop)
			<-done
			mu.Lock()
			defer mu.Unlock()
			_, err = b.renew(id, cur, true)
		})
		return err
	}
}

// renew moves the Lease's renewTime on (or releases it), if it is still
// this holder's.
func (b *Backend) renew(id, rv string, release bool) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), b.LeaseDuration)
	defer cancel()
	leases := b.core.CoordinationV1().Leases(b.namespace)
	l, err := leases.Get(ctx, b.LockName(), metav1.GetOptions{})
	if err != nil {
		return rv, err
	}
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != id {
		return rv, fmt.Errorf("the state lock (lease %s/%s) was taken over", b.namespace, b.LockName())
	}
	now := metav1.NewMicroTime(b.Now())
	l.Spec.RenewTime = &now
	if release {
		empty := ""
		l.Spec.HolderIdentity = &empty
		delete(l.Annotations, AnnotationHolder)
	}
	out, err := leases.Update(ctx, l, metav1.UpdateOptions{})
	if err != nil {
		return rv, err
	}
	return out.ResourceVersion, nil
}
