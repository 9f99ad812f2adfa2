/*
 * whatif_read: the audit's requests in time order for the what-if replay
 * (whatif_read.h): a reader per file (by ids, its rows decoded by
 * rowscan.h's threads; or through the view), a reorder buffer per file,
 * the merge of the files, the grouping by request id. Memory: the scans'
 * chunks, the reorder buffers, the requests within RLG_WHATIF_GROUP_MS,
 * and the files' interned texts; never every row.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "intern.h"
#include "rowids.h"
#include "rowscan.h"
#include "whatif_read.h"

/* One file: its statement, its tables, its reorder buffer. */
struct wsrc {
	struct rdb	*d;
	sqlite3_stmt	*st;
	int		 by_ids;	/* rowids (x) or the view */
	struct rowids	 x;
	/* by ids: per rule id its global rule and parameters; per outcome
	 * id its allowed, reason, method */
	uint32_t	*grule, *gparams;
	size_t		 nrule;
	struct wout {
		uint8_t	 present, allowed, reason;
		uint32_t method;
	}		*out;
	size_t		 nout;
	/* by ids: the scan, and the rows of its chunk not yet taken */
	struct rowscan	*rs;
	struct filter	 f;
	const int64_t	*rows;
	size_t		 nrows, row;
	struct wrow	 cur;
	uint32_t	 idx;		/* the file's index */
	int		 fields;
	/* the view: its texts interned here */
	struct intern	 texts;
	struct db_str	 sb[8];
	/* the reorder buffer: a sorted deque of rows */
	struct wrow	*buf;
	size_t		 head, n, cap;
	int64_t		 max_ts, last_out_ts;
	int		 eof;
};

struct wreader {
	struct wsrc	*src;
	size_t		 nsrc;
	int		 fields;
	struct intern	 rules;		/* global rule names */
	struct intern	 pkeys;		/* parameter sets, as bytes */
	struct wparams	*pv;		/* by parameter set */
	size_t		 npv, pvcap;
	int64_t		 late;
	/* the open requests: a ring of rows by sequence number */
	struct wrow	*ring;
	uint64_t	 rhead, rtail;	/* sequence numbers */
	size_t		 rcap;		/* a power of two */
	/* leaders by request: open addressing, sequence + 1 (0 empty) and
	 * the request's hash, so that a probe reads no row */
	struct wslot {
		uint64_t seq, hash;
	}		*slots;
	size_t		 scap, sn;	/* a power of two; used */
	int		 merged_eof;
	/* the request handed out */
	const struct wrow **grp;
	size_t		 gcap;
};

static const char *const reason_names[] = { "limit", "redis_error", "dry_run",
	"bad_request", "local_cache", "unlimited", "other_rule", "local" };

static uint8_t
reason_code(const char *s)
{
	for (size_t i = 0; s != NULL && i < sizeof(reason_names) /
	    sizeof(reason_names[0]); i++)
		if (strcmp(s, reason_names[i]) == 0)
			return (uint8_t)i;
	return WR_OTHER;
}

static uint64_t
fnv(const char *s, uint64_t h)
{
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
	return h;
}

/* The global id of a parameter set; RLG_INTERN_FAIL out of memory. */
static uint32_t
params_id(struct wreader *r, const char *alg, int64_t limit, int64_t window,
    int64_t burst)
{
	char b[256];
	int len;
	uint32_t id;

	len = snprintf(b, sizeof(b), "%s%c%lld %lld %lld", alg ? alg : "", 0,
	    (long long)limit, (long long)window, (long long)burst);
	if (len < 0 || (size_t)len >= sizeof(b))
		len = sizeof(b) - 1;
	if ((id = intern_id(&r->pkeys, b, (size_t)len)) == RLG_INTERN_FAIL)
		return id;
	if (id == r->npv) {
		if (r->npv == r->pvcap) {
			size_t nc = r->pvcap ? r->pvcap * 2 : 16;
			struct wparams *v = realloc(r->pv, nc * sizeof(*v));

			if (v == NULL)
				return RLG_INTERN_FAIL;
			r->pv = v;
			r->pvcap = nc;
		}
		r->pv[r->npv++] = (struct wparams){ alg ? intern_bytes(&r->pkeys,
		    id) : NULL, limit, window, burst };
	}
	return id;
}

