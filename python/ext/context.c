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

static const char *const elem_names[] = { "float32", "int32", "bfloat16",
	"float16" };

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
 * 4-byte "i"/"l" (numpy's int32 on this platform), "e" (float16); with
 * want (a dtype= name, or NULL) a 2-byte buffer ("e", "h", "H": e.g. a
 * bfloat16 tensor's view as int16) holds that type. Returns 0, or -1
 * with a TypeError.
 */
static int
elem_kind(const Py_buffer *v, const char *want, enum ext_elem *k)
{
	const char *f = v->format != NULL ? v->format : "B";
	const char *t = f;
	int two;

	if (*t == '@' || *t == '=' || *t == '<')
		t++;
	two = v->itemsize == 2 && (strcmp(t, "e") == 0 ||
		strcmp(t, "h") == 0 || strcmp(t, "H") == 0);
	if (want != NULL && two && strcmp(want, "bfloat16") == 0)
		*k = EXT_BF16;
	else if (want != NULL && two && strcmp(want, "float16") == 0)
		*k = EXT_F16;
	else if (want != NULL) {
		PyErr_Format(PyExc_TypeError, "tally: dtype='%s' takes a "
			"buffer of 2-byte elements (format e, h or H), and is "
			"bfloat16 or float16; not format '%s' (%zd bytes)",
			want, f, v->itemsize);
		return -1;
	} else if (v->itemsize == 2 && strcmp(t, "e") == 0)
		*k = EXT_F16;
	else if (v->itemsize == 4 && strcmp(t, "f") == 0)
		*k = EXT_F32;
	else if (v->itemsize == 4 && (strcmp(t, "i") == 0 ||
			strcmp(t, "l") == 0))
		*k = EXT_I32;
	else {
		PyErr_Format(PyExc_TypeError, "tally: allreduce takes float32 "
			"or int32 elements, float16, or 2-byte ones named by "
			"dtype='bfloat16'; not format '%s' (%zd bytes)", f,
			v->itemsize);
		return -1;
	}
	return 0;
}

/*
 * Takes obj's buffer, writable (readable only with ro), C-contiguous, into *v (released by the
 * caller with PyBuffer_Release() on success), and its element kind into
 * *k. Never copies: a buffer that is not contiguous is refused. Returns
 * 0, -1 with an exception, or 1 (no exception) when obj has no buffer
 * at all (a torch tensor is tried next).
 */
static int
get_buffer(PyObject *obj, const char *want, Py_buffer *v,
	enum ext_elem *k, int ro)
{
	if (PyObject_GetBuffer(obj, v, ro ? PyBUF_RECORDS_RO :
			PyBUF_RECORDS) != 0) {
		PyErr_Clear();
		if (!ro && PyObject_GetBuffer(obj, v, PyBUF_RECORDS_RO) == 0) {
			PyBuffer_Release(v);
			PyErr_SetString(PyExc_ValueError, "tally: the buffer is "
				"read-only; allreduce writes the sums into it");
			return -1;
		}
		PyErr_Clear();
		return 1;
	}
	if (!PyBuffer_IsContiguous(v, 'C')) {
		PyBuffer_Release(v);
		PyErr_SetString(PyExc_ValueError, "tally: the buffer is not "
			"contiguous; tally works in place and never copies: "
			"pass a contiguous one (numpy.ascontiguousarray(), "
			"tensor.contiguous()) and copy the sums back");
		return -1;
	}
	if (elem_kind(v, want, k) != 0) {
		PyBuffer_Release(v);
		return -1;
	}
	return 0;
}

/* obj.name(), or obj.name when call is 0; a new reference or NULL. */
static PyObject *
attr(PyObject *obj, const char *name, int call)
{
	PyObject *a = PyObject_GetAttrString(obj, name), *r;

	if (a == NULL || !call)
		return a;
	r = PyObject_CallNoArgs(a);
	Py_DECREF(a);
	return r;
}

/* The integer obj.name(), or -1 with an exception. */
static long long
attr_ll(PyObject *obj, const char *name)
{
	PyObject *a = attr(obj, name, 1);
	long long v;

	if (a == NULL)
		return -1;
	v = PyLong_AsLongLong(a);
	Py_DECREF(a);
	return v;
}

/* Whether str(obj.name) (or of obj.name.type) equals s: 1, 0 or -1. */
static int
attr_is(PyObject *obj, const char *name, const char *sub, const char *s)
{
	PyObject *a = attr(obj, name, 0), *b, *str;
	int eq;

	if (a == NULL)
		return -1;
	b = sub != NULL ? attr(a, sub, 0) : (Py_INCREF(a), a);
	Py_DECREF(a);
	if (b == NULL)
		return -1;
	str = PyObject_Str(b);
	Py_DECREF(b);
	if (str == NULL)
		return -1;
	eq = PyUnicode_CompareWithASCIIString(str, s) == 0;
	Py_DECREF(str);
	return eq;
}

/*
 * A torch CPU tensor without the buffer protocol (torch has none): its
 * memory (data_ptr()), numel() and dtype (float32, int32, bfloat16,
 * float16), contiguous. The caller holds obj for the call. Returns 0,
 * or -1 with an exception.
 */
static int
get_tensor(PyObject *obj, void **buf, size_t *n, enum ext_elem *k)
{
	static const char *const names[] = { "torch.float32", "torch.int32",
		"torch.bfloat16", "torch.float16" };
	long long p, cnt;
	int i, rc;

	if (!PyObject_HasAttrString(obj, "data_ptr") ||
			!PyObject_HasAttrString(obj, "dtype")) {
		PyErr_Format(PyExc_TypeError, "tally: allreduce takes a "
			"writable buffer (a numpy array) or a torch tensor, "
			"not %s", Py_TYPE(obj)->tp_name);
		return -1;
	}
	rc = attr_is(obj, "device", "type", "cpu");
	if (rc <= 0) {
		if (rc == 0)
			PyErr_SetString(PyExc_TypeError, "tally: allreduce "
				"takes a CPU tensor here (CUDA ones go through "
				"allreduce_cuda)");
		return -1;
	}
	for (i = 0; i < 4; i++) {
		rc = attr_is(obj, "dtype", NULL, names[i]);
		if (rc < 0)
			return -1;
		if (rc == 1)
			break;
	}
	if (i == 4) {
		PyErr_SetString(PyExc_TypeError, "tally: allreduce takes "
			"float32, int32, bfloat16 or float16 tensors");
		return -1;
	}
	if (attr_ll(obj, "is_contiguous") != 1) {
		if (!PyErr_Occurred())
			PyErr_SetString(PyExc_ValueError, "tally: the tensor is "
				"not contiguous; tally works in place and never "
				"copies: pass tensor.contiguous() and copy the "
				"sums back");
		return -1;
	}
	cnt = attr_ll(obj, "numel");
	p = attr_ll(obj, "data_ptr");
	if (PyErr_Occurred())
		return -1;
	*k = (enum ext_elem)i;
	*buf = (void *)(uintptr_t)p;
	*n = (size_t)cnt;
	return 0;
}

/*
 * The dense average of n floats at buf: each times 1/world (a float
 * product, the bits tally_allreduce_mean() sums), then
 * tally_allreduce_f32(), whatever the job's codec.
 */
static int
dense_mean(struct tally_ctx *ctx, float *buf, size_t n)
{
	struct tally_ctx_info info;
	float inv;

	tally_ctx_info(ctx, &info);
	inv = 1.0f / (float)info.world;
	for (size_t i = 0; i < n; i++)
		buf[i] *= inv;
	return tally_allreduce_f32(ctx, buf, n);
}

/*
 * The call itself, on the context (locked) with the GIL released; mean:
 * the average (float32 only), divided as libtally decodes; dense: the
 * fixed-point sum (tally_allreduce_f32()) whatever the job's codec.
 */
static int
reduce(struct tally_ctx *ctx, struct tally_state *st, enum ext_elem k,
	void *buf, size_t n, int mean, int dense)
{
	if (k == EXT_I32)
		return tally_allreduce_i32(ctx, buf, n);
	if (k == EXT_BF16)
		return tally_allreduce_typed(ctx, buf, n, TALLY_DT_BF16);
	if (k == EXT_F16)
		return tally_allreduce_typed(ctx, buf, n, TALLY_DT_F16);
	if (dense)
		return mean ? dense_mean(ctx, buf, n) :
			tally_allreduce_f32(ctx, buf, n);
	if (mean)
		return tally_allreduce_mean(ctx, st, buf, n);
	if (st != NULL)
		return tally_allreduce_state(ctx, st, buf, n);
	return tally_allreduce(ctx, buf, n);
}

/* The state, mean and dense checks of a call on n elements of kind k. */
static int
check_extras(PyObject *sobj, enum ext_elem k, size_t n, int mean, int dense,
	struct tally_state **st)
{
	if (dense && sobj != Py_None) {
		PyErr_SetString(PyExc_ValueError, "tally: dense=True sends no "
			"codec's memory: give no state");
		return -1;
	}
	if (sobj != Py_None) {
		struct ext_state *s = (struct ext_state *)sobj;

		if (k != EXT_F32 || s->n != (Py_ssize_t)n) {
			PyErr_Format(PyExc_ValueError, "tally: the state "
				"is for %zd float32 elements, the buffer has %zu "
				"of %s (a State belongs to one tensor: make a new "
				"one when its size changes)", s->n, n,
				elem_names[k]);
			return -1;
		}
		*st = s->st;
	}
	if (mean && k != EXT_F32) {
		PyErr_SetString(PyExc_TypeError, "tally: mean=True takes "
			"float32 elements (an int32 average is not an int32)");
		return -1;
	}
	return 0;
}

/*
 * Context.allreduce(buf, state=None, mean=False, dtype=None, dense=False):
 * see the
 * doc string.
 */
static PyObject *
ctx_allreduce(struct ext_ctx *c, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "buf", "state", "mean", "dtype", "dense",
		NULL };
	PyObject *obj, *sobj = Py_None;
	struct tally_state *st = NULL;
	const char *want = NULL;
	enum ext_elem k;
	char why[512] = "";
	Py_buffer v;
	int mean = 0, dense = 0, view;
	void *buf;
	size_t n;
	int rc;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O|Opzp:allreduce", kwlist,
			&obj, &sobj, &mean, &want, &dense))
		return NULL;
	if (sobj != Py_None && !PyObject_TypeCheck(sobj, &ext_state_type))
		return PyErr_Format(PyExc_TypeError, "tally: state must be a "
			"tally.State, not %s", Py_TYPE(sobj)->tp_name);
	view = get_buffer(obj, want, &v, &k, 0);
	if (view < 0)
		return NULL;
	if (view == 0) {
		buf = v.buf;
		n = (size_t)(v.len / v.itemsize);
	} else if (want != NULL) {
		return PyErr_Format(PyExc_TypeError, "tally: dtype= is for "
			"buffers; a tensor says its own");
	} else if (get_tensor(obj, &buf, &n, &k) != 0) {
		return NULL;
	}
	if (check_extras(sobj, k, n, mean, dense, &st) != 0 ||
			ext_ctx_enter(c) != 0) {
		if (view == 0)
			PyBuffer_Release(&v);
		return NULL;
	}
	Py_BEGIN_ALLOW_THREADS
	rc = reduce(c->ctx, st, k, buf, n, mean, dense);
	if (rc < 0)
		snprintf(why, sizeof(why), "%s", tally_ctx_error(c->ctx));
	Py_END_ALLOW_THREADS
	ext_ctx_leave(c);
	if (view == 0)
		PyBuffer_Release(&v);
	if (rc < 0)
		return ext_raise(rc, why);
	Py_RETURN_NONE;
}

