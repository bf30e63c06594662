/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The AF_XDP transport in a libtally built without libxdp and libbpf
 * (their -dev packages were missing, or -Dxdp=disabled): asking for it
 * is a clear error, not a silent fall-back to kernel UDP.
 */
#include <errno.h>
#include <stdio.h>

#include "transport.h"

struct tally_transport *
tally_xdp_transport_create(const struct tally_xdp_conf *conf)
{
	if (conf != NULL && conf->why != NULL)
		snprintf(conf->why, conf->why_len, "xdp: this libtally was "
			"built without AF_XDP (install libxdp-dev and "
			"libbpf-dev, and rebuild)");
	errno = EOPNOTSUPP;
	return NULL;
}
