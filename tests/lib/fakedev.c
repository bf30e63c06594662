/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The fake device of fakedev.h: queued operations over host memory,
 * each running a CPU reference function.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tally/feedback.h>
#include <tally/fixp.h>
#include <tally/powersgd.h>
#include <tally/quant.h>

#include "fakedev.h"

/* A staging block's device address is its host address with this bit:
 * not an address a CPU can use. */
#define DEV_TAG		(UINT64_C(1) << 62)
#define BLOCKS_MAX	64

/* One enqueued operation: run() and its arguments (host addresses). */
struct fop {
	void (*run)(const struct fop *o);
	const void *a;
	void *b;
	const void *c;
	size_t n;
	uint64_t u0, u1, u2;
	float f;
	int i;
};

struct fakedev_stream {
	enum fakedev_mode mode;
	uint64_t rng;
	struct fop *q;			/* operations base .. base + cap - 1 */
	size_t cap;
	uint64_t base;
	uint64_t pushed;		/* operations enqueued */
	uint64_t ran;			/* of them, run (in order) */
	uint64_t fail_at;		/* pushed count that fails, 0: none */
};

struct fev {
	struct fakedev_stream *s;	/* recorded on, NULL: never */
	uint64_t mark;			/* s->pushed then */
};

/* The staging blocks alive, for the address checks. */
static pthread_mutex_t blocks_lock = PTHREAD_MUTEX_INITIALIZER;
static struct { uintptr_t base; size_t len; } blocks[BLOCKS_MAX];

static void
die(const char *what, const void *p)
{
	fprintf(stderr, "fakedev: %s (%p)\n", what, p);
	abort();
}

/* Whether p lies in a staging block (host addresses). */
static int
in_block(uintptr_t p)
{
	int hit = 0;

	pthread_mutex_lock(&blocks_lock);
	for (unsigned int k = 0; k < BLOCKS_MAX && !hit; k++)
		hit = blocks[k].len > 0 && p >= blocks[k].base &&
			p < blocks[k].base + blocks[k].len;
	pthread_mutex_unlock(&blocks_lock);
	return hit;
}

/*
 * The host address of a device address p: a tagged staging address
 * untagged, device memory as it is. A host address of staging is what a
 * kernel must never get (kernel != 0); copies may take either.
 */
static void *
host_of(const void *p, int kernel)
{
	uintptr_t u = (uintptr_t)p;

	if (u & DEV_TAG) {
		if (!in_block(u & ~DEV_TAG))
			die("a device address of no staging block", p);
		return (void *)(u & ~DEV_TAG);
	}
	if (kernel && p != NULL && in_block(u))
		die("a kernel got a host address of staging", p);
	return (void *)u;
}

