/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Codec specs: every name and key parses and formats back to the same
 * codec; canonical text is stable; bad names, keys a codec does not take,
 * values out of range, duplicates and empty fields are refused.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include <tally/codec.h>

static void
canonical(const char *in, const char *want)
{
	struct tally_codec c, d;
	char buf[TALLY_CODEC_SPEC_MAX], why[160] = "";

	if (tally_codec_parse(in, &c, why, sizeof(why)) != 0)
		fail_msg("refused %s: %s", in, why);
	assert_true(tally_codec_format(&c, buf, sizeof(buf)) > 0);
	assert_string_equal(buf, want);
	assert_int_equal(tally_codec_parse(buf, &d, NULL, 0), 0);
	assert_memory_equal(&c, &d, sizeof(c));
}

static void
good_specs(void **state)
{
	struct tally_codec c;

	(void)state;
	canonical("fixp", "fixp");
	canonical("q16", "q16");
	canonical("q8", "q8");
	canonical("q4,seed=7", "q4,seed=7");
	canonical("ternary,seed=0x10,ef=1", "ternary,seed=16,ef=1");
	canonical("2bit", "2bit");
	canonical("2bit,threshold=0.5", "2bit");
	canonical("2bit,threshold=1e-3,seed=2", "2bit,seed=2,threshold=0.001");
	canonical("sparse,momentum=0.9,est=topk",
		"sparse,est=topk,momentum=0.9");
	canonical("sparse,momentum=0", "sparse");
	canonical("q8,ef=1", "q8,ef=1");
	canonical("randk,ef=1", "randk,ef=1");
	canonical("sparse,ef=1,density=0.05", "sparse,density=0.05,ef=1");
	canonical("sign,ef=1", "sign,ef=1");
	canonical("powersgd", "powersgd");
	canonical("powersgd,ef=1,rank=4,rows=0", "powersgd");
	canonical("powersgd,rank=32,rows=4096,seed=9,ef=0",
		"powersgd,seed=9,rank=32,rows=4096,ef=0");
	canonical("sparse,density=0.012345678901234567,"
		"seed=18446744073709551615,est=sidco-gamma,"
		"momentum=0.99999999999999989",
		"sparse,density=0.012345678901234567,"
		"seed=18446744073709551615,est=sidco-gamma,"
		"momentum=0.9999999999999999");
	canonical("sign", "sign");
	canonical("randk,density=0.01", "randk");
	canonical("randk,seed=3,density=0.25", "randk,density=0.25,seed=3");
	canonical("sparse,est=sidco-exp,density=0.001",
		"sparse,density=0.001,est=sidco-exp");
	canonical("sparse,est=sidco-gpd", "sparse");
	canonical("sparse,est=topk,density=1", "sparse,density=1,est=topk");
	canonical("sparse,seed=18446744073709551615",
		"sparse,seed=18446744073709551615");
	assert_int_equal(tally_codec_parse("randk", &c, NULL, 0), 0);
	assert_true(c.density == 0.01);
	assert_false(tally_codec_has_memory(&c));
	assert_int_equal(tally_codec_parse("powersgd", &c, NULL, 0), 0);
	assert_int_equal(c.rank, 4);
	assert_int_equal(c.ef, 1);
	assert_true(tally_codec_has_memory(&c));
	assert_int_equal(tally_codec_parse("2bit", &c, NULL, 0), 0);
	assert_true(c.threshold == 0.5f);
	assert_true(tally_codec_has_memory(&c));
	assert_int_equal(tally_codec_parse("sparse,momentum=0.5", &c, NULL,
		0), 0);
	assert_true(c.momentum == 0.5);
	assert_true(tally_codec_has_memory(&c));
	assert_int_equal(tally_codec_parse("q4,ef=1", &c, NULL, 0), 0);
	assert_true(tally_codec_has_memory(&c));
	assert_string_equal(tally_codec_name(TALLY_CODEC_POWERSGD),
		"powersgd");
	assert_string_equal(tally_codec_name(TALLY_CODEC_Q8), "q8");
	assert_string_equal(tally_codec_name(TALLY_CODEC_MAX_), "?");
}

static void
bad_specs(void **state)
{
	static const char *const bad[] = {
		"", ",", "q8,", ",q8", "q8,,seed=1", "q7", "Q8", "q8 ",
		"fixp,seed=1", "fixp,ef=1", "q8,density=0.5",
		"randk,density=0", "randk,density=1.5", "randk,density=x",
		"randk,density=", "randk,density=nan", "randk,density=-0.1",
		"sparse,est=sidco", "q8,est=topk", "q8,seed=-1", "q8,seed=",
		"q8,seed=1x", "q8,seed=99999999999999999999", "q8,ef=2",
		"q8,seed=1,seed=2", "q8,bogus=1", "q8,seed",
		"sparse,density=0.1,density=0.2",
		"2bit,ef=0", "2bit,ef=1", "2bit,threshold=0",
		"2bit,threshold=-1", "2bit,threshold=1e-39",
		"2bit,threshold=1e39", "2bit,threshold=inf",
		"2bit,threshold=nan", "2bit,threshold=x", "q8,threshold=1",
		"sparse,momentum=1", "sparse,momentum=-0.1",
		"sparse,momentum=nan", "sparse,momentum=0.9,ef=1",
		"randk,momentum=0.9", "powersgd,rank=0", "powersgd,rank=33",
		"powersgd,rank=-1", "powersgd,rank=1.5", "powersgd,rank=",
		"powersgd,rows=4294967296", "powersgd,rows=-1",
		"powersgd,density=0.1", "q8,rank=2", "sparse,rows=2",
		"powersgd,rank=2,rank=3", "2bit,threshold=1,threshold=2",
	};
	struct tally_codec c;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char why[160] = "";

		if (tally_codec_parse(bad[i], &c, why, sizeof(why)) != -EINVAL
				|| why[0] == '\0')
			fail_msg("accepted: '%s'", bad[i]);
	}
	assert_int_equal(tally_codec_parse(NULL, &c, NULL, 0), -EINVAL);
}

static void
format_limits(void **state)
{
	struct tally_codec c = { .kind = TALLY_CODEC_SPARSE, .density = 0.5,
		.seed = 1, .est = TALLY_EST_DGC, .ef = 1 };
	char buf[TALLY_CODEC_SPEC_MAX];

	(void)state;
	assert_int_equal(tally_codec_format(&c, buf, 4), -ENOSPC);
	c.density = 0;
	assert_int_equal(tally_codec_format(&c, buf, sizeof(buf)), -EINVAL);
	c.density = 0.5;
	c.kind = TALLY_CODEC_MAX_;
	assert_int_equal(tally_codec_format(&c, buf, sizeof(buf)), -EINVAL);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(good_specs),
		cmocka_unit_test(bad_specs),
		cmocka_unit_test(format_limits),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