/*
 * The elements of obj (a C-contiguous buffer, writable unless ro, or a
 * contiguous CPU torch tensor) into *a, for the collectives of coll.c;
 * never a copy. The caller releases it with ext_array_release(). Returns
 * 0, or -1 with an exception.
 */
int
ext_array_get(PyObject *obj, int ro, struct ext_array *a)
{
	a->view = get_buffer(obj, NULL, &a->v, &a->k, ro);
	if (a->view < 0)
		return -1;
	if (a->view == 0) {
		a->buf = a->v.buf;
		a->n = (size_t)(a->v.len / a->v.itemsize);
		return 0;
	}
	return get_tensor(obj, &a->buf, &a->n, &a->k);
}

/* Releases what ext_array_get() took (a buffer view; a tensor: nothing). */
void
ext_array_release(struct ext_array *a)
{
	if (a->view == 0)
		PyBuffer_Release(&a->v);
	a->view = 1;
}

/* Context.set_lanes(lanes): tally_ctx_set_lanes(). */
static PyObject *
ctx_set_lanes(struct ext_ctx *c, PyObject *arg)
{
	unsigned long lanes = PyLong_AsUnsignedLong(arg);
	int rc;

	if (PyErr_Occurred())
		return NULL;
	if (ext_ctx_enter(c) != 0)
		return NULL;
	rc = tally_ctx_set_lanes(c->ctx, lanes > 255 ? 255 : (unsigned int)lanes);
	ext_ctx_leave(c);
	if (rc < 0)
		return ext_raise(rc, "lanes are 0 (the rule), 16 or 32");
	Py_RETURN_NONE;
}

