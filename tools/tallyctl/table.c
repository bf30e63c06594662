/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Text tables for job list, job show, stats and top: the table owns a
 * copy of every cell.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "table.h"

struct tallyctl_table {
	unsigned int ncols;
	const char *align;
	char **cells;		/* row-major, owned */
	unsigned int ncells;
	unsigned int cap;
};

struct tallyctl_table *
tallyctl_table_new(unsigned int ncols, const char *align)
{
	struct tallyctl_table *t;

	if (ncols == 0 || align == NULL || align[0] == '\0') {
		errno = EINVAL;
		return NULL;
	}
	t = calloc(1, sizeof(*t));
	if (t == NULL)
		return NULL;
	t->ncols = ncols;
	t->align = align;
	return t;
}

int
tallyctl_table_cell(struct tallyctl_table *t, const char *fmt, ...)
{
	va_list ap;
	char *s;
	int n;

	if (t->ncells == t->cap) {
		unsigned int cap = t->cap != 0 ? t->cap * 2 : 64;
		char **c = realloc(t->cells, cap * sizeof(*c));

		if (c == NULL)
			return -ENOMEM;
		t->cells = c;
		t->cap = cap;
	}
	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -ENOMEM;
	t->cells[t->ncells++] = s;
	return 0;
}

int
tallyctl_table_cells(struct tallyctl_table *t, ...)
{
	const char *s;
	va_list ap;
	int ret = 0;

	va_start(ap, t);
	while (ret == 0 && (s = va_arg(ap, const char *)) != NULL)
		ret = tallyctl_table_cell(t, "%s", s);
	va_end(ap);
	return ret;
}

unsigned int
tallyctl_table_rows(const struct tallyctl_table *t)
{
	return (t->ncells + t->ncols - 1) / t->ncols;
}

static char
align_of(const struct tallyctl_table *t, unsigned int col)
{
	size_t n = strlen(t->align);

	return t->align[col < n ? col : n - 1];
}

/* Prints one row of cells [first, first + n). */
static void
print_row(const struct tallyctl_table *t, FILE *f, const char *indent,
	const int *width, unsigned int first, unsigned int n)
{
	unsigned int last = n;

	/* Trailing empty left-aligned cells print nothing at all. */
	while (last > 0 && t->cells[first + last - 1][0] == '\0' &&
			align_of(t, last - 1) == 'l')
		last--;
	fputs(indent, f);
	for (unsigned int c = 0; c < last; c++) {
		const char *s = t->cells[first + c];

		if (c > 0)
			fputs("  ", f);
		if (align_of(t, c) == 'r')
			fprintf(f, "%*s", width[c], s);
		else if (c + 1 < last)
			fprintf(f, "%-*s", width[c], s);
		else
			fputs(s, f);
	}
	fputc('\n', f);
}

int
tallyctl_table_print(const struct tallyctl_table *t, FILE *f,
	const char *indent)
{
	int *width = calloc(t->ncols, sizeof(*width));
	unsigned int i;

	if (width == NULL)
		return -ENOMEM;
	for (i = 0; i < t->ncells; i++) {
		int w = (int)strlen(t->cells[i]);

		if (w > width[i % t->ncols])
			width[i % t->ncols] = w;
	}
	for (i = 0; i < t->ncells; i += t->ncols)
		print_row(t, f, indent, width, i, t->ncells - i < t->ncols ?
			t->ncells - i : t->ncols);
	free(width);
	return 0;
}

void
tallyctl_table_destroy(struct tallyctl_table *t)
{
	if (t == NULL)
		return;
	for (unsigned int i = 0; i < t->ncells; i++)
		free(t->cells[i]);
	free(t->cells);
	free(t);
}
