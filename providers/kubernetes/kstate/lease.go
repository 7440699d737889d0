package kstate

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/setpoint-dev/setpoint/engine/state"
)

// LabelLock marks the Leases that are locks ("shard", "member").
const LabelLock = "setpoint.dev/lock"

// DefaultShards is the number of shard Leases when none is given.
const DefaultShards = 16

func (b *Backend) shardCount() int {
	if b.Shards <= 0 {
		return DefaultShards
	}
	return b.Shards
}

// ShardLease is the name of shard i's Lease. The shard count is in the
// name: during a rollout that changes --shards, shard 3 of 16 and shard 3
// of 32 are other Leases (and a holder takes none while Leases of
// another count are held).
func (b *Backend) ShardLease(i int) string {
	return b.prefix + "-s" + strconv.Itoa(b.shardCount()) + "-shard-" + strconv.Itoa(i)
}

// shardIndex reads a shard Lease's name: its count and index.
func (b *Backend) shardIndex(name string) (count, i int, ok bool) {
	rest, found := strings.CutPrefix(name, b.prefix+"-s")
	if !found {
		return 0, 0, false
	}
	c, idx, found := strings.Cut(rest, "-shard-")
	if !found {
		return 0, 0, false
	}
	count, err1 := strconv.Atoi(c)
	i, err2 := strconv.Atoi(idx)
	return count, i, err1 == nil && err2 == nil
}

// holder is who takes a Lease: its identity and what the Lease says of it.
type holder struct {
	id   string
	info state.Holder
}

func newHolder(who string, now time.Time) holder {
	host, _ := os.Hostname()
	h := state.Holder{PID: os.Getpid(), Host: host, Who: who, Since: now.UTC()}
	return holder{id: fmt.Sprintf("%s/%d/%d", host, h.PID, h.Since.UnixNano()), info: h}
}

// leaseOps takes, renews and releases Leases of the backend's namespace.
type leaseOps struct{ b *Backend }

func (b *Backend) leases() leaseOps { return leaseOps{b} }

func holderID(l *coordv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// held reports whether a Lease has a holder whose renewal has not expired.
func held(l *coordv1.Lease, now time.Time) bool {
	if holderID(l) == "" || l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return false
	}
	return now.Before(l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second))
}

func (o leaseOps) lockedBy(l *coordv1.Lease) error {
	e := &state.LockedError{Path: fmt.Sprintf("lease %s/%s", o.b.namespace, l.Name)}
	var h state.Holder
	if json.Unmarshal([]byte(l.Annotations[AnnotationHolder]), &h) == nil && h.PID != 0 {
		e.Holder = &h
	}
	return e
}

// acquire takes the Lease name for me: free, expired or already mine.
func (o leaseOps) acquire(ctx context.Context, name string, me holder) error {
	b := o.b
	leases := b.core.CoordinationV1().Leases(b.namespace)
	now := metav1.NewMicroTime(b.Now())
	secs := int32(b.LeaseDuration / time.Second)
	info, _ := json.Marshal(me.info)
	kind := "shard"
	if strings.HasPrefix(name, b.prefix+"-member-") {
		kind = "member"
	}
	l, err := leases.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		l = &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: b.namespace,
			Labels:      map[string]string{LabelEnvironment: envLabel(b.env), LabelLock: kind},
			Annotations: map[string]string{AnnotationHolder: string(info)}},
			Spec: coordv1.LeaseSpec{HolderIdentity: &me.id, LeaseDurationSeconds: &secs, AcquireTime: &now, RenewTime: &now}}
		_, err := leases.Create(ctx, l, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return &state.LockedError{Path: fmt.Sprintf("lease %s/%s", b.namespace, name)}
		}
		if err != nil {
			return fmt.Errorf("taking lease %s/%s: %w", b.namespace, name, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading lease %s/%s: %w", b.namespace, name, err)
	}
	if held(l, b.Now()) && holderID(l) != me.id {
		return o.lockedBy(l)
	}
	if holderID(l) != me.id {
		l.Spec.AcquireTime = &now
	}
	l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds, l.Spec.RenewTime = &me.id, &secs, &now
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[AnnotationHolder] = string(info)
	if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); apierrors.IsConflict(err) {
		return &state.LockedError{Path: fmt.Sprintf("lease %s/%s", b.namespace, name)} // someone else took it first
	} else if err != nil {
		return fmt.Errorf("taking lease %s/%s: %w", b.namespace, name, err)
	}
	return nil
}

// renew moves the Lease's renewTime on, if it is still id's.
func (o leaseOps) renew(name, id string) error { return o.update(name, id, false) }

// release gives the Lease up at once, if it is still id's.
func (o leaseOps) release(name, id string) error { return o.update(name, id, true) }

func (o leaseOps) update(name, id string, release bool) error {
	b := o.b
	ctx, cancel := context.WithTimeout(context.Background(), b.LeaseDuration)
	defer cancel()
	leases := b.core.CoordinationV1().Leases(b.namespace)
	l, err := leases.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if holderID(l) != id {
		return fmt.Errorf("lease %s/%s was taken over", b.namespace, name)
	}
	now := metav1.NewMicroTime(b.Now())
	l.Spec.RenewTime = &now
	if release {
		empty := ""
		l.Spec.HolderIdentity = &empty
		delete(l.Annotations, AnnotationHolder)
	}
	_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
	return err
}