/* Context.set_allgather_codec(bits): tally_ctx_set_allgather_codec(). */
static PyObject *
ctx_set_allgather_codec(struct ext_ctx *c, PyObject *arg)
{
	unsigned long bits = PyLong_AsUnsignedLong(arg);
	char why[512] = "";
	int rc;

	if (PyErr_Occurred())
		return NULL;
	if (ext_ctx_enter(c) != 0)
		return NULL;
	rc = tally_ctx_set_allgather_codec(c->ctx,
		bits > 255 ? 255 : (unsigned int)bits);
	if (rc < 0)
		snprintf(why, sizeof(why), "%s", tally_ctx_error(c->ctx));
	ext_ctx_leave(c);
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
			set_u64(d, "cuda_staging", i.cuda_staging) ||
			set_u64(d, "lanes_bf16", i.lanes_bf16) ||
			set_u64(d, "lanes_f16", i.lanes_f16) ||
			set_str(d, "transport", i.transport != NULL ?
				i.transport : "?")) {
		Py_DECREF(d);
		return NULL;
	}
	return d;
}

/*
 * Sets the counters of why retransmissions went and of gaps (struct
 * tally_ctx_stats: rack, probes, timeouts, spurious, tp_errors,
 * gap_nacks, result_gaps, gap_resends, the ring's, ignored) in d. Returns 0 or -1.
 */
