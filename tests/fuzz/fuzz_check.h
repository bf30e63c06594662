/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * CHECK(), the invariant test every fuzz target makes: when c is false
 * it names the target, the file, the line and the condition on stderr
 * and abort()s, which libFuzzer reports as a crash and the seed replay
 * (replay.c) as a failed test. An include of the targets only, never of
 * the libraries they fuzz; each defines FUZZ_NAME ("fuzz-wire") first.
 */
#ifndef TALLY_FUZZ_CHECK_H
#define TALLY_FUZZ_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#ifndef FUZZ_NAME
#error "define FUZZ_NAME, the target's name, before fuzz_check.h"
#endif

#define CHECK(c) do {							\
	if (!(c)) {							\
		fprintf(stderr, FUZZ_NAME ": %s:%d: check failed: %s\n", \
			__FILE__, __LINE__, #c);			\
		abort();						\
	}								\
} while (0)

#endif /* TALLY_FUZZ_CHECK_H */
