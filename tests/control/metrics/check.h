/* SPDX-License-Identifier: BSD-3-Clause */
/* Runs exposition text through promcheck.py and, when installed, promtool. */
#ifndef TALLY_TESTS_METRICS_CHECK_H
#define TALLY_TESTS_METRICS_CHECK_H

/*
 * Checks text (borrowed) with promcheck.py (beside this file). Returns
 * its exit status: 0 when valid; its reasons go to stderr. -1 when it
 * could not run.
 */
int promcheck_text(const char *text);

/*
 * The same with "promtool check metrics". Returns -2 when
 * /usr/bin/promtool is not installed.
 */
int promtool_text(const char *text);

/* Occurrences of needle in text. */
unsigned int count_of(const char *text, const char *needle);

#endif /* TALLY_TESTS_METRICS_CHECK_H */
