package kstate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/state"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/internal/kubetest"
	"github.com/setpoint-dev/setpoint/internal/testutil"
)

func TestMain(m *testing.M) { kubetest.Main(m) }

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

var (
	obj  = addrs.Object{Provider: "kubernetes", Kind: "Deployment", Namespace: "shop", Name: "checkout"}
	attr = addrs.Attr{Object: obj, Path: addrs.MustPath("spec.replicas")}
)

func setUser(s *state.State, n int64) {
	v := values.CountOf(n)
	s.Entry(attr).User = &v
}

func user(t *testing.T, s *state.State) int64 {
	t.Helper()
	e, ok := s.Lookup(attr)
	if !ok || e.User == nil {
		t.Fatal("no entry")
	}
	return e.User.Int()
}

func TestRoundTripAndOnlyChangedShardsWritten(t *testing.T) {
	env := kubetest.Shared(t)
	ns := env.Namespace(t)
	b := New(env.Clientset(t), ns, "prod")
	s, err := b.Load(ctxT(t))
	if err != nil || len(s.Objects()) != 0 {
		t.Fatal(s.Objects(), err)
	}
	setUser(s, 3)
	if st, err := b.Save(ctxT(t), s); err != nil || st.Written != 1 {
		t.Fatal(st, err)
	}
	if st, err := b.Save(ctxT(t), s); err != nil || st.Written != 0 {
		t.Fatalf("an unchanged state wrote %+v %v", st, err)
	}
	// Another process (a new backend) reads the same.
	s2, err := New(env.Clientset(t), ns, "prod").Load(ctxT(t))
	if err != nil || user(t, s2) != 3 {
		t.Fatal(err)
	}
	// Another Environment in the namespace sees nothing of it.
	if s3, err := New(env.Clientset(t), ns, "staging").Load(ctxT(t)); err != nil || len(s3.Objects()) != 0 {
		t.Fatal(s3.Objects(), err)
	}
	// Forgetting the object removes its configmap.
	s.Delete(attr)
	if st, err := b.Save(ctxT(t), s); err != nil || st.Removed != 1 {
		t.Fatal(st, err)
	}
	cms, _ := env.Clientset(t).CoreV1().ConfigMaps(ns).List(ctxT(t), metav1.ListOptions{LabelSelector: LabelState})
	if len(cms.Items) != 0 {
		t.Fatalf("left: %d configmaps", len(cms.Items))
	}
}

// Two writers that loaded the same shard: the second's save is refused,
// and the first's value is what stays.
func TestConcurrentWritersLoseNothing(t *testing.T) {
	env := kubetest.Shared(t)
	ns := env.Namespace(t)
	b0 := New(env.Clientset(t), ns, "prod")
	s0, _ := b0.Load(ctxT(t))
	setUser(s0, 1)
	if _, err := b0.Save(ctxT(t), s0); err != nil {
		t.Fatal(err)
	}
	b1, b2 := New(env.Clientset(t), ns, "prod"), New(env.Clientset(t), ns, "prod")
	s1, _ := b1.Load(ctxT(t))
	s2, _ := b2.Load(ctxT(t))
	setUser(s1, 5)
	setUser(s2, 7)
	if _, err := b1.Save(ctxT(t), s1); err != nil {
		t.Fatal(err)
	}
	_, err := b2.Save(ctxT(t), s2)
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("the second writer: %v", err)
	}
	s, _ := New(env.Clientset(t), ns, "prod").Load(ctxT(t))
	if user(t, s) != 5 {
		t.Fatalf("stored %d, want the first writer's 5", user(t, s))
	}
}

