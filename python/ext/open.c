/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * New contexts: _tally.open() joins a job through tallyd's rendezvous
 * (tally_open_opts()), _tally.open_direct() takes the dataplane, job and
 * wire token by hand (tally_ctx_open()). Both block (tallyd's join
 * barrier waits for every rank) with the GIL released, and raise
 * tally.Error with errno and the sentence libtally or tallyd gave.
 */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ext.h"

/*
 * Converts o (a Python int; NULL or None = 0) to *out, checking that it
 * lies in 0..max; raises ValueError naming the option and returns -1
 * otherwise.
 */
static int
uint_arg(PyObject *o, const char *name, unsigned long long max,
	unsigned long long *out)
{
	unsigned long long v;

	*out = 0;
	if (o == NULL || o == Py_None)
		return 0;
	if (PyBool_Check(o) || !PyLong_Check(o)) {
		PyErr_Format(PyExc_TypeError, "tally: %s must be an int, not %s",
			name, Py_TYPE(o)->tp_name);
		return -1;
	}
	v = PyLong_AsUnsignedLongLong(o);	/* negative: OverflowError */
	if (v == (unsigned long long)-1 && PyErr_Occurred())
		PyErr_Clear();
	else if (v <= max) {
		*out = v;
		return 0;
	}
	PyErr_Format(PyExc_ValueError, "tally: %s must be in 0..%llu", name,
		max);
	return -1;
}

/* The options both open functions share; o is zeroed by the caller. */
struct open_args {
	PyObject *rank, *world, *bind_port, *window, *elems, *rto_us;
	PyObject *timeout_ms;
};

/* Fills o's numeric fields from a. Returns 0, or -1 with an exception. */
static int
fill_common(const struct open_args *a, struct tally_ctx_opts *o,
	unsigned int *rank, unsigned int *world)
{
	unsigned long long v[7];

	if (uint_arg(a->rank, "rank", UINT_MAX, &v[0]) ||
			uint_arg(a->world, "world", UINT_MAX, &v[1]) ||
			uint_arg(a->bind_port, "bind_port", UINT16_MAX, &v[2]) ||
			uint_arg(a->window, "window", UINT16_MAX, &v[3]) ||
			uint_arg(a->elems, "elems", UINT16_MAX, &v[4]) ||
			uint_arg(a->rto_us, "rto_us", UINT_MAX, &v[5]) ||
			uint_arg(a->timeout_ms, "timeout_ms", UINT_MAX, &v[6]))
		return -1;
	*rank = (unsigned int)v[0];
	*world = (unsigned int)v[1];
	o->bind_port = (uint16_t)v[2];
	o->window = (uint16_t)v[3];
	o->elems = (uint16_t)v[4];
	o->rto_us = (unsigned int)v[5];
	o->timeout_ms = (unsigned int)v[6];
	return 0;
}

/* Wraps a new libtally context in a Context object (owns ctx). */
static PyObject *
wrap(struct tally_ctx *ctx)
{
	struct ext_ctx *c = PyObject_New(struct ext_ctx, &ext_ctx_type);

	if (c == NULL) {
		tally_ctx_close(ctx);
		return NULL;
	}
	c->ctx = ctx;
	c->lock = PyThread_allocate_lock();
	if (c->lock == NULL) {
		c->ctx = NULL;
		tally_ctx_close(ctx);
		Py_DECREF(c);
		return PyErr_NoMemory();
	}
	return (PyObject *)c;
}

PyObject *
ext_open(PyObject *mod, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "url", "token", "rank", "world",
		"bind_addr", "bind_port", "window", "elems", "rto_us",
		"timeout_ms", "join_timeout_ms", "ca_file", NULL };
	struct open_args a = { 0 };
	struct tally_ctx_opts o;
	struct tally_ctx *ctx = NULL;
	const char *url, *token;
	PyObject *join = NULL;
	unsigned long long jt;
	unsigned int rank, world;
	char why[512];
	int rc;

	(void)mod;
	memset(&o, 0, sizeof(o));
	if (!PyArg_ParseTupleAndKeywords(args, kw, "ssOO|$zOOOOOOz:open",
			kwlist, &url, &token, &a.rank, &a.world, &o.bind_addr,
			&a.bind_port, &a.window, &a.elems, &a.rto_us,
			&a.timeout_ms, &join, &o.ca_file))
		return NULL;
	if (fill_common(&a, &o, &rank, &world) ||
			uint_arg(join, "join_timeout_ms", UINT_MAX, &jt))
		return NULL;
	o.join_timeout_ms = (unsigned int)jt;
	Py_BEGIN_ALLOW_THREADS
	rc = tally_open_opts(url, token, rank, world, &o, &ctx);
	if (rc < 0)
		snprintf(why, sizeof(why), "%s", tally_ctx_error(NULL));
	Py_END_ALLOW_THREADS
	if (rc < 0)
		return ext_raise(rc, why);
	return wrap(ctx);
}

PyObject *
ext_open_direct(PyObject *mod, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "dp_addr", "job", "token", "rank",
		"world", "dp_port", "dp_nports", "bind_addr", "bind_port",
		"group_addr", "window", "elems", "rto_us", "timeout_ms",
		"narrow", "codec", NULL };
	struct open_args a = { 0 };
	struct tally_ctx_opts o;
	struct tally_ctx *ctx = NULL;
	PyObject *job, *token, *port = NULL, *nports = NULL;
	unsigned long long v[4];
	unsigned int rank, world;
	int narrow = 0, rc;
	char why[512];

	(void)mod;
	memset(&o, 0, sizeof(o));
	if (!PyArg_ParseTupleAndKeywords(args, kw,
			"sOOOO|$OOzOzOOOOpz:open_direct", kwlist, &o.dp_addr,
			&job, &token, &a.rank, &a.world, &port, &nports,
			&o.bind_addr, &a.bind_port, &o.group_addr, &a.window,
			&a.elems, &a.rto_us, &a.timeout_ms, &narrow, &o.codec))
		return NULL;
	if (fill_common(&a, &o, &rank, &world) ||
			uint_arg(job, "job", UINT16_MAX, &v[0]) ||
			uint_arg(token, "token", UINT64_MAX, &v[1]) ||
			uint_arg(port, "dp_port", UINT16_MAX, &v[2]) ||
			uint_arg(nports, "dp_nports", UINT16_MAX, &v[3]))
		return NULL;
	if (rank > UINT8_MAX || world > UINT8_MAX)
		return ext_raise(-EINVAL, "rank and world: 0..64");
	o.job = (uint16_t)v[0];
	o.token = v[1];
	o.dp_port = (uint16_t)v[2];
	o.dp_nports = (uint16_t)v[3];
	o.rank = (uint8_t)rank;
	o.world = (uint8_t)world;
	o.narrow = (uint8_t)narrow;
	Py_BEGIN_ALLOW_THREADS
	rc = tally_ctx_open(&o, &ctx);
	if (rc < 0)
		snprintf(why, sizeof(why), "%s", tally_ctx_error(NULL));
	Py_END_ALLOW_THREADS
	if (rc < 0)
		return ext_raise(rc, why);
	return wrap(ctx);
}
