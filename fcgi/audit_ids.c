/*
 * audit_ids: the ids of the values a row repeats (a rule with its
 * parameters, an outcome, a text), found in or added to their tables of
 * the open audit file, and kept in memory so that a row costs no lookup
 * once its values were seen; and a row bound, as those ids, to an insert.
 * Writer thread only. Not the statements nor the transactions (audit_db.c),
 * nor the layout (RLG_AUDIT_SCHEMA).
 */
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "audit_int.h"
#include "fnv.h"

/*
 * The memory: IDS_SLOTS entries (open addressing, at most half used) whose
 * bytes live in one arena of IDS_ARENA bytes; both are emptied at once when
 * full. An inline handle (CGI: one request a process) keeps IDS_INLINE_SLOTS
 * and IDS_INLINE_ARENA: a process that writes one row need not clear
 * megabytes. Values longer than IDS_LONG are looked up in the file each
 * time.
 */
#define IDS_SLOTS		65536
#define IDS_ARENA		(4 << 20)
#define IDS_INLINE_SLOTS	256
#define IDS_INLINE_ARENA	(16 << 10)
#define IDS_LONG		1024

enum { K_TEXT = 1, K_RULE, K_OUTCOME };

struct ids_ent {
	uint64_t	 h;		/* 0: free */
	int64_t		 id;
	uint32_t	 off, len;
	int		 kind;
};

/*
 * The value a field of the row before had, and its id: a row that repeats
 * it (a burst of one client, one rule, one outcome) skips the hash.
 */
#define IDS_LAST_MAX		64
enum { L_RQ, L_KEY, L_PATH, L_CLIENT_IP, L_RULE, L_OUTCOME, L_FIELDS };

struct ids_last {
	size_t		 len;		/* 0: none (an empty value is hashed) */
	int64_t		 id;
	unsigned char	 b[IDS_LAST_MAX];
};

struct audit_ids {
	struct ids_last	 last[L_FIELDS];
	struct ids_ent	*tab;
	size_t		 slots;		/* a power of 2 */
	size_t		 n;
	char		*arena;
	size_t		 arena_size;
	size_t		 used;
	sqlite3_stmt	*text_get, *text_put, *rule_get, *rule_put;
	sqlite3_stmt	*out_get, *out_put;
	/* A rule's or an outcome's values, as the cache's key. */
	unsigned char	 tuple[2 * (AUDIT_TEXT_MAX + 5) + 32];
};

void
audit_ids_forget(struct audit *a)
{
	struct audit_ids *x = a->ids;

	if (x == NULL)
		return;
	memset(x->last, 0, sizeof(x->last));
	if (x->n == 0)
		return;
	memset(x->tab, 0, x->slots * sizeof(*x->tab));
	x->n = 0;
	x->used = 0;
}

void
audit_ids_close(struct audit *a)
{
	struct audit_ids *x = a->ids;

	if (x == NULL)
		return;
	sqlite3_finalize(x->text_get);
	sqlite3_finalize(x->text_put);
	sqlite3_finalize(x->rule_get);
	sqlite3_finalize(x->rule_put);
	sqlite3_finalize(x->out_get);
	sqlite3_finalize(x->out_put);
	x->text_get = x->text_put = x->rule_get = x->rule_put = NULL;
	x->out_get = x->out_put = NULL;
	/* Another file, or this one after a rollback: other ids. */
	audit_ids_forget(a);
}

void
audit_ids_free(struct audit *a)
{
	if (a->ids == NULL)
		return;
	audit_ids_close(a);
	free(a->ids->tab);
	free(a->ids->arena);
	free(a->ids);
	a->ids = NULL;
}

int
audit_ids_open(struct audit *a)
{
	struct audit_ids *x = a->ids;
	int rc = SQLITE_OK;

	if (x == NULL) {
		size_t slots = a->inline_mode ? IDS_INLINE_SLOTS : IDS_SLOTS;
		size_t arena = a->inline_mode ? IDS_INLINE_ARENA : IDS_ARENA;

		if ((x = calloc(1, sizeof(*x))) == NULL ||
		    (x->tab = calloc(slots, sizeof(*x->tab))) == NULL ||
		    (x->arena = malloc(arena)) == NULL) {
			if (x != NULL)
				free(x->tab);
			free(x);
			return SQLITE_NOMEM;
		}
		x->slots = slots;
		x->arena_size = arena;
		a->ids = x;
	}
	/* Prepared already: a migration came first on this connection. */
	if (x->text_get != NULL)
		return SQLITE_OK;
#define PREP(sql, st) \
	if (rc == SQLITE_OK) \
		rc = sqlite3_prepare_v3(a->db, sql, -1, \
		    SQLITE_PREPARE_PERSISTENT, st, NULL)
	PREP("SELECT id FROM rlg_texts WHERE h = ?1 AND s = ?2", &x->text_get);
	PREP("INSERT INTO rlg_texts (h, s) VALUES (?1, ?2)", &x->text_put);
	PREP("SELECT id FROM rlg_rules WHERE name IS ?1 AND algorithm IS ?2 "
	    "AND limit_value IS ?3 AND window_ms IS ?4 AND burst IS ?5",
	    &x->rule_get);
	PREP("INSERT INTO rlg_rules (name, algorithm, limit_value, window_ms, "
	    "burst) VALUES (?1, ?2, ?3, ?4, ?5)", &x->rule_put);
	PREP("SELECT id FROM rlg_outcomes WHERE allowed = ?1 AND reason = ?2 "
	    "AND method IS ?3 AND status IS ?4", &x->out_get);
	PREP("INSERT INTO rlg_outcomes (allowed, reason, method, status) "
	    "VALUES (?1, ?2, ?3, ?4)", &x->out_put);
#undef PREP
	return rc;
}

