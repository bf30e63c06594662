/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * docs/protocol.md's scale round and libtally's fixed point must agree:
 * this suite reads the tables of the section "The scale round" (the
 * document's path is argv[1]) and checks every row against
 * tally_fixp_exponent(), tally_fixp_encode() and tally_fixp_decode(), so
 * that an independent client written from the document gets libtally's
 * bits, and the two cannot drift apart.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tally/fixp.h>

#define MAX_ROWS	32
#define MAX_CELLS	4
#define CELL_LEN	64

struct row {
	char cell[MAX_CELLS][CELL_LEN];
};

static char *doc;

/* Copies s[0..n) without surrounding blanks and backquotes into dst. */
static void
trim_into(char *dst, const char *s, size_t n)
{
	while (n > 0 && (*s == ' ' || *s == '`')) {
		s++;
		n--;
	}
	while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '`'))
		n--;
	if (n >= CELL_LEN)
		n = CELL_LEN - 1;
	memcpy(dst, s, n);
	dst[n] = '\0';
}

/* Reads one table line at p (up to eol) into r. */
static void
read_row(const char *p, const char *eol, struct row *r)
{
	int c = 0;

	memset(r, 0, sizeof(*r));
	for (p++; p < eol && c < MAX_CELLS; c++) {
		const char *bar = memchr(p, '|', (size_t)(eol - p));

		if (bar == NULL)
			break;
		trim_into(r->cell[c], p, (size_t)(bar - p));
		p = bar + 1;
	}
}

/*
 * Reads the rows of the table under the heading line `heading` (without
 * its title and separator lines). Returns how many; fails the test when
 * the heading is missing or the table is empty.
 */
static int
read_table(const char *heading, struct row *rows)
{
	const char *p = strstr(doc, heading);
	int n = 0, line = 0;

	if (p == NULL)
		fail_msg("no '%s' in the document", heading);
	for (p = strchr(p, '\n'); p != NULL && n < MAX_ROWS; ) {
		const char *eol;

		p++;
		eol = strchr(p, '\n');
		if (eol == NULL)
			eol = p + strlen(p);
		if (*p != '|' && line > 0)
			break;
		if (*p == '|' && line++ >= 2)
			read_row(p, eol, &rows[n++]);
		p = *eol != '\0' ? eol : NULL;
	}
	if (n == 0)
		fail_msg("the table under '%s' is empty", heading);
	return n;
}

static float
from_bits(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

static uint32_t
to_bits(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

/* "b per world": every world of each row's range, e of 0.5 (k = 0) is b. */
static void
b_per_world(void **state)
{
	struct row rows[MAX_ROWS];
	int n = read_table("### Scale exponent: b per world", rows);
	unsigned int next = 1;

	(void)state;
	for (int i = 0; i < n; i++) {
		char *dots;
		unsigned long lo = strtoul(rows[i].cell[0], &dots, 10), hi = lo;
		int b = atoi(rows[i].cell[1]);

		if (strncmp(dots, "..", 2) == 0)
			hi = strtoul(dots + 2, NULL, 10);
		assert_int_equal(lo, next);
		for (unsigned long w = lo; w <= hi; w++) {
			int e = 9999;

			assert_int_equal(tally_fixp_exponent(0.5f,
				(unsigned int)w, &e), 0);
			if (e != b)
				fail_msg("world %lu: b %d in the document, %d "
					"in libtally", w, b, e);
		}
		next = (unsigned int)hi + 1;
	}
	assert_int_equal(next, TALLY_FIXP_WORLD_MAX + 1);
}

/* "Scale exponent examples": e of (M, world). */
static void
exponent_examples(void **state)
{
	struct row rows[MAX_ROWS];
	int n = read_table("### Scale exponent examples", rows);

	(void)state;
	for (int i = 0; i < n; i++) {
		float m = from_bits((uint32_t)strtoul(rows[i].cell[0], NULL,
			16));
		unsigned int w = (unsigned int)strtoul(rows[i].cell[2], NULL,
			10);
		int want = atoi(rows[i].cell[3]), e = 9999;

		assert_int_equal(tally_fixp_exponent(m, w, &e), 0);
		if (e != want)
			fail_msg("M %s world %u: e %d in the document, %d in "
				"libtally", rows[i].cell[0], w, want, e);
	}
}

/* "Fixed-point encoding examples": q of (x, e). */
static void
encoding_examples(void **state)
{
	struct row rows[MAX_ROWS];
	int n = read_table("### Fixed-point encoding examples", rows);

	(void)state;
	for (int i = 0; i < n; i++) {
		float x = strtof(rows[i].cell[0], NULL);
		int e = atoi(rows[i].cell[1]);
		long want = strtol(rows[i].cell[2], NULL, 10);
		int32_t q;

		tally_fixp_encode(&x, &q, 1, e);
		if (q != want)
			fail_msg("x %s e %d: q %ld in the document, %d in "
				"libtally", rows[i].cell[0], e, want, q);
	}
}

/* "Fixed-point decoding examples": the result's bits of (Q, e). */
static void
decoding_examples(void **state)
{
	struct row rows[MAX_ROWS];
	int n = read_table("### Fixed-point decoding examples", rows);

	(void)state;
	for (int i = 0; i < n; i++) {
		int32_t q = (int32_t)strtol(rows[i].cell[0], NULL, 10);
		int e = atoi(rows[i].cell[1]);
		uint32_t want = (uint32_t)strtoul(rows[i].cell[2], NULL, 16);
		float r;

		tally_fixp_decode(&q, &r, 1, e);
		if (to_bits(r) != want)
			fail_msg("Q %d e %d: 0x%08x in the document, 0x%08x "
				"in libtally", q, e, want, to_bits(r));
	}
}

/* The whole file, NUL-terminated (owned by the caller), or NULL. */
static char *
slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL;
	long len;

	if (f == NULL)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) >= 0 &&
			fseek(f, 0, SEEK_SET) == 0 &&
			(buf = malloc((size_t)len + 1)) != NULL) {
		if (fread(buf, 1, (size_t)len, f) != (size_t)len) {
			free(buf);
			buf = NULL;
		} else {
			buf[len] = '\0';
		}
	}
	fclose(f);
	return buf;
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(b_per_world),
		cmocka_unit_test(exponent_examples),
		cmocka_unit_test(encoding_examples),
		cmocka_unit_test(decoding_examples),
	};
	int rc;

	if (argc < 2 || (doc = slurp(argv[1])) == NULL) {
		fprintf(stderr, "usage: %s docs/protocol.md\n", argv[0]);
		return 2;
	}
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	free(doc);
	return rc;
}
