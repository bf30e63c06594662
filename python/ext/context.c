/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The Context type: allreduce() of a buffer in place, info(), stats(),
 * close(). A libtally context is for one thread at a time, so each
 * Context holds a lock, taken with the GIL released: a second Python
 * thread waits for the first one's call instead of racing it.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <tally/codec.h>

#include "ext.h"

/* What a buffer's elements are. */
enum elem_kind { ELEM_F32, ELEM_I32 };

int
ext_ctx_enter(struct ext_ctx *c)
{
	if (!PyThread_acquire_lock(c->lock, NOWAIT_LOCK)) {
		Py_BEGIN_ALLOW_THREADS
		PyThread_acquire_lock(c->lock, WAIT_LOCK);
		Py_END_ALLOW_THREADS
	}
	if (c->ctx != NULL)
		return 0;
	PyThread_release_lock(c->lock);
	ext_raise(-EBADF, "the context is closed");
	return -1;
}

void
ext_ctx_leave(struct ext_ctx *c)
{
	PyThread_release_lock(c->lock);
}

/*
 * The element kind of a struct format: native or little-endian "f" or a
 * 4-byte "i"/"l" (numpy's int32 on this platform). Returns 0, or -1
 * with a TypeError.
 */
static int
elem_kind(const Py_buffer *v, enum elem_kind *k)
{
	const char *f = v->format != NULL ? v->format : "B";
	const char *t = f;

	if (*t == '@' || *t == '=' || *t == '<')
		t++;
	if (v->itemsize == 4 && strcmp(t, "f") == 0)
		*k = ELEM_F32;
	else if (v->itemsize == 4 && (strcmp(t, "i") == 0 ||
			strcmp(t, "l") == 0))
		*k = ELEM_I32;
	else {
		PyErr_Format(PyExc_TypeError, "tally: allreduce takes float32 "
			"or int32 elements, not format '%s' (%zd bytes)", f,
			v->itemsize);
		return -1;
	}
	return 0;
}

/*
 * Takes obj's buffer, writable, C-contiguous, of float32 or int32, into
 * *v (released by the caller with PyBuffer_Release() on success), and
 * its element kind into *k. Never copies: a buffer that is not
 * contiguous is refused. Returns 0, or -1 with an exception.
 */
static int
get_buffer(PyObject *obj, Py_buffer *v, enum elem_kind *k)
{
	if (PyObject_GetBuffer(obj, v, PyBUF_RECORDS) != 0) {
		PyErr_Clear();
		if (PyObject_GetBuffer(obj, v, PyBUF_RECORDS_RO) == 0) {
			PyBuffer_Release(v);
			PyErr_SetString(PyExc_ValueError, "tally: the buffer is "
				"read-only; allreduce writes the sums into it");
			return -1;
		}
		PyErr_Clear();
		PyErr_Format(PyExc_TypeError, "tally: allreduce takes a "
			"writable buffer (a numpy array, a torch tensor), not "
			"%s", Py_TYPE(obj)->tp_name);
		return -1;
	}
	if (!PyBuffer_IsContiguous(v, 'C')) {
		PyBuffer_Release(v);
		PyErr_SetString(PyExc_ValueError, "tally: the buffer is not "
			"contiguous; tally works in place and never copies: "
			"pass a contiguous one (numpy.ascontiguousarray(), "
			"tensor.contiguous()) and copy the sums back");
		return -1;
	}
	if (elem_kind(v, k) != 0) {
		PyBuffer_Release(v);
		return -1;
	}
	return 0;
}

/*
 * The call itself, on the context (locked) with the GIL released; mean:
 * the average (float32 only), divided as libtally decodes.
 */
static int
reduce(struct tally_ctx *ctx, struct tally_state *st, enum elem_kind k,
	void *buf, size_t n, int mean)
{
	if (k == ELEM_I32)
		return tally_allreduce_i32(ctx, buf, n);
	if (mean)
		return tally_allreduce_mean(ctx, st, buf, n);
	if (st != NULL)
		return tally_allreduce_state(ctx, st, buf, n);
	return tally_allreduce(ctx, buf, n);
}

