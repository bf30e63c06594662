/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nccl-harness's phases, in the order NCCL meets the plugin: tables and
 * properties, the net's transfers, the collnet group, allreduces, a
 * killed rank, closing.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coord.h"
#include "data.h"
#include "harness.h"

/* Versions, init with a logger, devices, properties, reduceSupport. */
int
phase_tables(struct harness *h)
{
	struct tally_nccl_props np, cp;
	struct tally_nccl_comm_config cfg = { -1 };
	int n = 0, bad = 0;

	check(h, h->p.net && h->p.coll, "ncclNetPlugin_v%d and "
		"ncclCollNetPlugin_v%d found as NCCL 2.28 looks them up",
		h->p.net_version, h->p.coll_version);
	if (h->p.net == NULL || h->p.coll == NULL)
		return -1;
	check(h, h->p.net->init(&h->nctx, 0x7a11, &cfg, tnl_logger, NULL) == 0 &&
		h->p.net->devices(&n) == 0 && n == 1 &&
		h->p.net->get_properties(0, &np) == 0, "net init, 1 device");
	check(h, h->p.coll->init(&h->cctx, 0x7a11, tnl_logger) == 0 &&
		h->p.coll->devices(&n) == 0 && n == 1 &&
		h->p.coll->get_properties(0, &cp) == 0,
		"collnet init (TALLY_URL), 1 device");
	check(h, strcmp(np.name, cp.name) == 0 && cp.max_coll_bytes > 0 &&
		cp.max_coll_bytes <= TALLY_NCCL_MAX_NET_BYTES &&
		(cp.ptr_support & TALLY_NCCL_PTR_HOST),
		"properties: one name (%s), maxCollBytes %zu, host memory",
		np.name, cp.max_coll_bytes);
	for (int t = 0; t < TALLY_NCCL_NTYPES; t++)
		for (int op = 0; op < TALLY_NCCL_NOPS; op++) {
			int s = -1;

			h->p.coll->reduce_support(t, op, &s);
			bad += s != (op == TALLY_NCCL_SUM &&
				(t == TALLY_NCCL_FLOAT32 ||
				 t == TALLY_NCCL_INT32 ||
				 t == TALLY_NCCL_UINT32 ||
				 t == TALLY_NCCL_BFLOAT16 ||
				 t == TALLY_NCCL_FLOAT16));
		}
	check(h, bad == 0, "reduceSupport: sum of f32, i32, u32, bf16, f16 "
		"only (host memory); f64, i64, i8, fp8 and prod/max/min/avg "
		"refused");
	return h->cctx != NULL ? 0 : -1;
}

/* Connects to next's handle and accepts from the listener, as NCCL's
 * proxy does, until both comms are there (or 30 s passed). */
static int
ring_connect(struct harness *h, void *next_handle, void *l, void **s,
	void **r)
{
	double t0 = data_now();

	*s = *r = NULL;
	while ((*s == NULL || *r == NULL) && data_now() - t0 < 30) {
		if (*s == NULL && h->p.net->connect(h->nctx, 0, next_handle,
		    s, NULL) != 0)
			return -1;
		if (*r == NULL && h->p.net->accept(l, r, NULL) != 0)
			return -1;
	}
	return *s != NULL && *r != NULL ? 0 : -1;
}

/* Sends from sbuf and receives into rbuf at once; 0 when both done. */
static int
ring_transfer(struct harness *h, void *s, void *r, char *sbuf, char *rbuf,
	size_t len, int *got)
{
	void *sm = NULL, *rm = NULL, *sr = NULL, *rr = NULL, *d = rbuf;
	int sd = 0, rd = 0, tag = 1, rc = 0;
	double t0 = data_now();

	if (h->p.net->reg_mr(s, sbuf, len, TALLY_NCCL_PTR_HOST, &sm) != 0 ||
	    h->p.net->reg_mr(r, rbuf, len, TALLY_NCCL_PTR_HOST, &rm) != 0)
		return -1;
	while ((sr == NULL || rr == NULL) && data_now() - t0 < 30) {
		if (sr == NULL)
			h->p.net->isend(s, sbuf, len, 1, sm, NULL, &sr);
		if (rr == NULL)
			h->p.net->irecv(r, 1, &d, &len, &tag, &rm, NULL, &rr);
	}
	while (rc == 0 && (!sd || !rd) && data_now() - t0 < 30) {
		if (!sd)
			rc |= h->p.net->test(sr, &sd, NULL);
		if (!rd)
			rc |= h->p.net->test(rr, &rd, got);
	}
	h->p.net->dereg_mr(s, sm);
	h->p.net->dereg_mr(r, rm);
	return rc == 0 && sd && rd ? 0 : -1;
}

