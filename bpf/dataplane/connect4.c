//go:build ignore

// The RouteGroup dataplane: a cgroup connect4 program that rewrites a
// connect to a VIP into a connect to one of its backends, chosen by slot
// from the active side of an A/B table. The agent (the eBPF provider)
// writes the inactive side whole, then flips the group's epoch: one u32
// write, so a connect sees the old table or the new one, never a mix.
//
// Slot choice: a hash of the socket's cookie modulo the table size. A
// socket that retries connect() lands on the same backend; distinct
// sockets spread as the table says. No per-connect random, so a test (or
// an operator) can predict a socket's backend from its cookie.
//
// Admission: soft sheds a fraction of new connects (per-connect random),
// hard admits a budget per second through a token bucket; a refused
// connect returns EPERM to the caller.
//
// Failsafe: the agent refreshes a heartbeat every tick; when it is older
// than the group's threshold (the agent died, and its link stays pinned),
// connects split evenly over the backends last known healthy, and
// admission is off.

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define MAX_BACKENDS 1024
#define AF_INET 2

// Set by the loader: the slot map holds groups × 2 sides × slot_stride.
volatile const __u32 slot_stride = 65537;
volatile const __u32 max_groups = 8;

struct vip_key {
	__u32 ip;   // network order
	__u32 port; // network order, in the low 16 bits (as user_port)
	__u32 proto;
};

struct backend {
	__u32 ip;   // network order
	__u32 port; // network order, in the low 16 bits; 0: no backend
};

struct side {
	__u32 size;    // slots in this side's table
	__u32 healthy; // ids in this side's failsafe list
};

enum admission_mode { ADMIT_NORMAL = 0, ADMIT_SOFT = 1, ADMIT_HARD = 2 };

struct control {
	__u32 mode;
	__u32 shed_ppm;      // soft: refused per million
	__u64 rate_milli;    // hard: connects per 1000 s (budget × 1000)
	__u64 burst;         // hard: bucket size, connects
	__u64 failsafe_ns;   // heartbeat older than this: failsafe
};

struct bucket {
	struct bpf_spin_lock lock;
	__u64 tokens; // in 1e-12 connects
	__u64 last_ns;
};

// Per group and CPU: what happened to connects besides routing (routed
// connects are the backends' counters, so the hot path skips this map).
struct stats {
	__u64 shed;     // soft refusals
	__u64 refused;  // hard refusals
	__u64 failsafe; // routed by the failsafe's even split
	__u64 missed;   // a VIP whose table had no usable entry
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, struct vip_key);
	__type(value, __u32);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} vips SEC(".maps");

// The flip: side = epoch & 1.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 8);
	__type(key, __u32);
	__type(value, __u32);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} epochs SEC(".maps");

// Indexed by group × 2 + side.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, struct side);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sides SEC(".maps");

// Indexed by (group × 2 + side) × slot_stride + slot: a backend id.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 16 * 65537);
	__type(key, __u32);
	__type(value, __u32);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} slots SEC(".maps");

// Indexed by (group × 2 + side) × MAX_BACKENDS + k: the failsafe's ids.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 16 * MAX_BACKENDS);
	__type(key, __u32);
	__type(value, __u32);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} evens SEC(".maps");

// Indexed by group × MAX_BACKENDS + id.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 8 * MAX_BACKENDS);
	__type(key, __u32);
	__type(value, struct backend);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} backends SEC(".maps");

// Indexed by group × MAX_BACKENDS + id: connects sent, per CPU.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 8 * MAX_BACKENDS);
	__type(key, __u32);
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 8);
	__type(key, __u32);
	__type(value, struct control);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} controls SEC(".maps");

// The agent's last tick, CLOCK_MONOTONIC_COARSE ns (as
// bpf_ktime_get_coarse_ns: the fine clock costs more per connect than a
// failsafe threshold of a second needs).
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 8);
	__type(key, __u32);
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} heartbeats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 8);
	__type(key, __u32);
	__type(value, struct bucket);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} buckets SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 8);
	__type(key, __u32);
	__type(value, struct stats);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} group_stats SEC(".maps");

#define TOKEN 1000000000000ULL // one connect, in bucket units

