/*
 * rlgate-report: reads one or more audit databases and prints per-window
 * throughput (text, CSV, JSON, HTML), verifies that every algorithm kept its
 * promise (--verify), lists the keys with the most denials (--top), or
 * replays the record under another configuration (--what-if).
 * This file is the command line: options, errors (exit 2), exit status.
 */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agg.h"
#include "conf.h"
#include "db.h"
#include "output.h"
#include "rowscan.h"
#include "top.h"
#include "verify.h"
#include "whatif.h"
#include "whatif_out.h"
#include "window.h"

#define RLG_REPORT_VERSION	"0.1.0"
#define EXIT_VIOLATION		1
#define EXIT_USAGE		2

static void
usage(FILE *f)
{
	fputs("usage: rlgate-report [-w 1s] [-r RULE] [-k KEY] [--since T] [--until T]\n"
	    "                     [-f text|csv|json|html] [-o FILE] [-j N]\n"
	    "                     [--verify [-p DUR] [--strict]]\n"
	    "                     [--unmatched] [--top N] [--what-if NEW.ini]\n"
	    "                     AUDIT.db|DIR|'GLOB' ...\n"
	    "  -w DUR       window width: 1ms, 250ms, 1s, 1m, 1h, 1d (default 1s)\n"
	    "  -r RULE      only this rule; one series per key\n"
	    "  -k KEY       only this key; one series per rule and key\n"
	    "  --since T    from T (inclusive); --until T: to T (exclusive); T is\n"
	    "               \"YYYY-MM-DD HH:MM:SS.mmm\" UTC, YYYY-MM-DD, or epoch ms\n"
	    "  -f FORMAT    text (default), csv, json or html\n"
	    "  -o FILE      write to FILE instead of standard output\n"
	    "  -j N         threads that read a file's rows (default: the CPUs, up to 16)\n"
	    "  --verify     replay admitted decisions against each algorithm's promise;\n"
	    "               exit 1 when any violation is found; with -f html, the\n"
	    "               charts with each violation marked\n"
	    "  --strict     --verify: replay the requests admitted without a count\n"
	    "               (reason redis_error, on_error = allow) as admissions too\n"
	    "  --unmatched  html: chart the requests no rule applied to as well\n"
	    "  -p DUR       sliding_window block width for --verify (default: inferred)\n"
	    "  --top N      the N keys with the most denials and their deny ratio\n"
	    "  --what-if NEW.ini  replay every recorded attempt with NEW.ini's rules\n"
	    "               (by name) and compare, per rule and window, recorded and\n"
	    "               what-if admissions; the keys whose fate changes\n"
	    "  -V, -h       version, this help\n"
	    "Several databases (one per gateway host, or per day) are merged into one\n"
	    "timeline; a directory means every *.db file in it, a quoted pattern\n"
	    "(audit-2025-11-*.db) the files it matches, both sorted by name.\n"
	    "Exit status: 0 fine, 1 a violation (--verify), 2 an error.\n", f);
}