/* Context.allreduce(buf, state=None, mean=False): see the doc string. */
static PyObject *
ctx_allreduce(struct ext_ctx *c, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "buf", "state", "mean", NULL };
	PyObject *obj, *sobj = Py_None;
	struct tally_state *st = NULL;
	enum elem_kind k;
	char why[512] = "";
	Py_buffer v;
	int mean = 0;
	size_t n;
	int rc;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O|Op:allreduce", kwlist,
			&obj, &sobj, &mean))
		return NULL;
	if (sobj != Py_None && !PyObject_TypeCheck(sobj, &ext_state_type))
		return PyErr_Format(PyExc_TypeError, "tally: state must be a "
			"tally.State, not %s", Py_TYPE(sobj)->tp_name);
	if (get_buffer(obj, &v, &k) != 0)
		return NULL;
	n = (size_t)(v.len / v.itemsize);
	if (sobj != Py_None) {
		struct ext_state *s = (struct ext_state *)sobj;

		if (k != ELEM_F32 || s->n != (Py_ssize_t)n) {
			PyBuffer_Release(&v);
			return PyErr_Format(PyExc_ValueError, "tally: the state "
				"is for %zd float32 elements, the buffer has %zu "
				"of %s (a State belongs to one tensor: make a new "
				"one when its size changes)", s->n, n,
				k == ELEM_F32 ? "float32" : "int32");
		}
		st = s->st;
	}
	if (mean && k != ELEM_F32) {
		PyBuffer_Release(&v);
		PyErr_SetString(PyExc_TypeError, "tally: mean=True takes "
			"float32 elements (an int32 average is not an int32)");
		return NULL;
	}
	if (ext_ctx_enter(c) != 0) {
		PyBuffer_Release(&v);
		return NULL;
	}
	Py_BEGIN_ALLOW_THREADS
	rc = reduce(c->ctx, st, k, v.buf, n, mean);
	if (rc < 0)
		snprintf(why, sizeof(why), "%s", tally_ctx_error(c->ctx));
	Py_END_ALLOW_THREADS
	ext_ctx_leave(c);
	PyBuffer_Release(&v);
	if (rc < 0)
		return ext_raise(rc, why);
	Py_RETURN_NONE;
}

/* Sets d[key] = an int of v. Returns 0 or -1. */
static int
set_u64(PyObject *d, const char *key, unsigned long long v)
{
	PyObject *o = PyLong_FromUnsignedLongLong(v);
	int rc;

	if (o == NULL)
		return -1;
	rc = PyDict_SetItemString(d, key, o);
	Py_DECREF(o);
	return rc;
}

/* Sets d[key] = the str s. Returns 0 or -1. */
static int
set_str(PyObject *d, const char *key, const char *s)
{
	PyObject *o = PyUnicode_FromString(s);
	int rc;

	if (o == NULL)
		return -1;
	rc = PyDict_SetItemString(d, key, o);
	Py_DECREF(o);
	return rc;
}

/* Context.info() -> dict: the job as the dataplane knows it. */
static PyObject *
ctx_info(struct ext_ctx *c, PyObject *unused)
{
	struct tally_ctx_info i;
	char spec[TALLY_CODEC_SPEC_MAX];
	PyObject *d;

	(void)unused;
	if (ext_ctx_enter(c) != 0)
		return NULL;
	tally_ctx_info(c->ctx, &i);
	ext_ctx_leave(c);
	if (tally_codec_format(&i.codec, spec, sizeof(spec)) < 0)
		snprintf(spec, sizeof(spec), "%s", tally_codec_name(i.codec.kind));
	d = PyDict_New();
	if (d == NULL)
		return NULL;
	if (set_u64(d, "job", i.job) || set_u64(d, "rank", i.rank) ||
			set_u64(d, "world", i.world) ||
			set_u64(d, "window", i.window) ||
			set_u64(d, "elems", i.elems) ||
			PyDict_SetItemString(d, "narrow",
				i.narrow ? Py_True : Py_False) ||
			set_str(d, "codec", spec) ||
			set_str(d, "codec_name", tally_codec_name(i.codec.kind)) ||
			PyDict_SetItemString(d, "codec_memory",
				tally_codec_has_memory(&i.codec) ? Py_True :
				Py_False) ||
			set_str(d, "cuda_path",
				tally_cuda_path_name(i.cuda_path)) ||
			set_u64(d, "cuda_segment", i.cuda_segment) ||
			set_u64(d, "cuda_staging", i.cuda_staging)) {
		Py_DECREF(d);
		return NULL;
	}
	return d;
}