#define RING_BYTES	((1u << 20) + 7)

/* A ring through the net: each rank sends 1 MiB + 7 bytes to the next
 * and checks what the previous one sent. */
int
phase_p2p(struct harness *h)
{
	char mine[TALLY_NCCL_HANDLE_MAX], *all, *sbuf, *rbuf;
	unsigned int next = (h->rank + 1) % h->world;
	unsigned int prev = (h->rank + h->world - 1) % h->world;
	void *l = NULL, *s = NULL, *r = NULL;
	int got = -1, ok = 0;

	all = malloc((size_t)h->world * TALLY_NCCL_HANDLE_MAX);
	sbuf = malloc(RING_BYTES);
	rbuf = calloc(1, RING_BYTES);
	for (size_t i = 0; i < RING_BYTES; i++)
		sbuf[i] = (char)(h->rank * 37 + i * 11);
	if (h->p.net->listen(h->nctx, 0, mine, &l) == 0 &&
	    coord_allgather(h->co, mine, sizeof(mine), all) == 0 &&
	    ring_connect(h, all + next * TALLY_NCCL_HANDLE_MAX, l, &s,
	    &r) == 0 &&
	    ring_transfer(h, s, r, sbuf, rbuf, RING_BYTES, &got) == 0) {
		ok = got == (int)RING_BYTES;
		for (size_t i = 0; ok && i < RING_BYTES; i++)
			ok = rbuf[i] == (char)(prev * 37 + i * 11);
	}
	check(h, ok, "net: a ring of 1 MiB + 7 bytes over TCP, rank %u's "
		"bytes arrived whole (%d)", prev, got);
	h->p.net->close_send(s);
	h->p.net->close_recv(r);
	h->p.net->close_listen(l);
	free(all);
	free(sbuf);
	free(rbuf);
	return coord_barrier(h->co) == 0 ? 0 : -1;
}

/* A second communicator of this process on the same job is refused at
 * once (it would replace the first one's membership at tallyd). */
static void
second_connect(struct harness *h, void **hp, void *l)
{
	void *cc2 = NULL;
	int rc = h->p.coll->connect(hp, (int)h->world, (int)h->rank, l,
		&cc2);

	check(h, rc != 0 && cc2 == NULL &&
		strstr(tnl_last_warn(), "already carries") != NULL,
		"a second communicator on the same job: refused (%s)",
		tnl_last_warn());
}

/* The collnet group: listen, handles over coord, connect, closeListen. */
int
phase_join(struct harness *h)
{
	char mine[TALLY_NCCL_HANDLE_MAX], *all;
	void **hp = calloc(h->world, sizeof(*hp)), *l = NULL;
	double t0;
	int rc = -1;

	all = malloc((size_t)h->world * TALLY_NCCL_HANDLE_MAX);
	if (h->p.coll->listen(h->cctx, 0, mine, &l) == 0 &&
	    coord_allgather(h->co, mine, sizeof(mine), all) == 0) {
		for (unsigned int i = 0; i < h->world; i++)
			hp[i] = all + (size_t)i * TALLY_NCCL_HANDLE_MAX;
		t0 = data_now();
		rc = h->p.coll->connect(hp, (int)h->world, (int)h->rank, l,
			&h->cc);
		check(h, rc == 0 && h->cc != NULL, "collnet connect: joined "
			"as rank %u of %u in %.2f s", h->rank, h->world,
			data_now() - t0);
		if (rc == 0)
			second_connect(h, hp, l);
		h->p.coll->close_listen(l);
	}
	free(hp);
	h->handles = all;	/* for rejoin(); freed by phase_close() */
	return rc == 0 ? 0 : -1;
}

/* After closeColl: the group formed again from the same handles (a new
 * membership of the job at tallyd); 0 or -1. */
