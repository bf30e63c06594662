/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Context.reduce_scatter(), .allgather() and .broadcast(): libtally's
 * collectives beyond allreduce on buffers and CPU tensors, in place and
 * never copied, with the GIL released while libtally works and the
 * context's lock held (context.c's allreduce does the same).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ext.h"

static const char *const elem_names[] = { "float32", "int32", "bfloat16",
	"float16" };

/* Bytes an element of kind k. */
static size_t
elem_size(enum ext_elem k)
{
	return k == EXT_F32 || k == EXT_I32 ? 4 : 2;
}

/* Whether [a, a + na) and [b, b + nb) share a byte. */
static int
overlap(const void *a, size_t na, const void *b, size_t nb)
{
	uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;

	return na > 0 && nb > 0 && x < y + nb && y < x + na;
}

/*
 * Takes the send and receive arrays of a two-buffer collective (send
 * readable, writable too unless ro; recv writable), of one element type. Returns 0, or -1 with
 * an exception and nothing held.
 */
static int
get_pair(const char *op, PyObject *in, int ro, PyObject *out,
	struct ext_array *s, struct ext_array *r)
{
	if (ext_array_get(in, ro, s) != 0)
		return -1;
	if (ext_array_get(out, 0, r) != 0) {
		ext_array_release(s);
		return -1;
	}
	if (s->k == r->k)
		return 0;
	PyErr_Format(PyExc_TypeError, "tally: %s takes input and output of "
		"one type, not %s and %s", op, elem_names[s->k],
		elem_names[r->k]);
	ext_array_release(s);
	ext_array_release(r);
	return -1;
}

/* The context's world (the lock held), or 0 with an exception. */
static unsigned int
world_of(struct ext_ctx *c)
{
	struct tally_ctx_info i;

	if (ext_ctx_enter(c) != 0)
		return 0;
	tally_ctx_info(c->ctx, &i);
	ext_ctx_leave(c);
	return i.world;
}

/*
 * Checks that big holds world x small elements (what names which is
 * which) and, for a reduce-scatter, that the two do not overlap; an
 * all-gather may send from its own shard of recv. Returns 0, or -1 with
 * a ValueError.
 */
static int
check_sizes(const char *op, unsigned int world, const struct ext_array *big,
	const struct ext_array *small, const char *what, size_t own)
{
	size_t esz = elem_size(small->k);

	if (big->n / world != small->n || big->n % world != 0) {
		PyErr_Format(PyExc_ValueError, "tally: %s: %s (world %u), "
			"not %zu and %zu", op, what, world, big->n, small->n);
		return -1;
	}
	if (overlap(big->buf, big->n * esz, small->buf, small->n * esz) &&
			(own == SIZE_MAX || (char *)small->buf !=
			(char *)big->buf + own * small->n * esz)) {
		PyErr_Format(PyExc_ValueError, "tally: %s: input and output "
			"overlap%s", op, own == SIZE_MAX ? "" : " (in place, "
			"the input is this rank's own shard of the output)");
		return -1;
	}
	return 0;
}

/*
 * Runs fn (a collective on the context, GIL released, lock held) and
 * turns a failure into tally.Error with libtally's sentence. Releases
 * both arrays. Returns None or NULL.
 */
static PyObject *
run_pair(struct ext_ctx *c, struct ext_array *s, struct ext_array *r,
	int op, float mean)
{
	enum tally_dtype dt = (enum tally_dtype)s->k;
	char why[512] = "";
	int rc;

	if (ext_ctx_enter(c) != 0) {
		ext_array_release(s);
		ext_array_release(r);
		return NULL;
	}
	Py_BEGIN_ALLOW_THREADS
	if (op == 'r') {
		if (mean != 0.0f)	/* x * (1/world), as the mean allreduce */
			for (size_t i = 0; i < s->n; i++)
				((float *)s->buf)[i] *= mean;
		rc = tally_reduce_scatter(c->ctx, s->buf, r->buf, r->n, dt);
	} else {
		rc = tally_allgather(c->ctx, s->buf, r->buf, s->n, dt);
	}
	if (rc < 0)
		snprintf(why, sizeof(why), "%s", tally_ctx_error(c->ctx));
	Py_END_ALLOW_THREADS
	ext_ctx_leave(c);
	ext_array_release(s);
	ext_array_release(r);
	if (rc < 0)
		return ext_raise(rc, why);
	Py_RETURN_NONE;
}

