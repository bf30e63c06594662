/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Text tables: cells added row by row, printed with each column as wide
 * as its widest cell, two spaces between columns and no trailing space.
 */
#ifndef TALLYCTL_TABLE_H
#define TALLYCTL_TABLE_H

#include <stdio.h>

struct tallyctl_table;

/*
 * A table of ncols columns. align has 'l' or 'r' per column; columns past
 * its end take its last letter. Borrows align (keep it alive). Returns
 * NULL with errno set.
 */
struct tallyctl_table *tallyctl_table_new(unsigned int ncols,
	const char *align);

/* Adds the next cell (rows fill left to right). Returns 0 or -ENOMEM. */
int tallyctl_table_cell(struct tallyctl_table *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * Adds the strings given (borrowed), up to a NULL, as the next cells: a
 * row when there are ncols of them. Returns 0 or -ENOMEM.
 */
int tallyctl_table_cells(struct tallyctl_table *t, ...)
	__attribute__((sentinel));

/* Prints every row, each starting with indent. Returns 0 or -ENOMEM. */
int tallyctl_table_print(const struct tallyctl_table *t, FILE *f,
	const char *indent);

/* Rows added so far (a partial last row counts). */
unsigned int tallyctl_table_rows(const struct tallyctl_table *t);

/* Accepts NULL. */
void tallyctl_table_destroy(struct tallyctl_table *t);

#endif /* TALLYCTL_TABLE_H */