/* By ids: the rule and outcome tables of s as arrays. 0, or -1. */
static int
load_ids(struct wreader *r, struct wsrc *s, char *err, size_t errlen)
{
	struct db_str sb = { 0 };
	sqlite3_stmt *st;
	int rc;

	s->nrule = s->x.nrule;
	if ((s->grule = calloc(s->nrule + 1, sizeof(*s->grule))) == NULL ||
	    (s->gparams = calloc(s->nrule + 1, sizeof(*s->gparams))) == NULL)
		goto oom;
	for (size_t i = 0; i < s->nrule; i++) {
		const struct rowids_rule *ru = &s->x.rule[i];

		s->grule[i] = s->gparams[i] = RLG_WHATIF_NONE;
		if (!ru->present || ru->name == NULL)
			continue;
		if ((s->grule[i] = intern_id(&r->rules, ru->name,
		    strlen(ru->name))) == RLG_INTERN_FAIL ||
		    (s->gparams[i] = params_id(r, ru->algorithm, ru->has_limit ?
		    ru->limit_value : -1, ru->has_window ? ru->window_ms : -1,
		    ru->has_burst ? ru->burst : -1)) == RLG_INTERN_FAIL)
			goto oom;
	}
	if ((st = db_prepare(s->d, "SELECT id, allowed, reason, method FROM "
	    "rlg_outcomes WHERE id >= 0 AND id < 1048576", err, errlen)) == NULL)
		return -1;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		int64_t id = sqlite3_column_int64(st, 0);
		const char *m;

		if ((size_t)id >= s->nout) {
			size_t nc = (size_t)id + 1 > s->nout * 2 ? (size_t)id + 1 :
			    s->nout * 2;
			struct wout *v = realloc(s->out, nc * sizeof(*v));

			if (v == NULL) {
				sqlite3_finalize(st);
				goto oom;
			}
			memset(v + s->nout, 0, (nc - s->nout) * sizeof(*v));
			s->out = v;
			s->nout = nc;
		}
		s->out[id].present = 1;
		s->out[id].allowed = sqlite3_column_int(st, 1) != 0;
		s->out[id].reason = reason_code((const char *)
		    sqlite3_column_text(st, 2));
		m = db_column_str(st, 3, &sb);
		s->out[id].method = m == NULL ? RLG_WHATIF_NONE :
		    intern_id(&s->texts, m, strlen(m));
		if (m != NULL && s->out[id].method == RLG_INTERN_FAIL) {
			sqlite3_finalize(st);
			goto oom;
		}
	}
	sqlite3_finalize(st);
	free(sb.buf);
	if (rc != SQLITE_DONE) {
		db_read_error(s->d, err, errlen);
		return -1;
	}
	return 0;
oom:
	free(sb.buf);
	snprintf(err, errlen, "out of memory");
	return -1;
}

static uint32_t
text_col(struct intern *in, sqlite3_stmt *st, int col, struct db_str *sb,
    int *oom)
{
	const char *t = db_column_str(st, col, sb);
	uint32_t id;

	if (t == NULL)
		return RLG_WHATIF_NONE;
	if ((id = intern_id(in, t, strlen(t))) == RLG_INTERN_FAIL)
		*oom = 1;
	return id;
}

static int64_t
int_or(sqlite3_stmt *st, int col, int64_t none)
{
	return sqlite3_column_type(st, col) == SQLITE_NULL ? none :
	    sqlite3_column_int64(st, col);
}

