/*
 * fuzz_metrics: libFuzzer target for the shared counter table of
 * metrics.c, filled with whatever bytes another process (or memory gone
 * bad) could leave in it, read as the status endpoint reads it (status.c
 * writes the texts). It links metrics.c built with a smaller table (the
 * Makefile: MAX_WORKERS, MAX_PROCS and RLG_METRICS_RULES, the same
 * -D for this file and that object, so that
 * every input can fill all of it and a scrape of a full table stays fast),
 * puts the input in the table (metrics_fill_table(), metrics_int.h), then
 * runs every reader and writer
 * of it as a process sharing it would: a slot taken, counted into and
 * given back, the rules registered, the totals summed, the /metrics text
 * and the health JSON written, the table left.
 *
 * The input is tiled over the whole table, header (magic, size, the
 * counts of workers and names),
 * names, every process's entry and every worker's slot. Beyond "no crash, no out-of-bounds access,
 * no undefined behaviour": a rule's slot is -1 or below
 * RLG_METRICS_RULES, the counts stay within the table, the sums within
 * the processes that can share, and /metrics is whole text.
 *
 * Build and run: make fuzz (tests/fuzz/corpus/metrics/ is the seed corpus).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf.h"
#include "metrics.h"
#include "metrics_int.h"
#include "status.h"

#define NRULES	3
#define TEXT_MAX	(1 << 20)

static char	text[TEXT_MAX];

static void
die(const char *what)
{
	fprintf(stderr, "fuzz_metrics: %s\n", what);
	abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char n0[] = "open", n1[] = "login", n2[] = "api.v2-x";
	struct rule rules[NRULES];
	struct conf c;
	struct metrics_process p;
	struct status_health h;
	struct metrics_worker *w;
	size_t i, len;
	int healthy;

	if (size == 0)
		return 0;
	if (metrics_fill_table(data, size) == -1)
		die("no table");

	memset(&c, 0, sizeof(c));
	memset(rules, 0, sizeof(rules));
	rules[0].name = n0;
	rules[1].name = n1;
	rules[2].name = n2;
	c.rules = rules;
	c.nrules = NRULES;
	metrics_register_rules(&c);
	for (i = 0; i < NRULES; i++)
		if (rules[i].metrics_slot < -1 ||
		    rules[i].metrics_slot >= RLG_METRICS_RULES)
			die("a rule's slot out of the table");

	w = metrics_worker_new();
	metrics_busy(w, 1);
	metrics_redis_latency(w, (long long)data[size - 1] * 1000);
	metrics_redis_error(w);
	metrics_busy(w, 0);

	memset(&p, 0, sizeof(p));
	p.workers = 2;
	p.generation = 3;
	p.loaded_ms = 1700000000000LL;
	metrics_publish(&p);
	metrics_total(&p);
	if (p.processes < 1 || p.processes > MAX_PROCS)
		die("processes out of range");
	if (p.workers < 2 || p.workers > 2 + MAX_PROCS * MAX_WORKERS)
		die("workers out of range");
	if (p.audit_written < 0 || p.audit_lost < 0 || p.audit_retries < 0)
		die("a total went negative");

	len = status_prometheus(&p, NULL, 0, text, sizeof(text));
	if (len >= sizeof(text) || strlen(text) != len)
		die("/metrics text cut or with a NUL in it");

	memset(&h, 0, sizeof(h));
	h.p = p;
	h.config_path = "/etc/rlgate/rlgate.ini";
	h.rules = NRULES;
	h.audit_lag_max_ms = 1000;
	len = status_health_json(&h, text, sizeof(text), &healthy);
	if (len >= sizeof(text))
		die("health JSON cut");

	metrics_worker_free(w);
	metrics_unshare();
	if (metrics_sharing())
		die("still sharing after metrics_unshare()");
	return 0;
}
