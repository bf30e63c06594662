/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer target: rendezvous messages (control/rdv/msg.c), what tallyd
 * parses from any TCP peer and libtally from tallyd. Every input must be
 * parsed or refused; an accepted message must format again, and that
 * text must parse back to the same message.
 */
#include <stdint.h>
#include <string.h>

#include "rdv/msg.h"

#define FUZZ_NAME "fuzz-rdv"
#include "fuzz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tally_rdv_msg m, m2;
	uint8_t buf[4 + TALLY_RDV_MAX_MSG];
	char why[160];
	int n;

	if (size >= 4)
		(void)tally_rdv_frame_len(data);
	if (tally_rdv_parse(data, size, &m, why, sizeof(why)) != 0) {
		CHECK(why[0] != '\0');	/* a refusal always says why */
		return 0;
	}
	n = tally_rdv_format(&m, buf, sizeof(buf));
	CHECK(n >= 4 && tally_rdv_frame_len(buf) == (size_t)n - 4);
	CHECK(tally_rdv_parse(buf + 4, (size_t)n - 4, &m2, why,
		sizeof(why)) == 0);
	CHECK(memcmp(&m, &m2, sizeof(m)) == 0);
	return 0;
}