static uint64_t
xorshift(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

/* Runs s's queue up to (not including) operation mark. */
static void
run_to(struct fakedev_stream *s, uint64_t mark)
{
	while (s->ran < mark) {
		const struct fop *o = &s->q[s->ran - s->base];

		o->run(o);
		s->ran++;
	}
}

/* Room for one more operation in s's queue (run ones dropped). */
static void
room(struct fakedev_stream *s)
{
	size_t used = (size_t)(s->pushed - s->base);
	size_t pending = (size_t)(s->pushed - s->ran);
	struct fop *q;

	if (used < s->cap)
		return;
	if (pending < s->cap / 2) {
		memmove(s->q, s->q + (s->ran - s->base),
			pending * sizeof(*s->q));
		s->base = s->ran;
		return;
	}
	q = realloc(s->q, 2 * s->cap * sizeof(*q));
	if (q == NULL)
		die("out of memory for the queue", NULL);
	s->q = q;
	s->cap *= 2;
}

/* Enqueues o on stream, then runs what the mode says. */
static int
push(void *stream, const struct fop *o)
{
	struct fakedev_stream *s = stream;
	uint64_t pending;

	if (s == NULL)
		die("an operation on the NULL stream", NULL);
	if (s->fail_at != 0 && s->pushed + 1 == s->fail_at) {
		s->fail_at = 0;
		return -EIO;
	}
	room(s);
	s->q[s->pushed - s->base] = *o;
	s->pushed++;
	pending = s->pushed - s->ran;
	switch (s->mode) {
	case FAKEDEV_EAGER:
		run_to(s, s->pushed);
		break;
	case FAKEDEV_RANDOM:
		run_to(s, s->ran + xorshift(&s->rng) % (pending + 1));
		break;
	default:
		break;
	}
	return 0;
}

struct fakedev_stream *
fakedev_stream_new(enum fakedev_mode mode, uint64_t seed)
{
	struct fakedev_stream *s = calloc(1, sizeof(*s));

	if (s == NULL)
		return NULL;
	s->mode = mode;
	s->rng = seed | 1;
	s->cap = 1024;
	s->q = calloc(s->cap, sizeof(*s->q));
	if (s->q == NULL) {
		free(s);
		return NULL;
	}
	return s;
}

void
fakedev_stream_sync(struct fakedev_stream *s)
{
	run_to(s, s->pushed);
}

void
fakedev_stream_free(struct fakedev_stream *s)
{
	if (s == NULL)
		return;
	fakedev_stream_sync(s);
	free(s->q);
	free(s);
}

void
fakedev_fail_at(struct fakedev_stream *s, uint64_t k)
{
	s->fail_at = k == 0 ? 0 : s->pushed + k;
}

uint64_t
fakedev_enqueued(const struct fakedev_stream *s)
{
	return s->pushed;
}

/* Memory. */

static int
stage_alloc(size_t len, void **host, void **dev)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	void *p = aligned_alloc(page, (len + page - 1) / page * page);
	unsigned int k;

	if (p == NULL)
		return -ENOMEM;
	memset(p, 0, len);
	pthread_mutex_lock(&blocks_lock);
	for (k = 0; k < BLOCKS_MAX && blocks[k].len > 0; k++)
		;
	if (k < BLOCKS_MAX) {
		blocks[k].base = (uintptr_t)p;
		blocks[k].len = len;
	}
	pthread_mutex_unlock(&blocks_lock);
	if (k == BLOCKS_MAX) {
		free(p);
		return -ENOMEM;
	}
	*host = p;
	*dev = (void *)((uintptr_t)p | DEV_TAG);
	return 0;
}

static void
stage_free(void *host)
{
	pthread_mutex_lock(&blocks_lock);
	for (unsigned int k = 0; k < BLOCKS_MAX; k++)
		if (blocks[k].base == (uintptr_t)host)
			blocks[k].len = 0;
	pthread_mutex_unlock(&blocks_lock);
	free(host);
}

static int
dev_alloc(size_t len, void **d)
{
	*d = calloc(1, len > 0 ? len : 1);
	return *d != NULL ? 0 : -ENOMEM;
}

static void
dev_free(void *d)
{
	free(d);
}

static void
run_copy(const struct fop *o)
{
	memmove(o->b, o->a, o->n);
}

static int
copy(void *dst, const void *src, size_t len, void *stream)
{
	return push(stream, &(struct fop){ .run = run_copy,
		.a = host_of(src, 0), .b = host_of(dst, 0), .n = len });
}

static void
run_zero(const struct fop *o)
{
	memset(o->b, 0, o->n);
}

static int
zero(void *d, size_t len, void *stream)
{
	return push(stream, &(struct fop){ .run = run_zero,
		.b = host_of(d, 1), .n = len });
}

/* Events. */

static int
event_new(void **ev)
{
	*ev = calloc(1, sizeof(struct fev));
	return *ev != NULL ? 0 : -ENOMEM;
}

static void
event_free(void *ev)
{
	free(ev);
}

static int
record(void *ev, void *stream)
{
	struct fev *e = ev;

	if (stream == NULL)
		die("an event recorded on the NULL stream", NULL);
	e->s = stream;
	e->mark = e->s->pushed;
	return 0;
}

static int
sync_event(void *ev)
{
	struct fev *e = ev;

	if (e->s != NULL)
		run_to(e->s, e->mark);
	return 0;
}

