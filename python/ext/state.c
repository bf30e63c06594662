/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The State type: one tensor's codec memory (struct tally_state), made
 * for a context's codec and a number of elements. It keeps no reference
 * to the context (a state may outlive it and serve a context opened
 * again for the same job, as libtally allows). One call at a time may
 * use a state.
 */
#include <stdint.h>
#include <stdio.h>

#include <tally/tally_cuda.h>

#include "ext.h"

/*
 * State(ctx, n, cuda=False, rows=0): tally_state_new_rows() of n
 * elements for ctx's codec (rows: a powersgd matrix's rows, 0 the
 * job's); with cuda, tally_state_new_rows_cuda() (device memory, for
 * CUDA tensors; EOPNOTSUPP without libtally's CUDA path).
 */
static PyObject *
state_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "ctx", "n", "cuda", "rows", NULL };
	Py_ssize_t rows = 0;
	int cuda = 0;
	struct tally_state *st = NULL;
	struct ext_state *s;
	struct ext_ctx *c;
	char why[512] = "";
	Py_ssize_t n;
	int rc;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O!n|pn:State", kwlist,
			&ext_ctx_type, &c, &n, &cuda, &rows))
		return NULL;
	if (n <= 0)
		return PyErr_Format(PyExc_ValueError, "tally: a State holds "
			"1 or more elements, not %zd", n);
	if (rows < 0 || (unsigned long long)rows > UINT32_MAX)
		return PyErr_Format(PyExc_ValueError, "tally: a State's rows "
			"are 0 (the job's) .. 2^32 - 1, not %zd", rows);
	if (ext_ctx_enter(c) != 0)
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	rc = cuda ? tally_state_new_rows_cuda(c->ctx, (size_t)n,
			(uint32_t)rows, &st) :
		tally_state_new_rows(c->ctx, (size_t)n, (uint32_t)rows, &st);
	if (rc < 0)
		snprintf(why, sizeof(why), "%s", tally_ctx_error(c->ctx));
	Py_END_ALLOW_THREADS
	ext_ctx_leave(c);
	if (rc < 0)
		return ext_raise(rc, why);
	s = (struct ext_state *)type->tp_alloc(type, 0);
	if (s == NULL) {
		tally_state_free(st);
		return NULL;
	}
	s->st = st;
	s->n = n;
	s->cuda = cuda;
	return (PyObject *)s;
}

/* Frees the state. */
static void
state_dealloc(struct ext_state *s)
{
	tally_state_free(s->st);
	Py_TYPE(s)->tp_free((PyObject *)s);
}

/* len(state): the tensor's elements. */
static Py_ssize_t
state_len(struct ext_state *s)
{
	return s->n;
}

static PySequenceMethods state_seq = {
	.sq_length = (lenfunc)state_len,
};

PyTypeObject ext_state_type = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "tally._tally.State",
	.tp_doc = "State(ctx, n, cuda=False, rows=0): the codec memory of one "
		"tensor of n float32 elements (error-feedback residual, DGC "
		"momentum, PowerSGD's Q), zeroed, in host memory or with "
		"cuda=True in the current CUDA device's; rows: the rows of "
		"the matrix a powersgd state views the tensor as (0: the "
		"job's rows key); pass it to "
		"allreduce(x, state=...) with that tensor every time.",
	.tp_basicsize = sizeof(struct ext_state),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_new = state_new,
	.tp_dealloc = (destructor)state_dealloc,
	.tp_as_sequence = &state_seq,
};
