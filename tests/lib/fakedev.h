/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A fake device for libtally's device path (struct tally_dev_ops of
 * gpu/lib/dev.h), so that the staging pipeline and the codecs' device
 * steps run on a machine without a GPU: "device memory" is host memory,
 * the "kernels" are the CPU reference functions (the very bits the CUDA
 * kernels must give), and a stream is a queue of operations that run
 * when the fake decides, not when they are enqueued:
 * - eager: each runs as it is enqueued (a device that is never behind:
 *   catches a buffer written again while the host still reads it);
 * - lazy: nothing runs until an event after it is waited for or the
 *   stream is synchronized (a device that is always behind: catches the
 *   host reading what is not encoded yet, or receiving into what is not
 *   decoded yet);
 * - random: a random part of the queue runs at each enqueue.
 * Staging's device address is not its host address: kernels handed a
 * host address of staging (or the window a device one) fail loudly.
 *
 * Test infrastructure only.
 */
#ifndef TALLY_TESTS_FAKEDEV_H
#define TALLY_TESTS_FAKEDEV_H

#include <stdint.h>

#include "lib/dev.h"

enum fakedev_mode {
	FAKEDEV_EAGER,
	FAKEDEV_LAZY,
	FAKEDEV_RANDOM,
};

extern const struct tally_dev_ops fakedev_ops;

struct fakedev_stream;

/* A stream of mode (random: draws from seed). NULL on failure. */
struct fakedev_stream *fakedev_stream_new(enum fakedev_mode mode,
	uint64_t seed);

/* Runs everything enqueued on s (what the caller's sync does). */
void fakedev_stream_sync(struct fakedev_stream *s);

/* Synchronizes and frees s. NULL is fine. */
void fakedev_stream_free(struct fakedev_stream *s);

/*
 * Makes the k-th operation enqueued on s from now on (1 = the next)
 * fail with -EIO instead of running; 0 turns it off.
 */
void fakedev_fail_at(struct fakedev_stream *s, uint64_t k);

/* Operations enqueued on s so far. */
uint64_t fakedev_enqueued(const struct fakedev_stream *s);

#endif /* TALLY_TESTS_FAKEDEV_H */
