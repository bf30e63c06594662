/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The job's token for the collnet's join: TALLY_TOKEN, else the first
 * line of the file TALLY_TOKEN_FILE names. Never a handle (NCCL sends
 * handles to every rank over its bootstrap network), never argv.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin.h"

/* Copies s[0..n) without surrounding blanks into out; -EINVAL if none or
 * too long. */
static int
trim_copy(const char *s, size_t n, char *out, size_t cap)
{
	while (n > 0 && strchr(" \t\r\n", s[n - 1]) != NULL)
		n--;
	while (n > 0 && strchr(" \t\r\n", s[0]) != NULL) {
		s++;
		n--;
	}
	if (n == 0 || n >= cap || memchr(s, '\n', n) != NULL)
		return -EINVAL;
	memcpy(out, s, n);
	out[n] = '\0';
	return 0;
}

/* See plugin.h. */
int
tally_nccl_token(char *out, size_t cap, char *why, size_t len)
{
	const char *env = getenv("TALLY_TOKEN");
	const char *path = getenv("TALLY_TOKEN_FILE");
	char buf[256];
	size_t n;
	FILE *f;

	if (env != NULL && env[0] != '\0') {
		if (trim_copy(env, strlen(env), out, cap) == 0)
			return 0;
		snprintf(why, len, "TALLY_TOKEN is not one token");
		return -EINVAL;
	}
	if (path == NULL || path[0] == '\0') {
		snprintf(why, len, "no token: set TALLY_TOKEN_FILE (or "
			"TALLY_TOKEN)");
		return -ENOENT;
	}
	if ((f = fopen(path, "re")) == NULL) {
		int err = errno;

		snprintf(why, len, "TALLY_TOKEN_FILE %s: %s", path,
			strerror(err));
		return -err;
	}
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	if (trim_copy(buf, n, out, cap) == 0) {
		explicit_bzero(buf, sizeof(buf));
		return 0;
	}
	explicit_bzero(buf, sizeof(buf));
	snprintf(why, len, "TALLY_TOKEN_FILE %s does not hold one token",
		path);
	return -EINVAL;
}
