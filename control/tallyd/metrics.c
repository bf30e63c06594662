/* SPDX-License-Identifier: BSD-3-Clause */
/* Placeholder until the metrics change lands. */
extern int tallyd_metrics_placeholder_;
