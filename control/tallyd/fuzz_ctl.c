/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer target: control-socket requests (ctl_parse.c), what tallyd
 * parses from every tallyctl (and anyone else in the socket's group).
 * Every input must be parsed or refused with a reason; an accepted
 * request must hold values inside the documented ranges.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "tally/proto.h"
#include "ctl_parse.h"

#define FUZZ_NAME "fuzz-ctl"
#include "fuzz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tallyd_ctl_req r;
	char why[200] = "";
	int rc;

	rc = tallyd_ctl_parse((const char *)data, size, &r, why, sizeof(why));
	if (rc != 0) {
		CHECK(rc == -EINVAL || rc == -EOPNOTSUPP);
		CHECK(why[0] != '\0');
		return 0;
	}
	CHECK(r.cmd < TALLYD_CTL_MAX_);
	if (r.cmd == TALLYD_CTL_JOB_CREATE || r.cmd == TALLYD_CTL_JOB_SHOW ||
			r.cmd == TALLYD_CTL_JOB_DELETE)
		CHECK(tally_rdv_name_ok(r.name));
	if (r.cmd == TALLYD_CTL_JOB_CREATE) {
		CHECK(r.world >= 1 && r.world <= TALLY_MAX_WORKERS);
		CHECK(r.window >= 1 && r.window <= 32768);
		CHECK(r.max_elems >= 1 && r.max_elems <= TALLY_MAX_ELEMS);
		CHECK(r.group_ip == 0 || (r.group_ip >> 28) == 0xe);
	}
	return 0;
}