// A damaged configmap is named and left alone; the others load.
func TestCorruptShard(t *testing.T) {
	env := kubetest.Shared(t)
	ns := env.Namespace(t)
	b := New(env.Clientset(t), ns, "prod")
	s, _ := b.Load(ctxT(t))
	setUser(s, 2)
	if _, err := b.Save(ctxT(t), s); err != nil {
		t.Fatal(err)
	}
	bad := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: b.prefix + "-bad", Namespace: ns,
		Labels: map[string]string{LabelState: "shard", LabelEnvironment: "prod"}}, Data: map[string]string{DataKey: `{"version":9`}}
	if _, err := env.Clientset(t).CoreV1().ConfigMaps(ns).Create(ctxT(t), bad, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	s, err := New(env.Clientset(t), ns, "prod").Load(ctxT(t))
	var le *state.LoadError
	if !errors.As(err, &le) || len(le.Shards) != 1 || !strings.Contains(err.Error(), b.prefix+"-bad") {
		t.Fatalf("load: %v", err)
	}
	if user(t, s) != 2 {
		t.Fatal("the good shard")
	}
}

func TestLeaseLock(t *testing.T) {
	env := kubetest.Shared(t)
	ns := env.Namespace(t)
	b1, b2 := New(env.Clientset(t), ns, "prod"), New(env.Clientset(t), ns, "prod")
	// b2's lock, taken below, renews every third of an hour: no renewal
	// races the successor's takeover however slow the machine is.
	b2.LeaseDuration = time.Hour
	unlock1, err := b1.Lock(ctxT(t), "setpoint watch --in-cluster", false)
	if err != nil {
		t.Fatal(err)
	}
	_, err = b2.Lock(ctxT(t), "setpoint apply", false)
	var locked *state.LockedError
	if !errors.As(err, &locked) || locked.Holder == nil || locked.Holder.Who != "setpoint watch --in-cluster" {
		t.Fatalf("a second holder: %v", err)
	}
	// Waiting gives up with the context, naming the holder. The context
	// ends once the waiter was refused and waits to try again (a timeout
	// could end it in the middle of a slow List instead).
	waiting := make(chan struct{})
	var once sync.Once
	b2.retryAfter = func(time.Duration) <-chan time.Time {
		once.Do(func() { close(waiting) })
		return nil
	}
	ctx, cancel := context.WithCancel(ctxT(t))
	errc := make(chan error, 1)
	go func() { _, err := b2.Lock(ctx, "setpoint apply", true); errc <- err }()
	select {
	case <-waiting:
	case err := <-errc:
		t.Fatalf("waiting: returned before waiting: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("waiting: the waiter never waited")
	}
	cancel()
	err = <-errc
	b2.retryAfter = nil
	if !errors.As(err, &locked) || locked.Waited == nil || locked.Holder == nil || locked.Holder.Who != "setpoint watch --in-cluster" {
		t.Fatalf("waiting: %v", err)
	}
	if err := unlock1(); err != nil {
		t.Fatal(err)
	}
	unlock2, err := b2.Lock(ctxT(t), "setpoint apply", false)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	// A holder that stops renewing loses the lock after LeaseDuration.
	b3 := New(env.Clientset(t), ns, "prod")
	b3.Now = func() time.Time { return time.Now().Add(b2.LeaseDuration + time.Second) }
	unlock3, err := b3.Lock(ctxT(t), "successor", false)
	if err != nil {
		t.Fatalf("taking an expired lease: %v", err)
	}
	if err := unlock2(); err == nil || !strings.Contains(err.Error(), "taken over") {
		t.Fatalf("the old holder's unlock: %v", err)
	}
	if err := unlock3(); err != nil {
		t.Fatal(err)
	}
}

// waitFor is testutil.Eventually.
func waitFor(t testing.TB, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	return testutil.Eventually(t, within, what, cond)
}

// pollUntil is waitFor with the tests' deadline.
func pollUntil(t testing.TB, what string, cond func() bool) { waitFor(t, 30*time.Second, what, cond) }

// split reports whether the holders own every shard exactly once, each
// at most its share.
func split(hs []*Holder, n int) bool {
	seen := map[int]bool{}
	share := (n + len(hs) - 1) / len(hs)
	for _, h := range hs {
		owned := h.Owned()
		if len(owned) > share {
			return false
		}
		for _, i := range owned {
			if seen[i] {
				return false
			}
			seen[i] = true
		}
	}
	return len(seen) == n
}

// Three replicas split 16 shards; one dies without releasing anything;
// the two others hold all 16 once its Leases expire.
func TestShardsSplitAndMoveOnDeath(t *testing.T) {
	env := kubetest.Shared(t)
	ns := env.Namespace(t)
	var hs []*Holder
	cancels := make([]context.CancelFunc, 3)
	done := make([]chan struct{}, 3)
	for i := range 3 {
		b := New(env.Clientset(t), ns, "prod")
		b.LeaseDuration = 3 * time.Second
		h := b.NewHolder(fmt.Sprintf("replica-%d", i))
		h.RetryPeriod = 200 * time.Millisecond
		hs = append(hs, h)
		ctx, cancel := context.WithCancel(context.Background())
		cancels[i], done[i] = cancel, make(chan struct{})
		go func() { defer close(done[i]); _ = h.Run(ctx) }()
	}
	t.Cleanup(func() {
		for i := range cancels {
			cancels[i]()
			<-done[i]
		}
	})
	waitFor(t, 30*time.Second, "three replicas split 16 shards", func() bool { return split(hs, 16) })
	// The Leases say the same as the holders.
	for _, h := range hs {
		for _, i := range h.Owned() {
			l, err := env.Clientset(t).CoordinationV1().Leases(ns).Get(ctxT(t), h.b.ShardLease(i), metav1.GetOptions{})
			if err != nil || holderID(l) != h.ID() {
				t.Fatalf("shard %d: the holder says %s, the lease %v (%v)", i, h.ID(), l, err)
			}
		}
	}
	hs[0].crash = true
	cancels[0]()
	<-done[0]
	// Never two owners of a shard, the dead one included (it believes it
	// holds its shards until it would have had to renew them).
	took := waitFor(t, 30*time.Second, "two replicas take the dead one's shards", func() bool {
		for i := range 16 {
			owners := 0
			for _, h := range hs {
				if h.Owns(i) {
					owners++
				}
			}
			if owners > 1 {
				t.Fatalf("shard %d has %d owners", i, owners)
			}
		}
		return split(hs[1:], 16)
	})
	t.Logf("reshard after a death: %s (lease 3s, retry 200ms)", took)
}

// BenchmarkReshard: three replicas hold 16 shards; one dies without
// releasing; the time until the two others hold all 16 (lease 3 s, a look
// every 200 ms). Goal: at most the lease duration + 1 s.
func BenchmarkReshard(b *testing.B) {
	env := kubetest.Shared(b)
	var total time.Duration
	for b.Loop() {
		ns := env.Namespace(b)
		var hs []*Holder
		var cancels []context.CancelFunc
		var dones []chan struct{}
		for i := range 3 {
			be := New(env.Clientset(b), ns, "bench")
			be.LeaseDuration = 3 * time.Second
			h := be.NewHolder(fmt.Sprintf("replica-%d", i))
			h.RetryPeriod = 200 * time.Millisecond
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); _ = h.Run(ctx) }()
			hs, cancels, dones = append(hs, h), append(cancels, cancel), append(dones, done)
		}
		pollUntil(b, "three replicas split 16 shards", func() bool { return split(hs, 16) })
		hs[0].crash = true
		start := time.Now()
		cancels[0]()
		<-dones[0]
		pollUntil(b, "two replicas take the dead one's shards", func() bool { return split(hs[1:], 16) })
		total += time.Since(start)
		for i := 1; i < 3; i++ {
			cancels[i]()
			<-dones[i]
		}
	}
	b.ReportMetric(total.Seconds()/float64(b.N), "s/reshard")
}