// admit takes a token from the group's bucket, refilled at rate_milli
// per 1000 s up to burst.
enum { SHED = 0, REFUSED = 1, FAILSAFE = 2, MISSED = 3 };

// note counts what happened to a connect besides routing.
static __always_inline void note(__u32 g, int what)
{
	struct stats *st = bpf_map_lookup_elem(&group_stats, &g);
	if (!st)
		return;
	if (what == SHED)
		st->shed++;
	else if (what == REFUSED)
		st->refused++;
	else if (what == FAILSAFE)
		st->failsafe++;
	else
		st->missed++;
}

static __always_inline int admit(__u32 g, const struct control *c, __u64 now)
{
	struct bucket *b = bpf_map_lookup_elem(&buckets, &g);
	if (!b || c->rate_milli == 0)
		return 0;
	__u64 cap = c->burst * TOKEN;
	int ok = 0;
	bpf_spin_lock(&b->lock);
	__u64 elapsed = now - b->last_ns;
	if (b->last_ns == 0 || now < b->last_ns || elapsed >= cap / c->rate_milli)
		b->tokens = cap;
	else {
		b->tokens += elapsed * c->rate_milli;
		if (b->tokens > cap)
			b->tokens = cap;
	}
	b->last_ns = now;
	if (b->tokens >= TOKEN) {
		b->tokens -= TOKEN;
		ok = 1;
	}
	bpf_spin_unlock(&b->lock);
	return ok;
}

SEC("cgroup/connect4")
int connect4(struct bpf_sock_addr *ctx)
{
	if (ctx->user_family != AF_INET)
		return 1;
	struct vip_key k = {.ip = ctx->user_ip4, .port = ctx->user_port, .proto = ctx->protocol};
	__u32 *gp = bpf_map_lookup_elem(&vips, &k);
	if (!gp)
		return 1;
	__u32 g = *gp;
	if (g >= max_groups)
		return 1;
	struct control *c = bpf_map_lookup_elem(&controls, &g);
	__u64 *hb = bpf_map_lookup_elem(&heartbeats, &g);
	__u32 *ep = bpf_map_lookup_elem(&epochs, &g);
	if (!c || !hb || !ep)
		return 1;
	__u64 now = bpf_ktime_get_coarse_ns();
	// The coarse clock may read a hair behind the agent's write.
	int failsafe = *hb == 0 || (now > *hb && now - *hb > c->failsafe_ns);
	__u32 si = g * 2 + (*ep & 1);
	struct side *sd = bpf_map_lookup_elem(&sides, &si);
	if (!sd)
		return 1;
	__u64 cookie = bpf_get_socket_cookie(ctx);
	__u32 h = (__u32)((cookie * 0x9E3779B97F4A7C15ULL) >> 32);
	__u32 *id;
	if (failsafe) {
		if (sd->healthy == 0 || sd->healthy > MAX_BACKENDS) {
			note(g, MISSED);
			return 1;
		}
		__u32 ei = si * MAX_BACKENDS + h % sd->healthy;
		id = bpf_map_lookup_elem(&evens, &ei);
	} else {
		if (c->mode == ADMIT_SOFT && bpf_get_prandom_u32() % 1000000 < c->shed_ppm) {
			note(g, SHED);
			return 0;
		}
		if (c->mode == ADMIT_HARD && !admit(g, c, now)) {
			note(g, REFUSED);
			return 0;
		}
		if (sd->size == 0 || sd->size > slot_stride) {
			note(g, MISSED);
			return 1;
		}
		__u32 ti = si * slot_stride + h % sd->size;
		id = bpf_map_lookup_elem(&slots, &ti);
	}
	if (!id || *id >= MAX_BACKENDS) {
		note(g, MISSED);
		return 1;
	}
	__u32 bi = g * MAX_BACKENDS + *id;
	struct backend *be = bpf_map_lookup_elem(&backends, &bi);
	if (!be || be->port == 0) {
		note(g, MISSED);
		return 1;
	}
	ctx->user_ip4 = be->ip;
	ctx->user_port = be->port;
	__u64 *n = bpf_map_lookup_elem(&counters, &bi);
	if (n)
		*n += 1;
	if (failsafe)
		note(g, FAILSAFE);
	return 1;
}

char __license[] SEC("license") = "Dual MIT/GPL";