/* The cache's entry for kind's bytes p[0..len) hashed h: the one holding
 * them, or the free slot where they go. */
static struct ids_ent *
slot(struct audit_ids *x, int kind, uint64_t h, const void *p, size_t len)
{
	size_t i = (size_t)h & (x->slots - 1);
	struct ids_ent *e;

	for (;; i = (i + 1) & (x->slots - 1)) {
		e = &x->tab[i];
		if (e->h == 0 || (e->h == h && e->kind == kind &&
		    e->len == len && memcmp(x->arena + e->off, p, len) == 0))
			return e;
	}
}

/* Remembers id for a free slot e (kind's bytes p[0..len), hash h). */
static void
remember(struct audit_ids *x, struct ids_ent *e, int kind, uint64_t h,
    const void *p, size_t len, int64_t id)
{
	if (len > IDS_LONG)
		return;
	if (x->n + 1 > x->slots / 2 || x->used + len > x->arena_size) {
		memset(x->tab, 0, x->slots * sizeof(*x->tab));
		x->n = x->used = 0;
		e = slot(x, kind, h, p, len);
	}
	memcpy(x->arena + x->used, p, len);
	e->h = h;
	e->kind = kind;
	e->off = (uint32_t)x->used;
	e->len = (uint32_t)len;
	e->id = id;
	x->used += len;
	x->n++;
}

/*
 * The cache's hash of kind's bytes p[0..len): never 0 (a free slot). Eight
 * bytes a multiply, not FNV's one: every value of every row is hashed, and
 * the file's own hash (rlg_texts.h, FNV-1a) is only needed on a miss.
 */
static uint64_t
cache_hash(int kind, const void *p, size_t len)
{
	const unsigned char *b = p;
	uint64_t h = 0x9e3779b97f4a7c15ULL * (uint64_t)(kind + len), w;

	for (; len >= 8; b += 8, len -= 8) {
		memcpy(&w, b, 8);
		h = (h ^ w) * 0xff51afd7ed558ccdULL;
		h ^= h >> 32;
	}
	if (len > 0) {
		for (w = 0; len > 0; len--)
			w = w << 8 | b[len - 1];
		h = (h ^ w) * 0xff51afd7ed558ccdULL;
	}
	h ^= h >> 29;
	h *= 0xc4ceb9fe1a85ec53ULL;
	h ^= h >> 32;
	return h != 0 ? h : 1;
}

/*
 * Steps get (bound); when it gives no row, resets it and steps put (bound
 * by the caller the same way) for a new id. *id; returns SQLite's code.
 */
static int
get_or_put(sqlite3 *db, sqlite3_stmt *get, sqlite3_stmt *put, int64_t *id)
{
	int rc;

	rc = sqlite3_step(get);
	if (rc == SQLITE_ROW) {
		*id = sqlite3_column_int64(get, 0);
		sqlite3_reset(get);
		return SQLITE_OK;
	}
	sqlite3_reset(get);
	if (rc != SQLITE_DONE)
		return rc;
	rc = sqlite3_step(put);
	sqlite3_reset(put);
	if (rc != SQLITE_DONE)
		return rc;
	*id = sqlite3_last_insert_rowid(db);
	return SQLITE_OK;
}

/* Whether l holds p[0..len): then its id in *id. */
static int
last_is(const struct ids_last *l, const void *p, size_t len, int64_t *id)
{
	if (l->len != len || len == 0 || memcmp(l->b, p, len) != 0)
		return 0;
	*id = l->id;
	return 1;
}

static void
last_set(struct ids_last *l, const void *p, size_t len, int64_t id)
{
	if (len > IDS_LAST_MAX) {
		l->len = 0;
		return;
	}
	memcpy(l->b, p, len);
	l->len = len;
	l->id = id;
}