/* A row of the view into w. 1, 0 to skip it, -1 out of memory. */
static int
row_view(struct wreader *r, struct wsrc *s, struct wrow *w)
{
	sqlite3_stmt *st = s->st;
	const char *rq = db_column_str(st, 2, &s->sb[0]);
	const char *rule = db_column_str(st, 3, &s->sb[1]);
	int oom = 0;
	uint32_t p;

	if (rule == NULL)
		return 0;
	w->id = sqlite3_column_int64(st, 0);
	w->ts_ms = sqlite3_column_int64(st, 1);
	w->lone = rq == NULL;
	w->rq = rq ? fnv(rq, 0xcbf29ce484222325ULL) : 0;
	w->rn = rq ? fnv(rq, 0x84222325cbf29ce4ULL) : 0;
	if ((w->rule = intern_id(&r->rules, rule, strlen(rule))) ==
	    RLG_INTERN_FAIL)
		return -1;
	w->key = text_col(&s->texts, st, 4, &s->sb[2], &oom);
	p = params_id(r, (const char *)sqlite3_column_text(st, 5),
	    int_or(st, 9, -1), int_or(st, 10, -1), int_or(st, 11, -1));
	if (p == RLG_INTERN_FAIL)
		return -1;
	w->params = p;
	w->allowed = sqlite3_column_int(st, 6) != 0;
	w->reason = reason_code((const char *)sqlite3_column_text(st, 7));
	w->cost = int_or(st, 8, -1);
	w->method = w->path = w->ip = RLG_WHATIF_NONE;
	if (r->fields) {
		w->method = text_col(&s->texts, st, 12, &s->sb[3], &oom);
		w->path = text_col(&s->texts, st, 13, &s->sb[4], &oom);
		w->ip = text_col(&s->texts, st, 14, &s->sb[5], &oom);
	}
	return oom ? -1 : 1;
}

/* Column i of a scanned row as the view's coalesce(col, -1) reads it. */
static int64_t
col_or(const int64_t *v, uint32_t nulls, int i)
{
	return nulls & 1u << i ? -1 : v[i];
}

static uint32_t
id_col(const int64_t *v, uint32_t nulls, int i, size_t n)
{
	int64_t id = col_or(v, nulls, i);

	return id < 0 || (uint64_t)id >= n ? RLG_WHATIF_NONE : (uint32_t)id;
}

/* The columns of rlg_rows a scan by ids reads (path, client_ip: fields). */
#define IDS_COLS	"id, ts_ms, rq, rn, rule, key, outcome, cost"
#define IDS_NCOLS	8

/* A row of rlg_rows (IDS_COLS[, path, client_ip]) into w. 1, or 0 to
 * skip it. */
static int
row_ids(const struct wsrc *s, const int64_t *v, uint32_t nulls,
    struct wrow *w)
{
	int64_t rule = v[4], o = v[6];
	/* NULL reads as UINT64_MAX; lone by the NULLs alone, for rn -1 is
	 * the id ffffffffffffffff. */
	int rq_null = (nulls & 1u << 2) != 0, rn_null = (nulls & 1u << 3) != 0;

	if (rule < 0 || (size_t)rule >= s->nrule || s->grule[rule] ==
	    RLG_WHATIF_NONE)
		return 0;
	w->id = v[0];
	w->ts_ms = v[1];
	w->rq = rq_null ? UINT64_MAX : (uint64_t)v[2];
	w->rn = rn_null ? UINT64_MAX : (uint64_t)v[3];
	w->cost = col_or(v, nulls, 7);
	w->src = s->idx;
	w->rule = s->grule[rule];
	w->params = s->gparams[rule];
	w->key = id_col(v, nulls, 5, s->x.ntext);
	w->path = w->ip = RLG_WHATIF_NONE;
	if (s->fields) {
		w->path = id_col(v, nulls, 8, s->x.ntext);
		w->ip = id_col(v, nulls, 9, s->x.ntext);
	}
	if (o >= 0 && (size_t)o < s->nout && s->out[o].present) {
		w->allowed = s->out[o].allowed;
		w->reason = s->out[o].reason;
		w->method = s->out[o].method;
	} else {
		w->allowed = 0;
		w->reason = WR_OTHER;
		w->method = RLG_WHATIF_NONE;
	}
	w->lone = rq_null && rn_null;
	w->done = 0;
	w->next = 0;
	return 1;
}