static void __attribute__((format(printf, 1, 2), noreturn))
die(const char *fmt, ...)
{
	va_list ap;

	fputs("rlgate-report: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(EXIT_USAGE);
}

static int64_t
parse_duration_opt(const char *opt, const char *s)
{
	long long ms;
	const char *errstr;

	if (conf_parse_duration(s, &ms, &errstr) == -1)
		die("%s \"%s\" %s", opt, s, errstr);
	if (ms < 1)
		die("%s \"%s\" is too short (at least 1ms)", opt, s);
	return ms;
}

static int64_t
parse_time_opt(const char *opt, const char *s)
{
	int64_t ms;
	const char *errstr;

	if (window_parse_time(s, &ms, &errstr) == -1)
		die("%s \"%s\" is not a time (%s)", opt, s, errstr);
	return ms;
}

enum { OPT_SINCE = 256, OPT_UNTIL, OPT_VERIFY, OPT_TOP, OPT_UNMATCHED,
	OPT_STRICT, OPT_WHATIF };

/* Changed keys listed per rule by --what-if (--top N sets it). */
#define WHATIF_TOP	10

/* The command line, as parsed and checked by parse_args(). */
struct opts {
	struct filter	 f;
	enum out_format	 fmt;
	int64_t		 width_ms, precision_ms;
	long long	 top_n, jobs;
	int		 verify, strict, unmatched;
	const char	*outpath;
	const char	*whatif;	/* --what-if NEW.ini, or NULL */
	int		 first;		/* argv index of the first database */
};

/* Parses the options into o; dies (exit 2) on a bad one, exits 0 after
 * -h and -V. */
static void
parse_args(int argc, char **argv, struct opts *o)
{
	static const struct option longopts[] = {
		{ "since", required_argument, NULL, OPT_SINCE },
		{ "until", required_argument, NULL, OPT_UNTIL },
		{ "verify", no_argument, NULL, OPT_VERIFY },
		{ "strict", no_argument, NULL, OPT_STRICT },
		{ "top", required_argument, NULL, OPT_TOP },
		{ "unmatched", no_argument, NULL, OPT_UNMATCHED },
		{ "what-if", required_argument, NULL, OPT_WHATIF },
		{ "precision", required_argument, NULL, 'p' },
		{ "format", required_argument, NULL, 'f' },
		{ "output", required_argument, NULL, 'o' },
		{ "rule", required_argument, NULL, 'r' },
		{ "key", required_argument, NULL, 'k' },
		{ "window", required_argument, NULL, 'w' },
		{ "jobs", required_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	const char *errstr;
	int ch;

	*o = (struct opts){ { NULL, NULL, INT64_MIN, INT64_MAX }, OUT_TEXT,
	    1000, 0, 0, rowscan_default_jobs(), 0, 0, 0, NULL, NULL, 0 };
	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":w:r:k:f:o:p:j:hV", longopts, NULL)) != -1) {
		switch (ch) {
		case 'w':
			o->width_ms = parse_duration_opt("-w", optarg);
			break;
		case 'r':
			o->f.rule = optarg;
			break;
		case 'k':
			o->f.key = optarg;
			break;
		case OPT_SINCE:
			o->f.since_ms = parse_time_opt("--since", optarg);
			break;
		case OPT_UNTIL:
			o->f.until_ms = parse_time_opt("--until", optarg);
			break;
		case 'f':
			if (strcmp(optarg, "text") == 0)
				o->fmt = OUT_TEXT;
			else if (strcmp(optarg, "csv") == 0)
				o->fmt = OUT_CSV;
			else if (strcmp(optarg, "json") == 0)
				o->fmt = OUT_JSON;
			else if (strcmp(optarg, "html") == 0)
				o->fmt = OUT_HTML;
			else
				die("-f \"%s\" is not a format (use text, csv, json or html)", optarg);
			break;
		case 'o':
			o->outpath = optarg;
			break;
		case 'p':
			o->precision_ms = parse_duration_opt("-p", optarg);
			break;
		case OPT_VERIFY:
			o->verify = 1;
			break;
		case OPT_STRICT:
			o->strict = 1;
			break;
		case OPT_UNMATCHED:
			o->unmatched = 1;
			break;
		case OPT_WHATIF:
			o->whatif = optarg;
			break;
		case OPT_TOP:
			if (conf_parse_int(optarg, 1, 1000000, &o->top_n, &errstr) == -1)
				die("--top \"%s\" %s (use a count from 1 to 1000000)", optarg, errstr);
			break;
		case 'j':
			if (conf_parse_int(optarg, 1, 256, &o->jobs, &errstr) == -1)
				die("-j \"%s\" %s (use a count of threads from 1 to 256)",
				    optarg, errstr);
			break;
		case 'h':
			usage(stdout);
			exit(0);
		case 'V':
			printf("rlgate-report %s\n", RLG_REPORT_VERSION);
			exit(0);
		case ':':
			if (optopt >= 256 || optopt == 0)
				die("%s needs a value (see rlgate-report -h)", argv[optind - 1]);
			die("-%c needs a value (see rlgate-report -h)", optopt);
		default:
			if (optopt >= 256 || optopt == 0)
				die("unknown option %s (see rlgate-report -h)", argv[optind - 1]);
			die("unknown option -%c (see rlgate-report -h)", optopt);
		}
	}
	if (optind >= argc)
		die("no audit database given (usage: rlgate-report [options] AUDIT.db ...)");
	if (o->verify && o->top_n > 0)
		die("--verify and --top are separate reports: give one of them");
	if (o->whatif != NULL && (o->verify || o->unmatched))
		die("--what-if is a report of its own: give it without --verify "
		    "and --unmatched (--top N: the changed keys listed per rule)");
	if (o->unmatched && (o->fmt != OUT_HTML || o->top_n > 0))
		die("--unmatched only applies to the -f html report (the others list "
		    "requests no rule applied to already)");
	if (o->f.since_ms != INT64_MIN && o->f.until_ms != INT64_MAX &&
	    o->f.since_ms >= o->f.until_ms)
		die("--since must be before --until");
	if (o->precision_ms > 0 && !o->verify)
		die("-p only applies to --verify");
	if (o->strict && !o->verify)
		die("--strict only applies to --verify");
	o->first = optind;
}

/* Opens the databases argv[0..n) name; dies when one cannot be read, or
 * when f's rule or key is in none of them. */
