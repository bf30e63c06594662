/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Strict number parsing: strtoul and strtod accept leading spaces, signs
 * ("-1" is ULONG_MAX), hex, exponents and "inf"; a digits-only check
 * first leaves them only the digits.
 */
#include <errno.h>
#include <stdlib.h>

#include "num.h"

/* How many of s's leading characters are decimal digits. */
static unsigned int
ndigits(const char *s)
{
	unsigned int n = 0;

	while (s[n] >= '0' && s[n] <= '9')
		n++;
	return n;
}

int
tallyctl_parse_uint(const char *s, unsigned long lo, unsigned long hi,
	unsigned long *v)
{
	unsigned long x;
	char *end;

	if (s == NULL || ndigits(s) == 0 || s[ndigits(s)] != '\0')
		return -EINVAL;
	errno = 0;
	x = strtoul(s, &end, 10);
	if (*end != '\0')
		return -EINVAL;
	if (errno == ERANGE || x < lo || x > hi)
		return -ERANGE;
	*v = x;
	return 0;
}

int
tallyctl_parse_seconds(const char *s, double lo, double hi, double *v)
{
	unsigned int n;
	double x;
	char *end;

	if (s == NULL || (n = ndigits(s)) == 0)
		return -EINVAL;
	if (s[n] == '.') {
		unsigned int f = ndigits(s + n + 1);

		if (f == 0)
			return -EINVAL;
		n += 1 + f;
	}
	if (s[n] != '\0')
		return -EINVAL;
	errno = 0;
	x = strtod(s, &end);
	if (*end != '\0')
		return -EINVAL;
	if (errno == ERANGE || !(x >= lo && x <= hi))
		return -ERANGE;
	*v = x;
	return 0;
}