/* The fake's streams wait by finishing what the event marks, now. */
static int
stream_wait(void *stream, void *ev)
{
	if (stream == NULL)
		die("the NULL stream waits", NULL);
	return sync_event(ev);
}

static int
device(int *id)
{
	*id = 0;
	return 0;
}

static const char *
why(void)
{
	return "the fake device was told to fail";
}

/*
 * Kernels: each wrapper checks what the CUDA entry point checks (NULL
 * pointers with elements), takes host addresses, and enqueues a run_
 * function that calls the CPU reference.
 */
#define K(p)	host_of((p), 1)

static void
run_absmax(const struct fop *o)
{
	*(float *)o->b = tally_fixp_absmax(o->a, o->n);
}

static int
absmax(const float *d_x, size_t n, float *d_out, void *stream)
{
	if (d_out == NULL || (d_x == NULL && n > 0))
		return -EINVAL;
	return push(stream, &(struct fop){ .run = run_absmax, .a = K(d_x),
		.b = K(d_out), .n = n });
}

static void
run_fixp_encode(const struct fop *o)
{
	tally_fixp_encode(o->a, o->b, o->n, o->i);
}

static int
fixp_encode(const float *d_x, int32_t *d_q, size_t n, int exp, void *stream)
{
	if (exp < TALLY_FIXP_EXP_MIN || exp > TALLY_FIXP_EXP_MAX ||
			(n > 0 && (d_x == NULL || d_q == NULL)))
		return -EINVAL;
	return push(stream, &(struct fop){ .run = run_fixp_encode,
		.a = K(d_x), .b = K(d_q), .n = n, .i = exp });
}

static void
run_fixp_decode(const struct fop *o)
{
	tally_fixp_decode(o->a, o->b, o->n, o->i);
}

static int
fixp_decode(const int32_t *d_q, float *d_x, size_t n, int exp, void *stream)
{
	if (exp < TALLY_FIXP_EXP_MIN || exp > TALLY_FIXP_EXP_MAX ||
			(n > 0 && (d_x == NULL || d_q == NULL)))
		return -EINVAL;
	return push(stream, &(struct fop){ .run = run_fixp_decode,
		.a = K(d_q), .b = K(d_x), .n = n, .i = exp });
}

static void
run_q16(const struct fop *o)
{
	tally_quant_encode_i16(o->a, o->b, o->n, o->f, (unsigned int)o->u0,
		o->u1, o->u2);
}

static void
run_q8(const struct fop *o)
{
	tally_quant_encode_i8(o->a, o->b, o->n, o->f, (unsigned int)o->u0,
		o->u1, o->u2);
}

static void
run_q4(const struct fop *o)
{
	tally_quant_encode_i4(o->a, o->b, o->n, o->f, (unsigned int)o->u0,
		o->u1, o->u2);
}

/* The quantizers' encoders: run as given, the rest as quant_encode(). */
static int
quant_encode(void (*run)(const struct fop *), const float *d_x, void *d_q,
	size_t n, float scale, unsigned int levels, uint64_t seed,
	uint64_t offset, void *stream)
{
	if (n > 0 && (d_x == NULL || d_q == NULL))
		return -EINVAL;
	return push(stream, &(struct fop){ .run = run, .a = K(d_x),
		.b = K(d_q), .n = n, .f = scale, .u0 = levels, .u1 = seed,
		.u2 = offset });
}

static int
q16_encode(const float *d_x, int16_t *d_q, size_t n, float scale,
	unsigned int levels, uint64_t seed, uint64_t offset, void *stream)
{
	return quant_encode(run_q16, d_x, d_q, n, scale, levels, seed, offset,
		stream);
}

static int
q8_encode(const float *d_x, int8_t *d_q, size_t n, float scale,
	unsigned int levels, uint64_t seed, uint64_t offset, void *stream)
{
	return quant_encode(run_q8, d_x, d_q, n, scale, levels, seed, offset,
		stream);
}