static void
open_dbs(struct rdbs *dbs, char **argv, size_t n, const struct filter *f)
{
	char err[512], **paths;
	size_t npaths;
	int rc;

	if (db_expand(argv, n, &paths, &npaths, err, sizeof(err)) == -1)
		die("%s", err);
	rc = db_open_all(dbs, paths, npaths, err, sizeof(err));
	db_paths_free(paths, npaths);
	if (rc == -1)
		die("%s", err);
	if (f->rule == NULL && f->key == NULL)
		return;
	if ((rc = db_has(dbs, f->rule, f->key, err, sizeof(err))) == -1)
		die("%s", err);
	/* Rows deleted by [audit] keep_rows: the report says so instead. */
	for (size_t i = 0; rc == 0 && i < dbs->n; i++)
		if (dbs->v[i].rows_gone)
			return;
	if (rc == 0 && f->rule != NULL && db_has(dbs, f->rule, NULL, err, sizeof(err)) == 0) {
		char names[400];

		db_rule_names(dbs, names, sizeof(names));
		die("unknown rule \"%s\" (the database%s know%s: %s)", f->rule,
		    dbs->n == 1 ? "" : "s", dbs->n == 1 ? "s" : "", names[0] ? names : "no rule");
	}
	if (rc == 0 && f->rule != NULL)
		die("rule \"%s\" has no key \"%s\"", f->rule, f->key);
	if (rc == 0)
		die("unknown key \"%s\"", f->key);
}

/*
 * NEW.ini for --what-if, checked against the databases: its mistakes are
 * printed as rlgate -t prints them ("FILE:LINE: ..."), and exit 2. A rule
 * f names must be in the databases or in NEW.ini.
 */
static struct whatif_conf *
load_whatif(const char *path, struct rdbs *dbs, const struct filter *f)
{
	struct whatif_conf *wc;
	char *errors = NULL, err[512];
	int rc;

	if (whatif_conf_load(&wc, path, dbs, &errors) == -1) {
		fputs(errors ? errors : "rlgate-report: out of memory\n", stderr);
		free(errors);
		db_close_all(dbs);
		exit(EXIT_USAGE);
	}
	if (whatif_conf_warnings(wc) != NULL)
		fputs(whatif_conf_warnings(wc), stderr);
	if (f->rule == NULL || whatif_conf_has(wc, f->rule))
		return wc;
	if ((rc = db_has(dbs, f->rule, NULL, err, sizeof(err))) == -1)
		die("%s", err);
	if (rc == 0)
		die("unknown rule \"%s\" (in neither %s nor the database%s)",
		    f->rule, path, dbs->n == 1 ? "" : "s");
	return wc;
}

/*
 * The stream for -o outpath: a file is written next to its target
 * (tmppath) and renamed, never half a report; anything else (a symlink such
 * as /dev/stdout, a device, a pipe) is written in place (*direct). Dies
 * when it cannot be opened.
 */
static FILE *
open_output(const char *outpath, int *direct, char *tmppath, size_t tmplen)
{
	struct stat sb;
	FILE *out;

	if (lstat(outpath, &sb) == 0 && !S_ISREG(sb.st_mode))
		*direct = 1;
	else if ((size_t)snprintf(tmppath, tmplen, "%s.tmp.%ld", outpath,
	    (long)getpid()) >= tmplen)
		die("-o \"%s\": the path is too long", outpath);
	if ((out = fopen(*direct ? outpath : tmppath, "w")) == NULL)
		die("-o \"%s\": cannot write: %s", outpath, strerror(errno));
	return out;
}

/*
 * A file whose rows [audit] keep_rows deleted answers only a throughput
 * report of every rule in whole seconds (from its summaries): any other
 * report says, on standard error, that it leaves the file out.
 */
static void
say_rows_gone(const struct opts *o, const struct rdbs *dbs)
{
	const struct filter *f = &o->f;
	const char *what = o->verify ? "--verify" : o->whatif ? "--what-if" :
	    o->top_n > 0 ? "--top" :
	    f->rule != NULL || f->key != NULL ? "a report per key" :
	    o->width_ms % 1000 != 0 || (f->since_ms != INT64_MIN &&
	    f->since_ms % 1000 != 0) || (f->until_ms != INT64_MAX &&
	    f->until_ms % 1000 != 0) ? "a report finer than seconds" : NULL;

	for (size_t i = 0; what != NULL && i < dbs->n; i++)
		if (dbs->v[i].rows_gone)
			fprintf(stderr, "rlgate-report: %s: its rows were "
			    "deleted ([audit] keep_rows), only its per-second "
			    "summaries are left: %s needs rows and leaves it "
			    "out\n", dbs->v[i].path, what);
}

/*
 * Runs the report o asks for over dbs and writes it to out. 0 with
 * *status (EXIT_VIOLATION when --verify found one), -1 when writing
 * failed, -2 with err set when the report could not be made.
 */
