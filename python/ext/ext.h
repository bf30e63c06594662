/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tally._tally, the C extension under the Python package tally: libtally's
 * contexts and tensor states as Python objects. The package's Python code
 * (python/tally/__init__.py) wraps them: it turns torch tensors into the
 * buffers these take, reads the token from the environment, and names the
 * options. This layer takes any writable buffer (PEP 3118: numpy arrays,
 * memoryviews, array.array) and never copies one: libtally reads and
 * writes it in place, with the GIL released.
 */
#ifndef TALLY_PY_EXT_H
#define TALLY_PY_EXT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <tally/tally.h>

/* A context: one rank's membership of one job (struct tally_ctx). */
struct ext_ctx {
	PyObject_HEAD
	struct tally_ctx *ctx;		/* NULL once closed */
	PyThread_type_lock lock;	/* one libtally call at a time */
};

/* A tensor's codec memory (struct tally_state) for n elements. */
struct ext_state {
	PyObject_HEAD
	struct tally_state *st;
	Py_ssize_t n;
	int cuda;			/* in device memory (for CUDA tensors) */
};

extern PyTypeObject ext_ctx_type;
extern PyTypeObject ext_state_type;

/* tally.Error, a subclass of OSError: errno and libtally's sentence. */
extern PyObject *ext_error;

/*
 * Raises tally.Error(-rc, why) and returns NULL. rc is libtally's
 * negative errno; why its sentence (copied; may be NULL or empty).
 */
PyObject *ext_raise(int rc, const char *why);

/*
 * Takes the context's lock with the GIL released (another thread may be
 * in a long allreduce on it). Returns 0, or raises tally.Error(EBADF)
 * and returns -1 (lock not held) when the context is closed.
 */
int ext_ctx_enter(struct ext_ctx *c);

/* Releases the lock ext_ctx_enter() took. */
void ext_ctx_leave(struct ext_ctx *c);

/*
 * Context.allreduce_cuda(ptr, n, dtype, stream=0, state=None): the n
 * float32 or int32 elements at device address ptr, in place, through
 * libtally's GPU path on the CUDA stream handle stream (cuda.c).
 */
PyObject *ext_ctx_allreduce_cuda(struct ext_ctx *c, PyObject *args,
	PyObject *kw);

/* What a buffer's elements are: TALLY_DT_* in the same order. */
enum ext_elem { EXT_F32, EXT_I32, EXT_BF16, EXT_F16 };

/* A buffer or CPU tensor's elements, borrowed for one call. */
struct ext_array {
	Py_buffer v;		/* when view == 0 */
	int view;		/* 0: a buffer view to release */
	void *buf;
	size_t n;		/* elements */
	enum ext_elem k;
};

/* Takes obj's elements (context.c): 0, or -1 with an exception. */
int ext_array_get(PyObject *obj, int ro, struct ext_array *a);

/* Releases what ext_array_get() took. */
void ext_array_release(struct ext_array *a);

/*
 * Context.reduce_scatter(), .allgather() and .broadcast() (coll.c):
 * libtally's tally_reduce_scatter(), tally_allgather(), tally_broadcast().
 */
PyObject *ext_ctx_reduce_scatter(struct ext_ctx *c, PyObject *args,
	PyObject *kw);
PyObject *ext_ctx_allgather(struct ext_ctx *c, PyObject *args,
	PyObject *kw);
PyObject *ext_ctx_broadcast(struct ext_ctx *c, PyObject *args,
	PyObject *kw);

/* _tally.open() and _tally.open_direct(): new contexts. */
PyObject *ext_open(PyObject *mod, PyObject *args, PyObject *kw);
PyObject *ext_open_direct(PyObject *mod, PyObject *args, PyObject *kw);

#endif /* TALLY_PY_EXT_H */
