/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What every transport shares beyond its ops: the words for a failure.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "transport.h"

const char *
tally_transport_strerror(const struct tally_transport *tp, int rc)
{
	if (tp != NULL && tp->why[0] != '\0')
		return tp->why;
	return strerror(-rc);
}

int
tally_tp_fail(char *why, size_t len, int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, len, fmt, ap);
	va_end(ap);
	return rc;
}
