/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A libtally built without libibverbs (-Drdma=disabled, or no
 * libibverbs-dev): the RDMA transport says so.
 */
#include <errno.h>
#include <stdio.h>

#include "transport.h"

struct tally_transport *
tally_verbs_transport_create(const struct tally_verbs_conf *conf, char *why,
	size_t why_len)
{
	(void)conf;
	if (why != NULL && why_len > 0)
		snprintf(why, why_len, "this libtally was built without "
			"RDMA (libibverbs-dev; meson -Drdma)");
	errno = EPROTONOSUPPORT;
	return NULL;
}