static int
open_src(struct wreader *r, struct wsrc *s, int64_t until_ms, int jobs,
    char *err, size_t errlen)
{
	int rc = 1;

	s->f = (struct filter){ NULL, NULL, INT64_MIN, until_ms };
	if (s->d->layout >= 2 && (rc = rowids_load(s->d, &s->x, err,
	    errlen)) == -1)
		return -1;
	s->by_ids = rc == 0;
	s->max_ts = s->last_out_ts = INT64_MIN;
	s->idx = (uint32_t)(s - r->src);
	s->fields = r->fields;
	if (s->by_ids) {
		if (load_ids(r, s, err, errlen) == -1)
			return -1;
		s->rs = rowscan_open(s->d, &s->x, &s->f, r->fields ? IDS_COLS
		    ", path, client_ip" : IDS_COLS, IDS_NCOLS + 2 * r->fields,
		    "1", jobs, err, errlen);
		return s->rs == NULL ? -1 : 0;
	}
	s->st = db_select(s->d, &s->f, "id, ts_ms, request_id, rule, key, "
	    "algorithm, allowed, reason, cost, limit_value, window_ms, "
	    "burst, method, path, client_ip", "rule IS NOT NULL", err, errlen);
	return s->st == NULL ? -1 : 0;
}

/* The replay's order: time, then the admitted first (within one ms the
 * record cannot say which came first; those Redis admitted did, as far as
 * one key goes), then the file's own order. */
static int
row_before(const struct wrow *a, const struct wrow *b)
{
	if (a->ts_ms != b->ts_ms)
		return a->ts_ms < b->ts_ms;
	if (a->allowed != b->allowed)
		return a->allowed > b->allowed;
	if (a->src != b->src)
		return a->src < b->src;
	return a->id < b->id;
}

#define BUF_AT(s, i)	((s)->buf[((s)->head + (i)) & ((s)->cap - 1)])

/* Inserts w into s's buffer in order. 0, or -1 out of memory. */
static int
buf_insert(struct wsrc *s, const struct wrow *w)
{
	size_t i;

	if (s->n == s->cap) {
		size_t nc = s->cap ? s->cap * 2 : 1024;
		struct wrow *v = malloc(nc * sizeof(*v));

		if (v == NULL)
			return -1;
		for (i = 0; i < s->n; i++)
			v[i] = BUF_AT(s, i);
		free(s->buf);
		s->buf = v;
		s->head = 0;
		s->cap = nc;
	}
	/* Nearly sorted already: walk back from the end. */
	for (i = s->n; i > 0 && row_before(w, &BUF_AT(s, i - 1)); i--)
		BUF_AT(s, i) = BUF_AT(s, i - 1);
	BUF_AT(s, i) = *w;
	s->n++;
	if (w->ts_ms > s->max_ts)
		s->max_ts = w->ts_ms;
	return 0;
}

/* The file's next row through the view into w. 1, 0 at the end, -1. */
static int
view_next(struct wreader *r, struct wsrc *s, struct wrow *w, char *err,
    size_t errlen)
{
	int rc, ok;

	for (;;) {
		if ((rc = sqlite3_step(s->st)) != SQLITE_ROW)
			break;
		memset(w, 0, sizeof(*w));
		w->src = (uint32_t)(s - r->src);
		if ((ok = row_view(r, s, w)) == -1) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		if (ok == 1)
			return 1;
	}
	if (rc != SQLITE_DONE) {
		db_read_error(s->d, err, errlen);
		return -1;
	}
	return 0;
}

/* The file's next row by ids: *w in s. 1, 0 at the end, -1. */
static int
ids_next(struct wsrc *s, const struct wrow **w, char *err, size_t errlen)
{
	size_t stride = (size_t)(IDS_NCOLS + 2 * s->fields + 1);
	int rc;

	for (;;) {
		while (s->row < s->nrows) {
			const int64_t *v = s->rows + s->row++ * stride;

			if (row_ids(s, v + 1, (uint32_t)v[0], &s->cur)) {
				*w = &s->cur;
				return 1;
			}
		}
		s->row = 0;
		if ((rc = rowscan_next(s->rs, &s->rows, &s->nrows, err,
		    errlen)) != 1)
			return rc;
	}
}

