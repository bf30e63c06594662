/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The module tally._tally: its functions (open, open_direct), its types
 * (Context, State), its exception (Error) and what this build of
 * libtally can do (HAVE_CUDA).
 */
#include <errno.h>
#include <string.h>

#include "tally_config.h"

#include "ext.h"

PyObject *ext_error;

PyObject *
ext_raise(int rc, const char *why)
{
	int err = rc < 0 ? -rc : rc;
	PyObject *exc;

	if (why == NULL || why[0] == '\0')
		why = strerror(err);
	exc = PyObject_CallFunction(ext_error, "is", err, why);
	if (exc != NULL) {
		PyErr_SetObject(ext_error, exc);
		Py_DECREF(exc);
	}
	return NULL;
}

static PyMethodDef ext_methods[] = {
	{ "open", (PyCFunction)(void (*)(void))ext_open,
		METH_VARARGS | METH_KEYWORDS,
		"open(url, token, rank, world, **opts) -> Context: joins a "
		"job through tallyd (tally_open_opts())." },
	{ "open_direct", (PyCFunction)(void (*)(void))ext_open_direct,
		METH_VARARGS | METH_KEYWORDS,
		"open_direct(dp_addr, job, token, rank, world, **opts) -> "
		"Context: a membership set up by hand, without tallyd "
		"(tally_ctx_open())." },
	{ NULL, NULL, 0, NULL },
};

static struct PyModuleDef ext_module = {
	PyModuleDef_HEAD_INIT,
	.m_name = "tally._tally",
	.m_doc = "libtally's contexts and states; use the package tally.",
	.m_size = -1,
	.m_methods = ext_methods,
};

/* Adds type t to module m under its short name. Returns 0 or -1. */
static int
add_type(PyObject *m, PyTypeObject *t, const char *name)
{
	if (PyType_Ready(t) < 0)
		return -1;
	Py_INCREF(t);
	if (PyModule_AddObject(m, name, (PyObject *)t) < 0) {
		Py_DECREF(t);
		return -1;
	}
	return 0;
}

PyMODINIT_FUNC PyInit__tally(void);

/* The module's initialisation: called once by the import system. */
PyMODINIT_FUNC
PyInit__tally(void)
{
	PyObject *m = PyModule_Create(&ext_module);

	if (m == NULL)
		return NULL;
	ext_error = PyErr_NewExceptionWithDoc("tally.Error",
		"A libtally or tallyd error: errno, and tallyd's or "
		"libtally's sentence as strerror.", PyExc_OSError, NULL);
	if (ext_error == NULL)
		goto fail;
	Py_INCREF(ext_error);
	if (PyModule_AddObject(m, "Error", ext_error) < 0) {
		Py_DECREF(ext_error);
		goto fail;
	}
	if (add_type(m, &ext_ctx_type, "Context") < 0 ||
			add_type(m, &ext_state_type, "State") < 0)
		goto fail;
	if (PyModule_AddIntConstant(m, "HAVE_CUDA", TALLY_HAVE_CUDA) < 0 ||
			PyModule_AddStringConstant(m, "VERSION",
				TALLY_VERSION) < 0)
		goto fail;
	return m;
fail:
	Py_DECREF(m);
	return NULL;
}