static int
q4_encode(const float *d_x, uint8_t *d_q, size_t n, float scale,
	unsigned int levels, uint64_t seed, uint64_t offset, void *stream)
{
	return quant_encode(run_q4, d_x, d_q, n, scale, levels, seed, offset,
		stream);
}

/* Decoders of sums with a scale: (a, b, n, f). */
static int
scaled(void (*run)(const struct fop *), const void *d_s, float *d_x,
	size_t n, float scale, void *stream)
{
	if (n > 0 && (d_s == NULL || d_x == NULL))
		return -EINVAL;
	return push(stream, &(struct fop){ .run = run, .a = K(d_s),
		.b = K(d_x), .n = n, .f = scale });
}

static void
run_qd32(const struct fop *o)
{
	tally_quant_decode_i32(o->a, o->b, o->n, o->f);
}

static void
run_qd16(const struct fop *o)
{
	tally_quant_decode_i16(o->a, o->b, o->n, o->f);
}

static void
run_qd8(const struct fop *o)
{
	tally_quant_decode_i8(o->a, o->b, o->n, o->f);
}

static void
run_qd4(const struct fop *o)
{
	tally_quant_decode_i4(o->a, o->b, o->n, o->f);
}

static void
run_td32(const struct fop *o)
{
	tally_tern_decode_i32(o->a, o->b, o->n, o->f);
}

static void
run_td4(const struct fop *o)
{
	tally_tern_decode_i4(o->a, o->b, o->n, o->f);
}

static void
run_sbits(const struct fop *o)
{
	tally_sign_decode_bits(o->a, o->b, o->n, o->f);
}

static int
q_decode_i32(const int32_t *d_s, float *d_x, size_t n, float scale,
	void *stream)
{
	return scaled(run_qd32, d_s, d_x, n, scale, stream);
}

static int
q_decode_i16(const int16_t *d_s, float *d_x, size_t n, float scale,
	void *stream)
{
	return scaled(run_qd16, d_s, d_x, n, scale, stream);
}

static int
q_decode_i8(const int8_t *d_s, float *d_x, size_t n, float scale,
	void *stream)
{
	return scaled(run_qd8, d_s, d_x, n, scale, stream);
}

static int
q_decode_i4(const uint8_t *d_s, float *d_x, size_t n, float scale,
	void *stream)
{
	return scaled(run_qd4, d_s, d_x, n, scale, stream);
}

static int
tern_decode_i32(const int32_t *d_s, float *d_x, size_t n, float scale,
	void *stream)
{
	return scaled(run_td32, d_s, d_x, n, scale, stream);
}

static int
tern_decode_i4(const uint8_t *d_s, float *d_x, size_t n, float scale,
	void *stream)
{
	return scaled(run_td4, d_s, d_x, n, scale, stream);
}

static int
sign_decode_bits(const uint8_t *d_bits, float *d_x, size_t n, float scale,
	void *stream)
{
	return scaled(run_sbits, d_bits, d_x, n, scale, stream);
}

static void
run_svotes(const struct fop *o)
{
	tally_sign_decode_votes(o->a, o->b, o->n, (unsigned int)o->u0, o->f);
}

static int
sign_decode_votes(const int8_t *d_votes, float *d_x, size_t n,
	unsigned int world, float scale, void *stream)
{
	if (n > 0 && (d_votes == NULL || d_x == NULL))
		return -EINVAL;
	return push(stream, &(struct fop){ .run = run_svotes,
		.a = K(d_votes), .b = K(d_x), .n = n, .u0 = world,
		.f = scale });
}

static void
run_sign(const struct fop *o)
{
	tally_sign_encode(o->a, o->b, o->n);
}

static int
sign_encode(const float *d_x, uint8_t *d_bits, size_t n, void *stream)
{
	if (n > 0 && (d_x == NULL || d_bits == NULL))
		return -EINVAL;
	return push(stream, &(struct fop){ .run = run_sign, .a = K(d_x),
		.b = K(d_bits), .n = n });
}

static void
run_ef_apply(const struct fop *o)
{
	tally_ef_apply(o->b, o->a, o->c, o->n);
}

