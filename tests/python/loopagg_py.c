/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * loopagg (tests/lib/loopagg.h, the real engine behind UDP sockets on
 * 127.0.0.1) with flat arguments for Python's ctypes: the Python tests
 * (tests/python/loop.py) run tally's ranks as threads or processes
 * against it, with no dataplane and no root. Test infrastructure only.
 */
#include <stdint.h>
#include <string.h>

#include "../lib/loopagg.h"

struct loopagg *tpy_loopagg_start(unsigned int job, uint64_t token,
	unsigned int world, unsigned int window, unsigned int max_elems,
	double loss, uint64_t seed);
unsigned int tpy_loopagg_port(const struct loopagg *a);
void tpy_loopagg_stop(struct loopagg *a, uint64_t *out);

/*
 * Starts an aggregator for one job (plain, wide results, one port), with
 * loss the chance a packet is dropped each way. NULL with errno set on
 * failure. The caller stops it with tpy_loopagg_stop().
 */
struct loopagg *
tpy_loopagg_start(unsigned int job, uint64_t token, unsigned int world,
	unsigned int window, unsigned int max_elems, double loss,
	uint64_t seed)
{
	struct loopagg_conf c;

	memset(&c, 0, sizeof(c));
	c.job = (uint16_t)job;
	c.token = token;
	c.world = (uint8_t)world;
	c.window = (uint16_t)window;
	c.max_elems = (uint16_t)max_elems;
	c.loss_up = loss;
	c.loss_down = loss;
	c.seed = seed;
	return loopagg_start(&c);
}

/* The aggregator's UDP port on 127.0.0.1. */
unsigned int
tpy_loopagg_port(const struct loopagg *a)
{
	return loopagg_port(a);
}

/*
 * Stops and frees the aggregator; out (3 entries, may be NULL) gets the
 * datagrams received, sent, and dropped by loss either way.
 */
void
tpy_loopagg_stop(struct loopagg *a, uint64_t *out)
{
	struct loopagg_stats st;

	loopagg_stop(a, &st);
	if (out != NULL) {
		out[0] = st.rx;
		out[1] = st.tx;
		out[2] = st.lost_up + st.lost_down;
	}
}
