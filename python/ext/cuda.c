/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Context.allreduce_cuda(): a tensor in GPU memory, given as its device
 * address, through libtally's GPU path (<tally/tally_cuda.h>): the job's
 * codec encodes on the GPU into the context's pinned staging, and the
 * sums are decoded on the caller's CUDA stream. Nothing here touches the
 * tensor's memory, and nothing copies it to the host: a libtally built
 * without CUDA refuses (EOPNOTSUPP), one without a usable device too
 * (ENODEV), with libtally's sentence.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <tally/tally_cuda.h>

#include "ext.h"

/*
 * The call itself, on the context (locked) with the GIL released; dense:
 * the fixed-point sum whatever the job's codec.
 */
static int
reduce_dev(struct tally_ctx *ctx, struct tally_state *st, int i32,
	int dense, void *d_buf, size_t n, void *stream)
{
	if (i32)
		return tally_allreduce_i32_cuda(ctx, d_buf, n, stream);
	if (dense)
		return tally_allreduce_f32_cuda(ctx, d_buf, n, stream);
	if (st != NULL)
		return tally_allreduce_state_cuda(ctx, st, d_buf, n, stream);
	return tally_allreduce_cuda(ctx, d_buf, n, stream);
}

/*
 * The state argument: None, or a tally.State made for the device
 * (State(ctx, n, cuda=True)) of n float32 elements. Returns 0 with *st
 * set, or -1 with an exception.
 */
static int
dev_state(PyObject *sobj, int i32, size_t n, struct tally_state **st)
{
	struct ext_state *s = (struct ext_state *)sobj;

	*st = NULL;
	if (sobj == Py_None)
		return 0;
	if (!PyObject_TypeCheck(sobj, &ext_state_type)) {
		PyErr_Format(PyExc_TypeError, "tally: state must be a "
			"tally.State, not %s", Py_TYPE(sobj)->tp_name);
		return -1;
	}
	if (i32 || s->n != (Py_ssize_t)n) {
		PyErr_Format(PyExc_ValueError, "tally: the state is for %zd "
			"float32 elements, the tensor has %zu of %s (a State "
			"belongs to one tensor)", s->n, n, i32 ? "int32" :
			"float32");
		return -1;
	}
	if (!s->cuda) {
		PyErr_SetString(PyExc_ValueError, "tally: a CUDA tensor needs "
			"a State in device memory: State(ctx, n, cuda=True)");
		return -1;
	}
	*st = s->st;
	return 0;
}

PyObject *
ext_ctx_allreduce_cuda(struct ext_ctx *c, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "ptr", "n", "dtype", "stream", "state",
		"dense", NULL };
	unsigned long long ptr, stream = 0;
	PyObject *sobj = Py_None;
	struct tally_state *st;
	const char *dtype;
	char why[512] = "";
	Py_ssize_t n;
	int rc, i32, dense = 0;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "Kns|KOp:allreduce_cuda",
			kwlist, &ptr, &n, &dtype, &stream, &sobj, &dense))
		return NULL;
	if (strcmp(dtype, "float32") != 0 && strcmp(dtype, "int32") != 0)
		return PyErr_Format(PyExc_TypeError, "tally: allreduce takes "
			"float32 or int32 tensors, not %s", dtype);
	if (n < 0)
		return PyErr_Format(PyExc_ValueError, "tally: %zd elements",
			n);
	i32 = dtype[0] == 'i';
	if (dev_state(sobj, i32, (size_t)n, &st) != 0)
		return NULL;
	if (dense && st != NULL)
		return PyErr_Format(PyExc_ValueError, "tally: dense=True "
			"sends no codec's memory: give no state");
	if (ext_ctx_enter(c) != 0)
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	rc = reduce_dev(c->ctx, st, i32, dense, (void *)(uintptr_t)ptr,
		(size_t)n, (void *)(uintptr_t)stream);
	if (rc < 0)
		snprintf(why, sizeof(why), "%s", tally_ctx_error(c->ctx));
	Py_END_ALLOW_THREADS
	ext_ctx_leave(c);
	if (rc < 0)
		return ext_raise(rc, why);
	Py_RETURN_NONE;
}