static int
ef_apply(float *d_v, const float *d_g, const float *d_r, size_t n,
	void *stream)
{
	if (n > 0 && (d_v == NULL || d_g == NULL || d_r == NULL))
		return -EINVAL;
	return push(stream, &(struct fop){ .run = run_ef_apply, .a = K(d_g),
		.b = K(d_v), .c = K(d_r), .n = n });
}

static void
run_ef_update(const struct fop *o)
{
	size_t inexact = tally_ef_update(o->b, o->a, o->c, o->n);

	if (o->u0 != 0)
		*(unsigned long long *)(uintptr_t)o->u0 += inexact;
}

static int
ef_update(float *d_r, const float *d_v, const float *d_sent, size_t n,
	unsigned long long *d_inexact, void *stream)
{
	if (n > 0 && (d_r == NULL || d_v == NULL || d_sent == NULL))
		return -EINVAL;
	return push(stream, &(struct fop){ .run = run_ef_update,
		.a = K(d_v), .b = K(d_r), .c = K(d_sent), .n = n,
		.u0 = (uintptr_t)K(d_inexact) });
}

static void
run_2bit(const struct fop *o)
{
	/* b: the residual, c: the i4 output (written through a cast). */
	tally_2bit_encode_i4(o->b, o->a, (uint8_t *)(uintptr_t)o->c, o->n,
		o->i);
}

static int
twobit_encode_i4(float *d_r, const float *d_g, uint8_t *d_q4, size_t n,
	int exp, void *stream)
{
	if (n > 0 && (d_r == NULL || d_g == NULL || d_q4 == NULL))
		return -EINVAL;
	return push(stream, &(struct fop){ .run = run_2bit, .a = K(d_g),
		.b = K(d_r), .c = K(d_q4), .n = n, .i = exp });
}

static void
run_tern(const struct fop *o)
{
	(void)tally_tern_encode_i4(o->a, o->b, o->n, o->f, o->u1, o->u2);
}

static int
tern_encode_i4(const float *d_g, uint8_t *d_q4, size_t n, float scale,
	uint64_t seed, uint64_t offset, void *stream)
{
	if (n > 0 && (d_g == NULL || d_q4 == NULL))
		return -EINVAL;
	return push(stream, &(struct fop){ .run = run_tern, .a = K(d_g),
		.b = K(d_q4), .n = n, .f = scale, .u1 = seed, .u2 = offset });
}

static void
run_gather(const struct fop *o)
{
	(void)tally_randk_gather(o->a, o->b, o->u0, o->n, o->u1, o->u2);
}

static int
randk_gather(const float *d_x, float *d_y, uint64_t first, size_t cnt,
	uint64_t n, uint64_t seed, void *stream)
{
	if (first + cnt > n || (cnt > 0 && (d_x == NULL || d_y == NULL)))
		return -EINVAL;
	return push(stream, &(struct fop){ .run = run_gather, .a = K(d_x),
		.b = K(d_y), .n = cnt, .u0 = first, .u1 = n, .u2 = seed });
}

static void
run_scatter(const struct fop *o)
{
	(void)tally_randk_scatter(o->a, o->b, o->u0, o->n, o->u1, o->u2,
		o->f);
}

static int
randk_scatter(const float *d_y, float *d_x, uint64_t first, size_t cnt,
	uint64_t n, uint64_t seed, float scale, void *stream)
{
	if (first + cnt > n || (cnt > 0 && (d_x == NULL || d_y == NULL)))
		return -EINVAL;
	return push(stream, &(struct fop){ .run = run_scatter, .a = K(d_y),
		.b = K(d_x), .n = cnt, .u0 = first, .u1 = n, .u2 = seed,
		.f = scale });
}

static void
run_init_q(const struct fop *o)
{
	tally_psgd_init_q(o->b, (uint32_t)o->u0, (unsigned int)o->i, o->u1);
}

static int
psgd_init_q(float *d_q, uint32_t cols, unsigned int rank, uint64_t seed,
	void *stream)
{
	return push(stream, &(struct fop){ .run = run_init_q, .b = K(d_q),
		.u0 = cols, .i = (int)rank, .u1 = seed });
}