/* Fills s's buffer until its first row is ready. 0, or -1 with err. */
static int
src_fill(struct wreader *r, struct wsrc *s, char *err, size_t errlen)
{
	struct wrow vw;
	const struct wrow *w = &vw;
	int rc;

	while (!s->eof && (s->n == 0 || (BUF_AT(s, 0).ts_ms >
	    s->max_ts - RLG_WHATIF_REORDER_MS && s->n < RLG_WHATIF_REORDER_ROWS))) {
		rc = s->by_ids ? ids_next(s, &w, err, errlen) :
		    view_next(r, s, &vw, err, errlen);
		if (rc == -1)
			return -1;
		if (rc == 0) {
			s->eof = 1;
			break;
		}
		if (buf_insert(s, w) == -1) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
	}
	return 0;
}

/* The next row of the merged timeline: *w in its file's buffer, valid until
 * that file's buffer is filled again. 1, 0 at the end, -1. */
static int
merged_next(struct wreader *r, const struct wrow **w, char *err,
    size_t errlen)
{
	struct wsrc *best = NULL;

	for (size_t i = 0; i < r->nsrc; i++) {
		struct wsrc *s = &r->src[i];

		if (src_fill(r, s, err, errlen) == -1)
			return -1;
		if (s->n > 0 && (best == NULL || row_before(&BUF_AT(s, 0),
		    &BUF_AT(best, 0))))
			best = s;
	}
	if (best == NULL)
		return 0;
	*w = &BUF_AT(best, 0);
	best->head = (best->head + 1) & (best->cap - 1);
	best->n--;
	if ((*w)->ts_ms < best->last_out_ts)
		r->late++;
	else
		best->last_out_ts = (*w)->ts_ms;
	return 1;
}

#define RING(r, seq)	((r)->ring[(seq) & ((r)->rcap - 1)])

static uint64_t
req_hash(const struct wrow *w)
{
	uint64_t h = (w->rq * 0x9e3779b97f4a7c15ULL) ^ (w->rn + w->src);

	return (h ^ (h >> 29)) * 0xbf58476d1ce4e5b9ULL;
}

static int
same_req(const struct wrow *a, const struct wrow *b)
{
	return a->rq == b->rq && a->rn == b->rn && a->src == b->src;
}

/* The slot of w's request (hash h) in the leaders' table: empty or its
 * leader's. */
static size_t
slot_of(const struct wreader *r, const struct wrow *w, uint64_t h)
{
	size_t i = h & (r->scap - 1);

	while (r->slots[i].seq != 0 && (r->slots[i].hash != h ||
	    !same_req(&RING(r, r->slots[i].seq - 1), w)))
		i = (i + 1) & (r->scap - 1);
	return i;
}

/* Removes the leader in slot i (backward shift: no tombstones). */
static void
slot_remove(struct wreader *r, size_t i)
{
	size_t j = i, k;

	r->slots[i].seq = 0;
	r->sn--;
	for (;;) {
		j = (j + 1) & (r->scap - 1);
		if (r->slots[j].seq == 0)
			return;
		k = r->slots[j].hash & (r->scap - 1);
		/* Move j back to i unless its home lies cyclically in (i, j]. */
		if ((i <= j) ? (i < k && k <= j) : (i < k || k <= j))
			continue;
		r->slots[i] = r->slots[j];
		r->slots[j].seq = 0;
		i = j;
	}
}

static int
slots_grow(struct wreader *r)
{
	size_t oc = r->scap, nc = oc ? oc * 2 : 1024;
	struct wslot *old = r->slots;

	if ((r->slots = calloc(nc, sizeof(*r->slots))) == NULL) {
		r->slots = old;
		return -1;
	}
	r->scap = nc;
	for (size_t i = 0; i < oc; i++)
		if (old[i].seq != 0)
			r->slots[slot_of(r, &RING(r, old[i].seq - 1),
			    old[i].hash)] = old[i];
	free(old);
	return 0;
}

static int
ring_push(struct wreader *r, const struct wrow *w)
{
	if (r->rtail - r->rhead == r->rcap) {
		size_t nc = r->rcap ? r->rcap * 2 : 4096;
		struct wrow *v = malloc(nc * sizeof(*v));

		if (v == NULL)
			return -1;
		for (uint64_t q = r->rhead; q < r->rtail; q++)
			v[q & (nc - 1)] = RING(r, q);
		free(r->ring);
		r->ring = v;
		r->rcap = nc;
	}
	RING(r, r->rtail) = *w;
	r->rtail++;
	return 0;
}