static int
run_report(FILE *out, const struct opts *o, struct rdbs *dbs,
    struct out_meta *meta, int *status, char *err, size_t errlen)
{
	const struct filter *f = &o->f;
	int rc;

	*status = 0;
	say_rows_gone(o, dbs);
	if (o->whatif != NULL) {
		struct whatif w = { 0 };

		if (whatif_run(&w, meta->whatif, dbs, f, o->width_ms, o->top_n > 0 ?
		    (size_t)o->top_n : WHATIF_TOP, err, errlen) == -1) {
			whatif_free(&w);
			return -2;
		}
		rc = out_whatif(out, o->fmt, &w, meta);
		whatif_free(&w);
	} else if (o->verify && o->fmt == OUT_HTML) {
		/* The throughput charts, with the violations marked on them. */
		struct verify v = { 0 };
		struct agg a = { 0 };

		if (verify_run(&v, dbs, f, o->precision_ms, o->strict, err,
		    errlen) == -1 ||
		    agg_run(&a, dbs, f, o->width_ms, f->rule != NULL || f->key != NULL, err,
		    errlen) == -1) {
			verify_free(&v);
			agg_free(&a);
			return -2;
		}
		meta->verify = &v;
		rc = out_report(out, o->fmt, &a, meta);
		meta->verify = NULL;
		*status = v.nv > 0 ? EXIT_VIOLATION : 0;
		verify_free(&v);
		agg_free(&a);
	} else if (o->verify) {
		struct verify v = { 0 };

		if (verify_run(&v, dbs, f, o->precision_ms, o->strict, err,
		    errlen) == -1)
			return -2;
		rc = out_verify(out, o->fmt, &v, meta);
		*status = v.nv > 0 ? EXIT_VIOLATION : 0;
		verify_free(&v);
	} else if (o->top_n > 0) {
		struct top t = { 0 };

		if (top_run(&t, dbs, f, (size_t)o->top_n, err, errlen) == -1) {
			top_free(&t);
			return -2;
		}
		rc = out_top(out, o->fmt, &t, (size_t)o->top_n, meta);
		top_free(&t);
	} else {
		struct agg a = { 0 };

		if (agg_run(&a, dbs, f, o->width_ms, f->rule != NULL || f->key != NULL, err,
		    errlen) == -1) {
			agg_free(&a);
			return -2;
		}
		rc = out_report(out, o->fmt, &a, meta);
		/* The output is the same either way; where it came from is
		 * said beside it. */
		if (a.from_counts > 0)
			fprintf(stderr, "rlgate-report: from the per-second "
			    "summaries of %zu of %zu database%s (no row read "
			    "there)\n", a.from_counts, dbs->n, dbs->n == 1 ?
			    "" : "s");
		agg_free(&a);
	}
	return rc == -1 ? -1 : 0;
}

int
main(int argc, char **argv)
{
	struct opts o;
	struct rdbs dbs = { 0 };
	struct out_meta meta;
	int direct = 0, status = 0, rc;
	char err[512], tmppath[4096] = "";
	const char *outpath;
	FILE *out = stdout;

	parse_args(argc, argv, &o);
	outpath = o.outpath;
	open_dbs(&dbs, argv + o.first, (size_t)(argc - o.first), o.whatif ?
	    &(struct filter){ NULL, NULL, 0, 0 } : &o.f);
	dbs.jobs = (int)o.jobs;
	meta = (struct out_meta){ o.width_ms, &o.f, &dbs, NULL, o.unmatched,
	    NULL };
	if (o.whatif != NULL)
		meta.whatif = load_whatif(o.whatif, &dbs, &o.f);
	if (outpath != NULL)
		out = open_output(outpath, &direct, tmppath, sizeof(tmppath));

	if ((rc = run_report(out, &o, &dbs, &meta, &status, err,
	    sizeof(err))) == -2)
		goto fail_err;
	if (rc == -1 || fflush(out) == EOF || ferror(out)) {
		snprintf(err, sizeof(err), "cannot write the report%s%s: %s",
		    outpath ? " to " : "", outpath ? outpath : "", strerror(errno));
		goto fail_err;
	}
	if (outpath != NULL) {
		if (fclose(out) == EOF) {
			out = NULL;
			snprintf(err, sizeof(err), "cannot write %s: %s", outpath, strerror(errno));
			goto fail_err;
		}
		out = NULL;
		if (!direct && rename(tmppath, outpath) == -1) {
			snprintf(err, sizeof(err), "cannot write %s: %s", outpath, strerror(errno));
			goto fail_err;
		}
	}
	whatif_conf_free(meta.whatif);
	db_close_all(&dbs);
	return status;
fail_err:
	if (outpath != NULL) {
		if (out != NULL)
			fclose(out);
		if (!direct)
			unlink(tmppath);
	}
	db_close_all(&dbs);
	die("%s", err);
}
