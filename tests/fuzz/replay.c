/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The replay driver: a main() for a libFuzzer target's
 * LLVMFuzzerTestOneInput(), so the ordinary build (gcc, and the
 * sanitizer build) runs every input the project keeps for that target.
 *
 *   fuzz-replay-<name> PATH...
 *
 * Each PATH is a file or a directory whose entries (but dot files) are
 * taken, in name order, so a run is the same every time; an entry that
 * is not a regular file fails as one that cannot be read. Every input is read into
 * a buffer of exactly its length (a read past it is ASan's to see) and
 * given to the target once. Output is TAP, one case for the whole
 * corpus (a corpus is one test, however many inputs it holds), and a
 * "# PATH" line before each input. The target's own checks abort(), and
 * a sanitizer stops the process: then the run ends there, with no "ok"
 * line, and the last "# PATH" names the input that did it. A path that
 * cannot be read is "not ok" and exit status 1, never a silent pass; so
 * is an empty corpus (nothing to replay is a mistake in the test's
 * declaration).
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct list {
	char **path;
	size_t n, cap;
};

static int
add(struct list *l, const char *dir, const char *name)
{
	size_t dlen = strlen(dir), len = dlen + strlen(name) + 2;
	char *p = malloc(len);

	if (p == NULL)
		return -1;
	/* "corpus/wire/" and "corpus/wire" name an input the same way. */
	while (name[0] != '\0' && dlen > 1 && dir[dlen - 1] == '/')
		dlen--;
	if (name[0] != '\0')
		snprintf(p, len, "%.*s/%s", (int)dlen, dir, name);
	else
		snprintf(p, len, "%s", dir);
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 64;
		char **np = realloc(l->path, cap * sizeof(*np));

		if (np == NULL) {
			free(p);
			return -1;
		}
		l->path = np;
		l->cap = cap;
	}
	l->path[l->n++] = p;
	return 0;
}

static int
by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The entries of dir, added in name order (dot files left out). */
static int
add_dir(struct list *l, const char *dir)
{
	struct dirent **ents;
	int n = scandir(dir, &ents, NULL, alphasort), rc = 0;

	if (n < 0)
		return -1;
	for (int i = 0; i < n; i++) {
		if (ents[i]->d_name[0] != '.' && rc == 0)
			rc = add(l, dir, ents[i]->d_name);
		free(ents[i]);
	}
	free(ents);
	return rc;
}

/* The whole file at path in a buffer of its length; NULL and errno set. */
static uint8_t *
slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	struct stat st;
	uint8_t *buf;
	size_t n;

	if (f == NULL)
		return NULL;
	if (fstat(fileno(f), &st) != 0) {
		int e = errno;

		fclose(f);
		errno = e;
		return NULL;
	}
	if (!S_ISREG(st.st_mode)) {
		fclose(f);
		errno = EINVAL;
		return NULL;
	}
	n = (size_t)st.st_size;
	/* Exactly n bytes (1 for an empty file), so ASan sees a read past. */
	buf = malloc(n ? n : 1);
	if (buf == NULL) {
		fclose(f);
		errno = ENOMEM;
		return NULL;
	}
	if (fread(buf, 1, n, f) != n) {
		free(buf);
		fclose(f);
		errno = EIO;
		return NULL;
	}
	fclose(f);
	*len = n;
	return buf;
}

int
main(int argc, char **argv)
{
	struct list l = { 0 };
	int bad = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: %s PATH...\n", argv[0]);
		return 2;
	}
	for (int i = 1; i < argc; i++) {
		struct stat st;
		size_t before = l.n;
		int rc;

		if (stat(argv[i], &st) != 0) {
			printf("# %s: %s\n", argv[i], strerror(errno));
			bad = 1;
			continue;
		}
		rc = S_ISDIR(st.st_mode) ? add_dir(&l, argv[i]) :
			add(&l, argv[i], "");
		if (rc != 0) {
			printf("# %s: %s\n", argv[i], strerror(errno));
			bad = 1;
		} else if (l.n == before) {
			printf("# %s: no input in it\n", argv[i]);
			bad = 1;
		}
	}
	if (bad) {
		printf("1..1\nnot ok 1 - nothing replayed\n");
		return 1;
	}
	qsort(l.path, l.n, sizeof(*l.path), by_name);
	printf("1..1\n");
	for (size_t i = 0; i < l.n; i++) {
		size_t len = 0;
		uint8_t *buf;

		printf("# %s\n", l.path[i]);
		fflush(stdout);
		buf = slurp(l.path[i], &len);
		if (buf == NULL) {
			printf("# %s: %s\n", l.path[i], strerror(errno));
			bad++;
		} else {
			LLVMFuzzerTestOneInput(buf, len);
			free(buf);
		}
		free(l.path[i]);
	}
	if (bad)
		printf("not ok 1 - %d of %zu inputs could not be read\n", bad,
			l.n);
	else
		printf("ok 1 - %zu inputs replayed\n", l.n);
	free(l.path);
	return bad ? 1 : 0;
}