/*
 * Context.reduce_scatter(input, output, mean=False): output = this
 * rank's shard of the sum (mean: average, float32 only) of input over
 * every rank. input has world x len(output) elements; with mean it is
 * overwritten (multiplied by 1/world first, as allreduce(mean=True)).
 */
PyObject *
ext_ctx_reduce_scatter(struct ext_ctx *c, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "input", "output", "mean", NULL };
	struct ext_array s, r;
	PyObject *in, *out;
	unsigned int world;
	int mean = 0;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|p:reduce_scatter",
			kwlist, &in, &out, &mean))
		return NULL;
	world = world_of(c);
	if (world == 0 || get_pair("reduce_scatter", in, !mean, out, &s,
			&r) != 0)
		return NULL;
	if (mean && s.k != EXT_F32) {
		ext_array_release(&s);
		ext_array_release(&r);
		return PyErr_Format(PyExc_TypeError, "tally: mean=True takes "
			"float32 elements, not %s", elem_names[s.k]);
	}
	if (check_sizes("reduce_scatter", world, &s, &r,
			"the input has world x the output's elements",
			SIZE_MAX) != 0) {
		ext_array_release(&s);
		ext_array_release(&r);
		return NULL;
	}
	return run_pair(c, &s, &r, 'r', mean ? 1.0f / (float)world : 0.0f);
}

/*
 * Context.allgather(input, output): output (world x len(input) elements)
 * gets rank r's input as its shard r on every rank. input may be this
 * rank's own shard of output (in place).
 */
PyObject *
ext_ctx_allgather(struct ext_ctx *c, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "input", "output", NULL };
	struct tally_ctx_info i;
	struct ext_array s, r;
	PyObject *in, *out;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "OO:allgather", kwlist,
			&in, &out))
		return NULL;
	if (ext_ctx_enter(c) != 0)
		return NULL;
	tally_ctx_info(c->ctx, &i);
	ext_ctx_leave(c);
	if (get_pair("allgather", in, 1, out, &s, &r) != 0)
		return NULL;
	if (check_sizes("allgather", i.world, &r, &s, "the output has world "
			"x the input's elements", i.rank) != 0) {
		ext_array_release(&s);
		ext_array_release(&r);
		return NULL;
	}
	return run_pair(c, &s, &r, 'g', 0.0f);
}

/*
 * Context.broadcast(buf, root): root's buf, in place on every rank.
 */
PyObject *
ext_ctx_broadcast(struct ext_ctx *c, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "buf", "root", NULL };
	struct ext_array a;
	char why[512] = "";
	PyObject *obj;
	long root;
	int rc;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "Ol:broadcast", kwlist,
			&obj, &root))
		return NULL;
	if (root < 0 || root > 255)
		return ext_raise(-EINVAL, "the root is a rank of the job");
	if (ext_array_get(obj, 0, &a) != 0)
		return NULL;
	if (ext_ctx_enter(c) != 0) {
		ext_array_release(&a);
		return NULL;
	}
	Py_BEGIN_ALLOW_THREADS
	rc = tally_broadcast(c->ctx, a.buf, a.n, (enum tally_dtype)a.k,
		(unsigned int)root);
	if (rc < 0)
		snprintf(why, sizeof(why), "%s", tally_ctx_error(c->ctx));
	Py_END_ALLOW_THREADS
	ext_ctx_leave(c);
	ext_array_release(&a);
	if (rc < 0)
		return ext_raise(rc, why);
	Py_RETURN_NONE;
}