/* The id of text s[0..len) in rlg_texts; field: which of the row's. */
static int
text_id(struct audit *a, int field, const char *s, int len, int64_t *id)
{
	struct audit_ids *x = a->ids;
	struct ids_last *l = &x->last[field];
	uint64_t ch, h;
	struct ids_ent *e;
	int rc;

	if (last_is(l, s, (size_t)len, id))
		return SQLITE_OK;
	ch = cache_hash(K_TEXT, s, (size_t)len);
	e = slot(x, K_TEXT, ch, s, (size_t)len);
	if (e->h != 0) {
		*id = e->id;
		last_set(l, s, (size_t)len, *id);
		return SQLITE_OK;
	}
	h = fnv_add(FNV_OFFSET, s, (size_t)len);
	sqlite3_bind_int64(x->text_get, 1, (int64_t)h);
	sqlite3_bind_text(x->text_get, 2, s, len, SQLITE_STATIC);
	sqlite3_bind_int64(x->text_put, 1, (int64_t)h);
	sqlite3_bind_text(x->text_put, 2, s, len, SQLITE_STATIC);
	if ((rc = get_or_put(a->db, x->text_get, x->text_put, id)) !=
	    SQLITE_OK)
		return rc;
	remember(x, e, K_TEXT, ch, s, (size_t)len, *id);
	last_set(l, s, (size_t)len, *id);
	return SQLITE_OK;
}

/* Appends a nullable text, then returns the new end. */
static unsigned char *
put_text(unsigned char *p, const char *s, int len)
{
	*p++ = s != NULL;
	if (s == NULL)
		return p;
	memcpy(p, &len, sizeof(len));
	p += sizeof(len);
	memcpy(p, s, (size_t)len);
	return p + len;
}

/* Appends a nullable integer (below 0: NULL, as audit_db.c stores it). */
static unsigned char *
put_int(unsigned char *p, int64_t v)
{
	if (v < 0)
		v = -1;
	memcpy(p, &v, sizeof(v));
	return p + sizeof(v);
}

static void
bind_opt_text(sqlite3_stmt *st, int col, const char *s, int len)
{
	if (s == NULL)
		sqlite3_bind_null(st, col);
	else
		sqlite3_bind_text(st, col, s, len, SQLITE_STATIC);
}

static void
bind_opt_int(sqlite3_stmt *st, int col, int64_t v)
{
	if (v < 0)
		sqlite3_bind_null(st, col);
	else
		sqlite3_bind_int64(st, col, v);
}

/* A tuple's id: from the cache, or get/put bound by bind(). */
static int
tuple_id(struct audit *a, int kind, size_t len, const struct qrow *q,
    void (*bind)(sqlite3_stmt *, const struct qrow *), sqlite3_stmt *get,
    sqlite3_stmt *put, int64_t *id)
{
	struct audit_ids *x = a->ids;
	struct ids_last *l = &x->last[kind == K_RULE ? L_RULE : L_OUTCOME];
	uint64_t ch;
	struct ids_ent *e;
	int rc;

	if (last_is(l, x->tuple, len, id))
		return SQLITE_OK;
	ch = cache_hash(kind, x->tuple, len);
	e = slot(x, kind, ch, x->tuple, len);
	if (e->h != 0) {
		*id = e->id;
		last_set(l, x->tuple, len, *id);
		return SQLITE_OK;
	}
	bind(get, q);
	bind(put, q);
	if ((rc = get_or_put(a->db, get, put, id)) != SQLITE_OK)
		return rc;
	remember(x, e, kind, ch, x->tuple, len, *id);
	last_set(l, x->tuple, len, *id);
	return SQLITE_OK;
}

static void
bind_rule(sqlite3_stmt *st, const struct qrow *q)
{
	bind_opt_text(st, 1, q->r.rule, q->len[T_RULE]);
	bind_opt_text(st, 2, q->r.algorithm, q->len[T_ALGORITHM]);
	bind_opt_int(st, 3, q->r.limit_value);
	bind_opt_int(st, 4, q->r.window_ms);
	bind_opt_int(st, 5, q->r.burst);
}

static void
bind_outcome(sqlite3_stmt *st, const struct qrow *q)
{
	sqlite3_bind_int(st, 1, q->r.allowed);
	sqlite3_bind_text(st, 2, q->r.reason, q->len[T_REASON], SQLITE_STATIC);
	bind_opt_text(st, 3, q->r.method, q->len[T_METHOD]);
	bind_opt_int(st, 4, q->r.status);
}

/*
 * The request id s[0..len) as the layout stores it (RLG_AUDIT_SCHEMA):
 * "P-N" with N lower-case hex as rlgate writes it (no leading 0, at most
 * 15 digits) is the text "P-" and N; 16 lower-case hex digits are a number
 * alone; anything else is its text. Sets *pre_len (0: no text) and *n;
 * returns whether there is a number (any int64_t is one).
 */
