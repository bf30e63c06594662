/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A two-tier tree as text (job show of a tree's job): the spine and a
 * row per leaf (docs/scale-out.md, "Two tiers").
 */
#include <errno.h>
#include <stdio.h>

#include "format.h"
#include "table.h"

/* Adds v as a cell (tallyctl_fmt_value()). */
static int
cell(struct tallyctl_table *t, const json_t *v)
{
	char b[96];

	tallyctl_fmt_value(b, sizeof(b), v);
	return tallyctl_table_cell(t, "%s", b);
}

/* One leaf's row: the job, where, how far, and the dataplane's tier. */
static int
leaf_row(struct tallyctl_table *t, const json_t *l)
{
	static const char *const tier[] = { "tier_forwarded",
		"tier_reforwarded", "tier_results" };
	const json_t *c = json_object_get(l, "counters");
	const json_t *dt = json_object_get(l, "dp_tier");
	int ret;

	if ((ret = cell(t, json_object_get(l, "name"))) ||
			(ret = cell(t, json_object_get(l, "dataplane"))) ||
			(ret = cell(t, json_object_get(l, "state"))) ||
			(ret = cell(t, json_object_get(l, "joined"))) ||
			(ret = cell(t, json_object_get(l, "epoch"))) ||
			(ret = cell(t, json_object_get(c, "rounds"))))
		return ret;
	for (size_t k = 0; ret == 0 && k < 3; k++)
		ret = cell(t, json_object_get(dt, tier[k]));
	return ret;
}

int
tallyctl_print_tree(FILE *f, const json_t *tree)
{
	const json_t *leaves = json_object_get(tree, "leaves"), *l;
	struct tallyctl_table *t;
	size_t i;
	int ret;

	if (!json_is_array(leaves))
		return -EPROTO;
	fprintf(f, "tree: %lld ranks, %zu leaves of %lld, spine at %s\n",
		(long long)json_integer_value(json_object_get(tree, "world")),
		json_array_size(leaves), (long long)json_integer_value(
		json_object_get(tree, "leaf_world")),
		tallyctl_json_str(tree, "spine"));
	t = tallyctl_table_new(9, "lllrrrrrr");
	if (t == NULL)
		return -ENOMEM;
	ret = tallyctl_table_cells(t, "LEAF", "DATAPLANE", "STATE", "JOINED",
		"EPOCH", "ROUNDS", "DP_FORWARDED", "DP_REFORWARDED",
		"DP_RESULTS", NULL);
	json_array_foreach(leaves, i, l)
		if (ret == 0)
			ret = leaf_row(t, l);
	if (ret == 0)
		ret = tallyctl_table_print(t, f, "  ");
	tallyctl_table_destroy(t);
	return ret;
}
