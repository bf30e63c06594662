/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The ring fallback at the rendezvous (docs/scale-out.md, "Ring
 * fallback"): when a job has no live dataplane, or a worker asks for
 * it, its membership forms without tally-dp, and READY gives every rank
 * the members' ring listeners in rank order; libtally then runs its
 * allreduces around a TCP ring among them. tallyd's part is small: it
 * decides, it vouches for the addresses (each is its sender's own, as
 * a member's data address is), and it counts and logs the switch.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <arpa/inet.h>

#include "addrmap.h"
#include "rdv.h"

bool
tallyd_rdv_ring_addr_ok(struct tallyd *d, struct tallyd_rdv_conn *c,
	const struct tallyd_job *j, unsigned int rank)
{
	struct in_addr a = { .s_addr = htonl(c->ring.ip) }, p = {
		.s_addr = htonl(c->src) };
	char claimed[INET_ADDRSTRLEN], peer[INET_ADDRSTRLEN];

	if (c->ring.port == 0 || c->ring.ip == c->src ||
			tallyd_addrmap_allows(d->rdv->map, c->src, c->ring.ip))
		return true;
	inet_ntop(AF_INET, &a, claimed, sizeof(claimed));
	inet_ntop(AF_INET, &p, peer, sizeof(peer));
	tallyd_rdv_fail(d, c, EADDRNOTAVAIL, TALLYD_JF_ADDRESS, "rank %u of "
		"job '%s' claims the ring address %s but joins from %s%s",
		rank, j->name, claimed, peer, d->rdv->map != NULL ?
		", and rendezvous_data_map does not map one to the other" :
		" (no rendezvous_data_map)");
	return false;
}

bool
tallyd_rdv_dps_down(struct tallyd *d, const struct tallyd_job *j)
{
	/* Dead, not stalled: a stopped tally-dp's ranks wait for it. */
	for (unsigned int k = 0; k < j->nshards; k++)
		if (!tallyd_dpc_dead(d->dps[j->sh[k].dp].dpc))
			return false;
	return true;
}

bool
tallyd_rdv_ring_join(struct tallyd *d, const struct tallyd_job *j,
	const struct tallyd_rdv_conn *c)
{
	return c->ring.port != 0 && (c->ring_want ||
		tallyd_rdv_dps_down(d, j));
}

bool
tallyd_rdv_ring_barrier(struct tallyd *d, const struct tallyd_job *j)
{
	bool any = false;

	for (unsigned int r = 0; r < j->world; r++) {
		const struct tallyd_rdv_conn *c = j->joiners[r];

		if (c->ring.port == 0)
			return false;
		any = any || c->ring_fb;
	}
	return any || tallyd_rdv_dps_down(d, j);
}

/* Why j goes on the ring, for the log. */
static const char *
ring_why(struct tallyd *d, const struct tallyd_job *j)
{
	for (unsigned int r = 0; r < j->world; r++)
		if (j->joiners[r]->ring_want)
			return "a worker asked for it (transport=ring)";
	return tallyd_rdv_dps_down(d, j) ? "no live dataplane" :
		"no live dataplane when its ranks joined";
}

void
tallyd_rdv_ring_release(struct tallyd *d, struct tallyd_job *j)
{
	struct tally_rdv_msg m = { .op = TALLY_RDV_READY };
	const char *why = ring_why(d, j);

	j->program_pending = false;
	j->epoch = ++d->next_epoch;
	j->last_active = tallyd_wall_s();
	d->st.joins += j->world;
	d->st.memberships++;
	d->st.ring_memberships++;
	/* On disk before any rank counts under it, as any membership. */
	if (tallyd_state_save(d) != 0 && d->cl != NULL)
		return tallyd_rdv_fail_job(d, j, EAGAIN, TALLYD_JF_DP_DOWN,
			"job '%s': membership not saved: %s", j->name,
			d->sf.error);
	m.wire_token = j->wire_token;
	m.epoch = j->epoch;
	m.nring = j->world;
	for (unsigned int r = 0; r < j->world; r++)
		m.ring[r] = j->joiners[r]->ring;
	for (unsigned int r = 0; r < j->world; r++)
		tallyd_rdv_finish(j->joiners[r], &m);
	j->njoined = 0;
	tallyd_log("WARNING: job '%s' (id %u): membership %u of %u ranks "
		"runs on the ring fallback (a TCP ring among the workers, "
		"no in-network aggregation): %s", j->name, j->id, j->epoch,
		j->world, why);
}