static void
run_psgd_p(const struct fop *o)
{
	tally_psgd_p(o->a, o->n, (uint32_t)o->u0, (uint32_t)o->u1, o->c,
		(unsigned int)o->i, o->b);
}

static int
psgd_p(const float *d_m, size_t n, uint32_t rows, uint32_t cols,
	const float *d_q, unsigned int rank, float *d_p, void *stream)
{
	return push(stream, &(struct fop){ .run = run_psgd_p, .a = K(d_m),
		.b = K(d_p), .c = K(d_q), .n = n, .u0 = rows, .u1 = cols,
		.i = (int)rank });
}

static void
run_orth(const struct fop *o)
{
	tally_psgd_orthonormalize(o->b, (uint32_t)o->u0, (unsigned int)o->i);
}

static int
psgd_orthonormalize(float *d_p, uint32_t rows, unsigned int rank,
	void *stream)
{
	return push(stream, &(struct fop){ .run = run_orth, .b = K(d_p),
		.u0 = rows, .i = (int)rank });
}

static void
run_psgd_q(const struct fop *o)
{
	tally_psgd_q(o->a, o->n, (uint32_t)o->u0, (uint32_t)o->u1, o->c,
		(unsigned int)o->i, o->b);
}

static int
psgd_q(const float *d_m, size_t n, uint32_t rows, uint32_t cols,
	const float *d_p, unsigned int rank, float *d_q, void *stream)
{
	return push(stream, &(struct fop){ .run = run_psgd_q, .a = K(d_m),
		.b = K(d_q), .c = K(d_p), .n = n, .u0 = rows, .u1 = cols,
		.i = (int)rank });
}

static void
run_decompress(const struct fop *o)
{
	/* a: P, c: Q, b: M. */
	tally_psgd_decompress(o->a, o->c, (uint32_t)o->u0, (uint32_t)o->u1,
		(unsigned int)o->i, o->f, o->b, o->n);
}

static int
psgd_decompress(const float *d_p, const float *d_q, uint32_t rows,
	uint32_t cols, unsigned int rank, float scale, float *d_m, size_t n,
	void *stream)
{
	return push(stream, &(struct fop){ .run = run_decompress,
		.a = K(d_p), .b = K(d_m), .c = K(d_q), .n = n, .u0 = rows,
		.u1 = cols, .i = (int)rank, .f = scale });
}

const struct tally_dev_ops fakedev_ops = {
	.name = "fake",
	.stage_alloc = stage_alloc,
	.stage_free = stage_free,
	.dev_alloc = dev_alloc,
	.dev_free = dev_free,
	.copy = copy,
	.zero = zero,
	.event_new = event_new,
	.event_free = event_free,
	.record = record,
	.sync = sync_event,
	.stream_wait = stream_wait,
	.device = device,
	.why = why,
	.absmax = absmax,
	.fixp_encode = fixp_encode,
	.fixp_decode = fixp_decode,
	.q16_encode = q16_encode,
	.q8_encode = q8_encode,
	.q4_encode = q4_encode,
	.q_decode_i32 = q_decode_i32,
	.q_decode_i16 = q_decode_i16,
	.q_decode_i8 = q_decode_i8,
	.q_decode_i4 = q_decode_i4,
	.ef_apply = ef_apply,
	.ef_update = ef_update,
	.twobit_encode_i4 = twobit_encode_i4,
	.tern_encode_i4 = tern_encode_i4,
	.tern_decode_i32 = tern_decode_i32,
	.tern_decode_i4 = tern_decode_i4,
	.sign_encode = sign_encode,
	.sign_decode_votes = sign_decode_votes,
	.sign_decode_bits = sign_decode_bits,
	.randk_gather = randk_gather,
	.randk_scatter = randk_scatter,
	.psgd_init_q = psgd_init_q,
	.psgd_p = psgd_p,
	.psgd_orthonormalize = psgd_orthonormalize,
	.psgd_q = psgd_q,
	.psgd_decompress = psgd_decompress,
};