/* Adds a copy of w to the open requests. 0, or -1 out of memory. */
static int
group_add(struct wreader *r, const struct wrow *w)
{
	uint64_t seq = r->rtail, h;
	struct wrow *p, *x;
	size_t i, n;

	if (ring_push(r, w) == -1)
		return -1;
	x = &RING(r, seq);
	x->next = 0;
	x->done = 0;
	if (x->lone)
		return 0;
	if ((r->sn + 1) * 2 > r->scap && slots_grow(r) == -1)
		return -1;
	h = req_hash(x);
	i = slot_of(r, x, h);
	/* Further from its leader than one request's rows are: the id's
	 * next request, x its leader in the slot. The one before is closed
	 * (out of the table), handed out as it is. */
	if (r->slots[i].seq != 0 && x->ts_ms - RING(r, r->slots[i].seq -
	    1).ts_ms > RLG_WHATIF_GROUP_MS) {
		RING(r, r->slots[i].seq - 1).lone = 1;
		r->slots[i].seq = seq + 1;
		return 0;
	}
	if (r->slots[i].seq == 0) {
		r->slots[i].seq = seq + 1;
		r->slots[i].hash = h;
		r->sn++;
		return 0;
	}
	/*
	 * A member: linked after the leader's last row. A rule applies once
	 * to a request, and at most RLG_WHATIF_GROUP_MAX rules do: a row
	 * past that (hand-made records that share one id) is a request of
	 * its own.
	 */
	n = 1;
	for (p = &RING(r, r->slots[i].seq - 1); ; p = &RING(r, p->next - 1), n++) {
		if (p->rule == x->rule || n >= RLG_WHATIF_GROUP_MAX) {
			x->lone = 1;
			return 0;
		}
		if (p->next == 0)
			break;
	}
	p->next = seq + 1;
	x->done = 2;	/* a member, handed out with its leader */
	return 0;
}

/* Hands out the request led by the first open row. 0, or -1. */
static int
group_take(struct wreader *r)
{
	struct wrow *lead = &RING(r, r->rhead);
	size_t n = 0;

	for (struct wrow *p = lead;; p = &RING(r, p->next - 1)) {
		if (n == r->gcap) {
			size_t nc = r->gcap ? r->gcap * 2 : 64;
			const struct wrow **v = realloc(r->grp, nc * sizeof(*v));

			if (v == NULL)
				return -1;
			r->grp = v;
			r->gcap = nc;
		}
		r->grp[n++] = p;
		p->done = 1;
		if (p->next == 0)
			break;
	}
	if (!lead->lone)
		slot_remove(r, slot_of(r, lead, req_hash(lead)));
	return (int)n;
}

int
whatif_read_next(struct wreader *r, const struct wrow ***rows, size_t *n,
    char *err, size_t errlen)
{
	const struct wrow *w;
	int rc;

	/*
	 * Rows handed out before are gone now; members follow their leader.
	 * A request is handed out once a row further than
	 * RLG_WHATIF_GROUP_MS from its leader came: none later joins it.
	 */
	while (r->rhead < r->rtail && RING(r, r->rhead).done == 1)
		r->rhead++;
	for (;;) {
		while (r->rhead < r->rtail && RING(r, r->rhead).done == 1)
			r->rhead++;
		if (r->rhead < r->rtail && (r->merged_eof ||
		    RING(r, r->rhead).ts_ms + RLG_WHATIF_GROUP_MS <
		    RING(r, r->rtail - 1).ts_ms))
			break;
		if (r->merged_eof)
			return 0;
		if ((rc = merged_next(r, &w, err, errlen)) == -1)
			return -1;
		if (rc == 0) {
			r->merged_eof = 1;
			continue;
		}
		if (group_add(r, w) == -1)
			goto oom;
	}
	if ((rc = group_take(r)) == -1)
		goto oom;
	*rows = r->grp;
	*n = (size_t)rc;
	return 1;
oom:
	snprintf(err, errlen, "out of memory");
	return -1;
}