/* Context.stats() -> dict: tally_ctx_stats() by name. */
static PyObject *
ctx_stats(struct ext_ctx *c, PyObject *unused)
{
	struct tally_ctx_stats s;
	PyObject *d;

	(void)unused;
	if (ext_ctx_enter(c) != 0)
		return NULL;
	tally_ctx_stats(c->ctx, &s);
	ext_ctx_leave(c);
	d = PyDict_New();
	if (d == NULL)
		return NULL;
	if (set_u64(d, "packets_sent", s.packets_sent) ||
			set_u64(d, "retransmits", s.retransmits) ||
			set_u64(d, "results", s.results) ||
			set_u64(d, "duplicates", s.duplicates) ||
			set_u64(d, "nacks", s.nacks) ||
			set_u64(d, "bytes_sent", s.bytes_sent) ||
			set_u64(d, "bytes_received", s.bytes_received) ||
			set_u64(d, "bundled", s.bundled) ||
			set_u64(d, "stale", s.stale) ||
			set_u64(d, "forged", s.forged) ||
			set_u64(d, "cuda_calls", s.cuda_calls) ||
			set_u64(d, "cuda_segments", s.cuda_segments) ||
			set_u64(d, "cuda_staged_bytes", s.cuda_staged_bytes) ||
			set_u64(d, "cuda_wait_ns", s.cuda_wait_ns) ||
			set_u64(d, "cuda_net_ns", s.cuda_net_ns)) {
		Py_DECREF(d);
		return NULL;
	}
	return d;
}

/* Context.close(): closes the context; again is a no-op. */
static PyObject *
ctx_close(struct ext_ctx *c, PyObject *unused)
{
	(void)unused;
	if (!PyThread_acquire_lock(c->lock, NOWAIT_LOCK)) {
		Py_BEGIN_ALLOW_THREADS
		PyThread_acquire_lock(c->lock, WAIT_LOCK);
		Py_END_ALLOW_THREADS
	}
	tally_ctx_close(c->ctx);
	c->ctx = NULL;
	PyThread_release_lock(c->lock);
	Py_RETURN_NONE;
}

/* Context.closed: whether close() ran. */
static PyObject *
ctx_closed(struct ext_ctx *c, void *unused)
{
	(void)unused;
	return PyBool_FromLong(c->ctx == NULL);
}

/* Frees the context (nothing can be using it: calls hold a reference). */
static void
ctx_dealloc(struct ext_ctx *c)
{
	tally_ctx_close(c->ctx);
	if (c->lock != NULL)
		PyThread_free_lock(c->lock);
	Py_TYPE(c)->tp_free((PyObject *)c);
}

static PyMethodDef ctx_methods[] = {
	{ "allreduce", (PyCFunction)(void (*)(void))ctx_allreduce,
		METH_VARARGS | METH_KEYWORDS,
		"allreduce(buf, state=None, mean=False): sums buf over every "
		"rank, in place. float32 goes through the job's codec (with "
		"state: that tensor's codec memory), int32 is summed exactly. "
		"mean: the average instead (float32; tally_allreduce_mean()). "
		"buf is any writable C-contiguous buffer; it is never "
		"copied." },
	{ "allreduce_cuda",
		(PyCFunction)(void (*)(void))ext_ctx_allreduce_cuda,
		METH_VARARGS | METH_KEYWORDS,
		"allreduce_cuda(ptr, n, dtype, stream=0, state=None): sums the "
		"n float32 or int32 elements at device address ptr over every "
		"rank, in place, through libtally's GPU path; the decoding is "
		"enqueued on the CUDA stream handle stream (0: the legacy "
		"default stream). state: a State(ctx, n, cuda=True)." },
	{ "info", (PyCFunction)ctx_info, METH_NOARGS,
		"info() -> dict: job, rank, world, window, elems, narrow, "
		"codec (its canonical spec), codec_name, codec_memory, "
		"cuda_path (what a CUDA tensor's allreduce does: gpu-staged, "
		"none, no-device, codec-not-on-gpu), cuda_segment, "
		"cuda_staging." },
	{ "stats", (PyCFunction)ctx_stats, METH_NOARGS,
		"stats() -> dict: the context's counters (tally_ctx_stats)." },
	{ "close", (PyCFunction)ctx_close, METH_NOARGS,
		"close(): closes the context; later calls raise EBADF." },
	{ NULL, NULL, 0, NULL },
};

static PyGetSetDef ctx_getset[] = {
	{ "closed", (getter)ctx_closed, NULL, "whether close() ran", NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

PyTypeObject ext_ctx_type = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "tally._tally.Context",
	.tp_doc = "A rank's membership of a job (libtally's struct "
		"tally_ctx); made by open() or open_direct().",
	.tp_basicsize = sizeof(struct ext_ctx),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_dealloc = (destructor)ctx_dealloc,
	.tp_methods = ctx_methods,
	.tp_getset = ctx_getset,
};
