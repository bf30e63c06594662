/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Strict numbers from the command line: the whole string must be the
 * number, with no sign, space or suffix, and in range.
 */
#ifndef TALLYCTL_NUM_H
#define TALLYCTL_NUM_H

/*
 * s as a decimal integer in lo..hi into *v. Returns 0, -EINVAL (not
 * digits only, or empty) or -ERANGE (outside lo..hi). Borrows s.
 */
int tallyctl_parse_uint(const char *s, unsigned long lo, unsigned long hi,
	unsigned long *v);

/*
 * s as seconds, "N" or "N.F" (digits only around one point), in lo..hi
 * into *v. Returns 0, -EINVAL or -ERANGE. Borrows s.
 */
int tallyctl_parse_seconds(const char *s, double lo, double hi, double *v);

#endif /* TALLYCTL_NUM_H */
