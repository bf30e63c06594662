/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The checkers run as child processes on a temporary file holding the
 * text: promcheck.py gets its path, promtool gets it on stdin.
 */
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

#define PYTHON "/usr/bin/python3"
#define PROMTOOL "/usr/bin/promtool"

extern char **environ;

/* Writes text to a new temporary file; path gets its name. Returns 0/-1. */
static int
write_temp(const char *text, char *path, size_t size)
{
	const char *dir = getenv("TMPDIR");
	size_t len = strlen(text), off = 0;
	int fd;

	snprintf(path, size, "%s/metrics-XXXXXX", dir != NULL ? dir : "/tmp");
	fd = mkstemp(path);
	if (fd < 0)
		return -1;
	while (off < len) {
		ssize_t n = write(fd, text + off, len - off);

		if (n <= 0) {
			close(fd);
			unlink(path);
			return -1;
		}
		off += (size_t)n;
	}
	close(fd);
	return 0;
}

/* Runs argv with stdin from path when in is set; returns its exit status. */
static int
run(char *const argv[], const char *in)
{
	posix_spawn_file_actions_t fa;
	int status, rc;
	pid_t pid;

	posix_spawn_file_actions_init(&fa);
	if (in != NULL)
		posix_spawn_file_actions_addopen(&fa, 0, in, O_RDONLY, 0);
	rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (rc != 0)
		return -1;
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

int
promcheck_text(const char *text)
{
	char path[256];
	char *argv[] = { (char *)PYTHON, (char *)PROMCHECK_PY, path, NULL };
	int rc;

	if (write_temp(text, path, sizeof(path)) != 0)
		return -1;
	rc = run(argv, NULL);
	unlink(path);
	return rc;
}

int
promtool_text(const char *text)
{
	char path[256];
	char *argv[] = { (char *)PROMTOOL, (char *)"check", (char *)"metrics",
		NULL };
	int rc;

	if (access(PROMTOOL, X_OK) != 0)
		return -2;
	if (write_temp(text, path, sizeof(path)) != 0)
		return -1;
	rc = run(argv, path);
	unlink(path);
	return rc;
}

unsigned int
count_of(const char *text, const char *needle)
{
	unsigned int n = 0;

	for (const char *p = text; (p = strstr(p, needle)) != NULL; p++)
		n++;
	return n;
}