int
rejoin(struct harness *h)
{
	void **hp = calloc(h->world, sizeof(*hp)), *l = NULL;
	char mine[TALLY_NCCL_HANDLE_MAX];
	int rc = -1;

	for (unsigned int i = 0; i < h->world; i++)
		hp[i] = h->handles + (size_t)i * TALLY_NCCL_HANDLE_MAX;
	if (h->p.coll->listen(h->cctx, 0, mine, &l) == 0) {
		rc = h->p.coll->connect(hp, (int)h->world, (int)h->rank, l,
			&h->cc);
		h->p.coll->close_listen(l);
	}
	free(hp);
	return rc == 0 ? 0 : -1;
}

/* The tensors phase_data() sums: kind, in place or from a separate send
 * buffer, and the name nccl_test.sh greps for. */
static const struct data_case {
	int kind;
	int in_place;
	const char *name;
} cases[] = {
	{ DATA_I32, 1, "i32" },
	{ DATA_F32_EIGHTHS, 0, "f32 (eighths)" },
	{ DATA_F32_UNIFORM, 0, "f32 (uniform, against fixp)" },
	{ DATA_BF16_QUARTERS, 1, "bf16 (quarters, in place)" },
	{ DATA_BF16_QUARTERS, 0, "bf16 (quarters, out of place)" },
	{ DATA_F16_QUARTERS, 1, "f16 (quarters, in place)" },
	{ DATA_F16_QUARTERS, 0, "f16 (quarters, out of place)" },
}, after_inf = { DATA_BF16_QUARTERS, 1, "bf16 after the infinity" };

/* Elements a request: thirds of small tensors (several requests even
 * for 257), --chunk for large ones. */
static size_t
chunk_for(const struct harness *h, size_t n)
{
	if (n <= 1000)
		return n < 3 ? 1 : (n + 2) / 3;
	return h->chunk;
}

/* Prints element i of got and want (a WRONG sum). */
static void
show_diff(const struct harness *h, const void *got, const void *want,
	size_t i, int kind)
{
	if (data_esize(kind) == 2)
		printf("rank %u:   element %zu: got %04x want %04x\n", h->rank,
			i, ((const uint16_t *)got)[i],
			((const uint16_t *)want)[i]);
	else
		printf("rank %u:   element %zu: got %08x want %08x\n", h->rank,
			i, ((const uint32_t *)got)[i],
			((const uint32_t *)want)[i]);
}

/* Out of place: whether send still holds this rank's inputs. */
static int
send_kept(const struct harness *h, const struct data_case *dc,
	const char *send, size_t n, size_t bytes)
{
	char *x = malloc(bytes);
	int same;

	data_fill(x, n, dc->kind, h->seed + n, h->rank);
	same = memcmp(x, send, n * data_esize(dc->kind)) == 0;
	free(x);
	return same;
}

/* One tensor of n elements as dc says; the sums checked against every
 * rank's inputs, and out of place that send was left alone. */
static int
one_case(struct harness *h, const struct data_case *dc, size_t n)
{
	int kind = dc->kind;
	size_t chunk = chunk_for(h, n), bytes = (n + 1) * data_esize(kind);
	char *send = malloc(bytes), *want = malloc(bytes);
	char *recv = dc->in_place ? send : malloc(bytes);
	void *sm = NULL, *rm = NULL;
	struct drive_res res;
	size_t bad;
	int kept = 1;

	data_fill(send, n, kind, h->seed + n, h->rank);
	data_expect(want, n, kind, h->seed + n, h->world, chunk);
	h->p.coll->reg_mr(h->cc, send, bytes, TALLY_NCCL_PTR_HOST, &sm);
	if (recv != send)
		h->p.coll->reg_mr(h->cc, recv, bytes, TALLY_NCCL_PTR_HOST, &rm);
	drive(h->p.coll, h->cc, send, recv, n, data_type(kind), chunk, sm,
		recv != send ? rm : sm, h->limit, &res);
	bad = res.nccl == 0 ? data_diff(recv, want, n, kind) : 0;
	if (recv != send)
		kept = send_kept(h, dc, send, n, bytes);
	check(h, res.nccl == 0 && bad == n && kept, "%s n=%zu: %u requests "
		"in flight (%u NULL: back-pressure), %s%s, %.3f s", dc->name,
		n, res.requests, res.nulls, res.nccl != 0 ? "an NCCL error" :
		bad == n ? "exact" : "WRONG", kept ? "" : ", send CHANGED",
		res.secs);
	if (res.nccl == 0 && bad != n)
		show_diff(h, recv, want, bad, kind);
	h->p.coll->dereg_mr(h->cc, sm);
	if (recv != send) {
		h->p.coll->dereg_mr(h->cc, rm);
		free(recv);
	}
	free(send);
	free(want);
	return res.nccl == 0 ? 0 : -1;
}

