/* SPDX-License-Identifier: BSD-3-Clause */
/* tallyd's log lines: stderr, one line each (journald adds the time). */
#include <stdarg.h>
#include <stdio.h>

#include "tallyd.h"

void
tallyd_log(const char *fmt, ...)
{
	va_list ap;

	fputs("tallyd: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}