static int
split_request_id(const char *s, int len, int *pre_len, int64_t *n)
{
	const char *dash = memrchr(s, '-', (size_t)len);
	int i, from = dash != NULL ? (int)(dash - s) + 1 : 0;
	int digits = len - from;
	uint64_t v = 0;

	*pre_len = len;
	*n = 0;
	if (dash == NULL ? digits != 16 : digits < 1 || digits > 15 ||
	    (digits > 1 && s[from] == '0'))
		return 0;
	for (i = from; i < len; i++) {
		if (s[i] >= '0' && s[i] <= '9')
			v = v << 4 | (uint64_t)(s[i] - '0');
		else if (s[i] >= 'a' && s[i] <= 'f')
			v = v << 4 | (uint64_t)(s[i] - 'a' + 10);
		else
			return 0;
	}
	*pre_len = from;
	*n = (int64_t)v;
	return 1;
}

int
audit_ids_row(struct audit *a, const struct qrow *q, struct audit_row_ids *o)
{
	const struct audit_row *r = &q->r;
	struct audit_ids *x = a->ids;
	unsigned char *p;
	int rc = SQLITE_OK, pre;

	o->rq = o->key = o->path = o->client_ip = AUDIT_IDS_NULL;
	o->has_rn = split_request_id(r->request_id, q->len[T_REQUEST_ID],
	    &pre, &o->rn);
	if (pre > 0)
		rc = text_id(a, L_RQ, r->request_id, pre, &o->rq);
	if (rc == SQLITE_OK && r->key != NULL)
		rc = text_id(a, L_KEY, r->key, q->len[T_KEY], &o->key);
	if (rc == SQLITE_OK && r->path != NULL)
		rc = text_id(a, L_PATH, r->path, q->len[T_PATH], &o->path);
	if (rc == SQLITE_OK && r->client_ip != NULL)
		rc = text_id(a, L_CLIENT_IP, r->client_ip,
		    q->len[T_CLIENT_IP], &o->client_ip);
	if (rc != SQLITE_OK)
		return rc;

	p = put_text(x->tuple, r->rule, q->len[T_RULE]);
	p = put_text(p, r->algorithm, q->len[T_ALGORITHM]);
	p = put_int(p, r->limit_value);
	p = put_int(p, r->window_ms);
	p = put_int(p, r->burst);
	if ((rc = tuple_id(a, K_RULE, (size_t)(p - x->tuple), q, bind_rule,
	    x->rule_get, x->rule_put, &o->rule)) != SQLITE_OK)
		return rc;

	p = put_int(x->tuple, r->allowed);
	p = put_text(p, r->reason, q->len[T_REASON]);
	p = put_text(p, r->method, q->len[T_METHOD]);
	p = put_int(p, r->status);
	return tuple_id(a, K_OUTCOME, (size_t)(p - x->tuple), q, bind_outcome,
	    x->out_get, x->out_put, &o->outcome);
}

static int
bind_id(sqlite3_stmt *st, int col, int64_t v)
{
	if (v == AUDIT_IDS_NULL)
		return sqlite3_bind_null(st, col);
	return sqlite3_bind_int64(st, col, v);
}

static int
bind_opt(sqlite3_stmt *st, int col, int64_t v)
{
	if (v < 0)
		return sqlite3_bind_null(st, col);
	return sqlite3_bind_int64(st, col, v);
}

int
audit_ids_bind_row(struct audit *a, sqlite3_stmt *st, int p,
    const struct qrow *q)
{
	const struct audit_row *r = &q->r;
	struct audit_row_ids id;
	int rc;

	if ((rc = audit_ids_row(a, q, &id)) != SQLITE_OK ||
	    (rc = audit_counts_add(a, q, id.rule, id.key)) != SQLITE_OK)
		return rc;
	/* Every parameter is bound for every row. */
	rc |= sqlite3_bind_int64(st, p + 1, r->ts_ms);
	rc |= bind_id(st, p + 2, id.rq);
	rc |= id.has_rn ? sqlite3_bind_int64(st, p + 3, id.rn) :
	    sqlite3_bind_null(st, p + 3);
	rc |= sqlite3_bind_int64(st, p + 4, id.rule);
	rc |= bind_id(st, p + 5, id.key);
	rc |= sqlite3_bind_int64(st, p + 6, id.outcome);
	rc |= bind_opt(st, p + 7, r->cost);
	rc |= bind_opt(st, p + 8, r->remaining);
	rc |= bind_opt(st, p + 9, r->retry_after_ms);
	rc |= bind_opt(st, p + 10, r->delay_ms);
	rc |= bind_id(st, p + 11, id.path);
	rc |= bind_id(st, p + 12, id.client_ip);
	rc |= bind_opt(st, p + 13, r->latency_us);
	return rc;
}