/*
 * A bf16 infinity on rank 1 (one request, so that nothing of the tensor
 * stays queued): libtally refuses the scale on every rank (-ERANGE),
 * which must reach every rank as an error from test() with a WARN line,
 * not a hang; the context stays usable, so the next tensor sums.
 */
static int
inf_case(struct harness *h)
{
	size_t n = 257;
	uint16_t *buf = malloc(n * sizeof(*buf));
	void *mh = NULL;
	struct drive_res res;

	data_fill(buf, n, DATA_BF16_QUARTERS, h->seed, h->rank);
	if (h->rank == 1 % h->world)
		buf[100] = 0x7f80;	/* +inf */
	h->p.coll->reg_mr(h->cc, buf, n * 2, TALLY_NCCL_PTR_HOST, &mh);
	drive(h->p.coll, h->cc, buf, buf, n, TALLY_NCCL_BFLOAT16, n, mh, mh,
		h->limit, &res);
	check(h, res.nccl > 0 && strstr(tnl_last_warn(), "no fixed-point "
		"scale") != NULL, "bf16 with +inf on rank %u: test() returned "
		"NCCL error %d after %.3f s (WARN: %s)", 1 % h->world, res.nccl,
		res.err_after, tnl_last_warn());
	h->p.coll->dereg_mr(h->cc, mh);
	free(buf);
	return res.nccl > 0 ? one_case(h, &after_inf, n) : -1;
}

/* Every case at every size, then the infinity. */
int
phase_data(struct harness *h)
{
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++)
		for (unsigned int i = 0; i < h->nsizes; i++)
			if (one_case(h, &cases[c], h->sizes[i]) != 0)
				return -1;
	if (inf_case(h) != 0)
		return -1;
	return coord_barrier(h->co) == 0 ? 0 : -1;
}

/* Rank kill_rank dies (SIGKILL, no goodbye); the others' allreduce must
 * end in an error from test(), within the context's timeout, not hang. */
int
phase_kill(struct harness *h)
{
	size_t n = 1 << 18;
	float *buf;
	void *mh = NULL;
	struct drive_res res;

	if (h->kill_rank < 0)
		return 0;
	if (coord_barrier(h->co) != 0)
		return -1;
	if ((int)h->rank == h->kill_rank) {
		printf("rank %u: killing myself (SIGKILL)\n", h->rank);
		fflush(stdout);
		raise(SIGKILL);
	}
	buf = calloc(n, sizeof(*buf));
	h->p.coll->reg_mr(h->cc, buf, n * 4, TALLY_NCCL_PTR_HOST, &mh);
	drive(h->p.coll, h->cc, buf, buf, n, TALLY_NCCL_FLOAT32, n / 4, mh,
		mh, 60, &res);
	check(h, res.nccl > 0, "rank %d killed: test() returned NCCL error "
		"%d after %.1f s (WARN: %s)", h->kill_rank, res.nccl,
		res.err_after, tnl_last_warn());
	h->p.coll->dereg_mr(h->cc, mh);
	free(buf);
	return 0;
}

/* closeColl (must not hang, even after a failure), finalize both. */
void
phase_close(struct harness *h)
{
	double t0 = data_now();

	if (h->cc != NULL) {
		check(h, h->p.coll->close_coll(h->cc) == 0,
			"closeColl in %.2f s", data_now() - t0);
		h->cc = NULL;
	}
	if (h->cctx != NULL)
		h->p.coll->finalize(h->cctx);
	free(h->handles);
	if (h->nctx != NULL || h->p.net != NULL)
		h->p.net->finalize(h->nctx);
}
