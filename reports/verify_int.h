/*
 * verify_int: what the loader (verify_load.c) and the checks (verify.c)
 * share, and only they: the records, the parameter sets, the state of one
 * run. Not a contract for anything else: verify.h is.
 */
#ifndef RLG_REPORT_VERIFY_INT_H
#define RLG_REPORT_VERIFY_INT_H

#include <stdint.h>
#include <stdio.h>

#include "db.h"
#include "intern.h"
#include "verify.h"

/* One admitted decision, as compact as the replay needs. */
struct rec {
	int64_t		 ts;	/* ms */
	uint32_t	 kid;	/* (rule, key) */
	uint32_t	 pid;	/* (rule, algorithm, limit, window, burst) */
	uint32_t	 seq;	/* load order: database, then id */
	uint32_t	 cost;
	int64_t		 delay;	/* ms, leaky_bucket */
};

/* A parameter set of one rule, with what the summary reports about it. */
struct pinfo {
	const char	*rule;
	const char	*algname;
	int		 alg;		/* enum rlg_algorithm, -1 unknown */
	int64_t		 limit, window_ms, burst;
	int64_t		 precision_ms;
	const char	*precision_from;
	int64_t		 keys, admitted, violations;
	int64_t		 unchecked;	/* redis_error rows admitted, in range */
	uint32_t	 last_kid;
	int64_t		 retry_gcd;	/* sliding_window: gcd of denials' retry times */
};

/* The parameters last seen for a key, and their id. */
struct kcache {
	const char	*alg;
	int64_t		 limit, window, burst;
	uint32_t	 pid;
};

struct priv {
	struct intern	 keys;
	struct kcache	*kcache;	/* by key id */
	size_t		 kcap;
	struct intern	 params;	/* bytes of a parameter set; id = pinfo index */
	struct pinfo	*pi;
	size_t		 npi, pcap;
	struct rec	*recs;		/* in memory: all, or one part at a time */
	size_t		 n, cap;
	struct rec	*scratch;	/* verify_sort_records' other array */
	size_t		 scap;
	uint64_t	 seq;		/* records loaded in all */
	FILE		**part;		/* spilled records, by kid % nparts */
	char		*partbuf;	/* their stdio buffers */
	size_t		 nparts;	/* 0: all in memory */
};

/*
 * Records beyond this many bytes are spilled to temporary files, one per
 * part of the keys, and checked a part at a time: memory stays bounded
 * whatever the number of rows, time stays one pass plus a write and a read
 * of each record. Reading in key order through the (rule, key, ts_ms)
 * index instead would make every row a random lookup.
 */
#define PART_BYTES	(16u << 20)
#define MAX_PARTS	1024

struct ctx {
	struct verify	*v;
	struct priv	*p;
	const struct filter *f;
	int		 strict;	/* unchecked admissions replayed too */
	size_t		 vcap;
	int		 oom;
};

/*
 * Loads what c->f selects from every database of dbs into c->p (records in
 * memory, or spilled to c->p's parts), then sets each sliding_window
 * rule's precision: precision_ms when > 0, else inferred from the denials
 * or the default. 0, or -1 with one sentence in err.
 */
int	verify_load(struct ctx *c, struct rdbs *dbs, int64_t precision_ms,
	    char *err, size_t errlen);
/* Reads part k's spilled records into memory (and closes its file). 0, or
 * -1 with err set. */
int	verify_load_part(struct priv *pv, size_t k, char *err, size_t errlen);
/* Orders the records in memory by key, then time (then load order). 0,
 * or -1 out of memory. */
int	verify_sort_records(struct priv *pv);

/*
 * Replays r[0..n), the admissions of one key (r->kid) with one parameter
 * set p, in time order, against p's algorithm's promise: the violations
 * go to c->v (c->oom set when out of memory). 0, or -1 when p's algorithm
 * is none rlgate knows (nothing checked).
 */
int	verify_check_run(struct ctx *c, struct rec *r, size_t n,
	    const struct pinfo *p);

#endif