struct wreader *
whatif_read_open(struct rdbs *dbs, int64_t until_ms, int fields, char *err,
    size_t errlen)
{
	struct wreader *r;
	/* The files are read at once, merged: the threads are shared out. */
	int jobs = dbs->n > 0 && (size_t)dbs->jobs > dbs->n ?
	    dbs->jobs / (int)dbs->n : 1;

	if ((r = calloc(1, sizeof(*r))) == NULL ||
	    (r->src = calloc(dbs->n + 1, sizeof(*r->src))) == NULL) {
		free(r);
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	r->fields = fields;
	for (size_t i = 0; i < dbs->n; i++) {
		r->src[i].d = &dbs->v[i];
		r->nsrc++;
		if (dbs->v[i].rows_gone)
			r->src[i].eof = 1;
		else if (open_src(r, &r->src[i], until_ms, jobs, err,
		    errlen) == -1) {
			whatif_read_free(r);
			return NULL;
		}
	}
	return r;
}

void
whatif_read_free(struct wreader *r)
{
	if (r == NULL)
		return;
	for (size_t i = 0; i < r->nsrc; i++) {
		struct wsrc *s = &r->src[i];

		sqlite3_finalize(s->st);
		rowscan_close(s->rs);
		rowids_free(&s->x);
		free(s->grule);
		free(s->gparams);
		free(s->out);
		intern_free(&s->texts);
		for (size_t k = 0; k < sizeof(s->sb) / sizeof(s->sb[0]); k++)
			free(s->sb[k].buf);
		free(s->buf);
	}
	free(r->src);
	intern_free(&r->rules);
	intern_free(&r->pkeys);
	free(r->pv);
	free(r->ring);
	free(r->slots);
	free(r->grp);
	free(r);
}

const char *
whatif_text(const struct wreader *r, uint32_t src, uint32_t id)
{
	const struct wsrc *s = &r->src[src];

	if (id == RLG_WHATIF_NONE)
		return NULL;
	if (s->by_ids && s->x.text != NULL && id < s->x.ntext)
		return rowids_text(&s->x, id);
	return id < s->texts.n ? intern_bytes(&s->texts, id) : NULL;
}

const char *
whatif_rule_name(const struct wreader *r, uint32_t id)
{
	return intern_bytes(&r->rules, id);
}

size_t
whatif_rules(const struct wreader *r)
{
	return r->rules.n;
}

const struct wparams *
whatif_params(const struct wreader *r, const struct wrow *w)
{
	return &r->pv[w->params];
}

int64_t
whatif_late(const struct wreader *r)
{
	return r->late;
}

static int
cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int
whatif_rule_names(struct rdbs *dbs, char ***names, size_t *n, char *err,
    size_t errlen)
{
	struct intern in = { 0 };
	struct db_str sb = { 0 };
	char **v = NULL;
	int rc, ret = -1;

	for (size_t i = 0; i < dbs->n; i++) {
		sqlite3_stmt *st = db_prepare(&dbs->v[i], dbs->v[i].layout >= 2 ?
		    "SELECT DISTINCT name FROM rlg_rules WHERE name IS NOT NULL" :
		    "SELECT DISTINCT rule FROM decisions WHERE rule IS NOT NULL",
		    err, errlen);

		if (st == NULL)
			goto out;
		while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
			const char *s = db_column_str(st, 0, &sb);

			if (intern_id(&in, s, strlen(s)) == RLG_INTERN_FAIL) {
				sqlite3_finalize(st);
				goto oom;
			}
		}
		sqlite3_finalize(st);
		if (rc != SQLITE_DONE) {
			db_read_error(&dbs->v[i], err, errlen);
			goto out;
		}
	}
	if ((v = calloc(in.n + 1, sizeof(*v))) == NULL)
		goto oom;
	for (size_t i = 0; i < in.n; i++)
		if ((v[i] = strdup(intern_bytes(&in, (uint32_t)i))) == NULL) {
			for (size_t k = 0; k < i; k++)
				free(v[k]);
			free(v);
			goto oom;
		}
	qsort(v, in.n, sizeof(*v), cmp_name);
	*names = v;
	*n = in.n;
	ret = 0;
	goto out;
oom:
	snprintf(err, errlen, "out of memory");
out:
	intern_free(&in);
	free(sb.buf);
	return ret;
}
