/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tnl_load(): a plugin library opened as NCCL 2.28's net loader opens it
 * (see load.h), and a logger for its init().
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "load.h"

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static unsigned int nwarn;
static char last_warn[1024];
static int verbose;

/* Finds the first table of prefix_vN, N from high to low; its version. */
static int
first_version(void *dl, const char *prefix, void **table)
{
	char sym[64];

	for (int v = TNL_VERSION_HI; v >= TNL_VERSION_LO; v--) {
		snprintf(sym, sizeof(sym), "%s_v%d", prefix, v);
		if ((*table = dlsym(dl, sym)) != NULL)
			return v;
	}
	return 0;
}

int
tnl_load(const char *path, struct tnl_plugin *p, char *why, size_t len)
{
	void *t = NULL;

	memset(p, 0, sizeof(*p));
	if ((p->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL)) == NULL) {
		snprintf(why, len, "dlopen: %s", dlerror());
		return -1;
	}
	p->net_version = first_version(p->dl, "ncclNetPlugin", &t);
	if (p->net_version == 0) {
		snprintf(why, len, "%s has no ncclNetPlugin_v%d.._v%d: NCCL "
			"skips it", path, TNL_VERSION_HI, TNL_VERSION_LO);
		return -1;
	}
	if (p->net_version == 11)
		p->net = t;
	p->coll_version = first_version(p->dl, "ncclCollNetPlugin", &t);
	if (p->coll_version == 11)
		p->coll = t;
	return 0;
}

void
tnl_unload(struct tnl_plugin *p)
{
	if (p->dl != NULL)
		dlclose(p->dl);
	memset(p, 0, sizeof(*p));
}

void
tnl_logger(int level, unsigned long flags, const char *file, int line,
	const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&log_mu);
	if (level == TALLY_NCCL_LOG_WARN) {
		nwarn++;
		snprintf(last_warn, sizeof(last_warn), "%s", msg);
	}
	if (verbose || level == TALLY_NCCL_LOG_WARN)
		fprintf(stderr, "NCCL %s %s:%d flags %#lx %s\n",
			level == TALLY_NCCL_LOG_WARN ? "WARN" : "INFO",
			file, line, flags, msg);
	pthread_mutex_unlock(&log_mu);
}

unsigned int
tnl_warns(void)
{
	unsigned int n;

	pthread_mutex_lock(&log_mu);
	n = nwarn;
	pthread_mutex_unlock(&log_mu);
	return n;
}

const char *
tnl_last_warn(void)
{
	static char copy[1024];

	pthread_mutex_lock(&log_mu);
	memcpy(copy, last_warn, sizeof(copy));
	pthread_mutex_unlock(&log_mu);
	return copy;
}

void
tnl_verbose(int on)
{
	verbose = on;
}