static int
stats_retx(PyObject *d, const struct tally_ctx_stats *s)
{
	return set_u64(d, "rack", s->rack) ||
		set_u64(d, "probes", s->probes) ||
		set_u64(d, "timeouts", s->timeouts) ||
		set_u64(d, "spurious", s->spurious) ||
		set_u64(d, "tp_errors", s->tp_errors) ||
		set_u64(d, "gap_nacks", s->gap_nacks) ||
		set_u64(d, "result_gaps", s->result_gaps) ||
		set_u64(d, "gap_resends", s->gap_resends) ||
		set_u64(d, "ring_calls", s->ring_calls) ||
		set_u64(d, "ring_refused", s->ring_refused) ||
		set_u64(d, "ring_bad_frames", s->ring_bad_frames) ||
		set_u64(d, "ignored", s->ignored) ? -1 : 0;
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
			set_u64(d, "cuda_net_ns", s.cuda_net_ns) ||
			stats_retx(d, &s)) {
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
		"allreduce(buf, state=None, mean=False, dtype=None, "
		"dense=False): sums buf "
		"over every rank, in place. float32 goes through the job's "
		"codec (with state: that tensor's codec memory), int32 is "
		"summed exactly, bfloat16 and float16 in fixed point rounded "
		"once to their type (tally_allreduce_typed()). mean: the "
		"average instead (float32; tally_allreduce_mean()). dense: "
		"float32 in shared-scale fixed point (tally_allreduce_f32()) "
		"whatever the job's codec, no state. buf is any "
		"writable C-contiguous buffer (dtype='bfloat16' or 'float16' "
		"names the type of a 2-byte one, e.g. a bfloat16 tensor's "
		".view(torch.int16).numpy()), or a contiguous CPU torch tensor "
		"of those types; it is never copied, and the GIL is released "
		"while libtally works." },
	{ "reduce_scatter",
		(PyCFunction)(void (*)(void))ext_ctx_reduce_scatter,
		METH_VARARGS | METH_KEYWORDS,
		"reduce_scatter(input, output, mean=False): output (k elements) "
		"gets this rank's shard (elements rank x k .. (rank + 1) x k - 1) "
		"of the sum of input (world x k elements, same type) over every "
		"rank: float32 in shared-scale fixed point, int32 exactly, "
		"bfloat16 and float16 in fixed point rounded once to the type. "
		"mean: the average (float32), input multiplied by 1/world in "
		"place first, as allreduce(mean=True). tally_reduce_scatter()." },
	{ "allgather", (PyCFunction)(void (*)(void))ext_ctx_allgather,
		METH_VARARGS | METH_KEYWORDS,
		"allgather(input, output): output (world x k elements, of "
		"input's type) gets rank r's input (k elements) as its shard r "
		"on every rank, bytes as they are; input may be this rank's own "
		"shard of output. tally_allgather()." },
	{ "broadcast", (PyCFunction)(void (*)(void))ext_ctx_broadcast,
		METH_VARARGS | METH_KEYWORDS,
		"broadcast(buf, root): root's buf, in place on every rank, bytes "
		"as they are. tally_broadcast()." },
	{ "set_lanes", (PyCFunction)ctx_set_lanes, METH_O,
		"set_lanes(lanes): the wire lanes of bfloat16 and float16 "
		"sums, 0 (the rule: 16 in a narrow job where the error bound "
		"holds, else 32), 16 or 32; every rank must set the same "
		"(tally_ctx_set_lanes())." },
	{ "set_allgather_codec", (PyCFunction)ctx_set_allgather_codec,
		METH_O,
		"set_allgather_codec(bits): the float32 allgather's codec, 0 "
		"(exact, the default) or 8 (lossy q8: each chunk with its own "
		"scale, every element within max|x| / 254 of its chunk's, the "
		"same bits on every rank); every rank must set the same "
		"(tally_ctx_set_allgather_codec())." },
	{ "allreduce_cuda",
		(PyCFunction)(void (*)(void))ext_ctx_allreduce_cuda,
		METH_VARARGS | METH_KEYWORDS,
		"allreduce_cuda(ptr, n, dtype, stream=0, state=None, "
		"dense=False): sums the "
		"n float32 or int32 elements at device address ptr over every "
		"rank, in place, through libtally's GPU path; the decoding is "
		"enqueued on the CUDA stream handle stream (0: the legacy "
		"default stream). state: a State(ctx, n, cuda=True). dense: "
		"float32 in fixed point (tally_allreduce_f32_cuda()) whatever "
		"the job's codec, no state." },
	{ "info", (PyCFunction)ctx_info, METH_NOARGS,
		"info() -> dict: job, rank, world, window, elems, narrow, "
		"codec (its canonical spec), codec_name, codec_memory, "
		"cuda_path (what a CUDA tensor's allreduce does: gpu-staged, "
		"none, no-device, codec-not-on-gpu), cuda_segment, "
		"cuda_staging, lanes_bf16 and lanes_f16 (the wire lanes those "
		"types' sums take)." },
	{ "stats", (PyCFunction)ctx_stats, METH_NOARGS,
		"stats() -> dict: the context's counters (tally_ctx_stats): "
		"packets_sent, retransmits and why they went (rack, probes, "
		"timeouts; spurious ones), gaps (gap_nacks, result_gaps, "
		"gap_resends), tp_errors, ..." },
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
