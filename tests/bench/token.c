/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Where tally-bench allreduce gets a token: a file (--token-file) or the
 * environment (TALLY_TOKEN), never its command line, which every user of
 * the host can read in ps and /proc/PID/cmdline.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

/* Copies s without surrounding blanks into out (cap bytes). */
static int
trimmed(const char *s, size_t len, char *out, size_t cap, const char *from)
{
	while (len > 0 && strchr(" \t\r\n", s[len - 1]) != NULL)
		len--;
	while (len > 0 && strchr(" \t\r\n", *s) != NULL) {
		s++;
		len--;
	}
	if (len == 0 || len >= cap || memchr(s, '\n', len) != NULL) {
		fprintf(stderr, "%s: not one token (16 or 64 hex digits)\n",
			from);
		return -EINVAL;
	}
	memcpy(out, s, len);
	out[len] = '\0';
	return 0;
}

int
bench_token_read(const char *path, char *out, size_t cap)
{
	char buf[256];
	const char *env;
	size_t n;
	FILE *f;

	if (path == NULL) {
		env = getenv("TALLY_TOKEN");
		if (env == NULL || env[0] == '\0')
			return -ENOENT;
		return trimmed(env, strlen(env), out, cap, "TALLY_TOKEN");
	}
	if ((f = fopen(path, "r")) == NULL) {
		int err = errno;

		fprintf(stderr, "--token-file %s: %s\n", path, strerror(err));
		return -err;
	}
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	return trimmed(buf, n, out, cap, path);
}
