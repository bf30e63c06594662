/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What every transport shares beyond its ops: the words for a failure.
 */
#include <string.h>

#include "transport.h"

const char *
tally_transport_strerror(const struct tally_transport *tp, int rc)
{
	if (tp != NULL && tp->why[0] != '\0')
		return tp->why;
	return strerror(-rc);
}
