/*
 * lua_model.c: the model lua_model.h declares: what each algorithm should
 * answer, step by step. No Redis, no checks.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lua_model.h"

void
model_init(struct model *m, enum alg a, const struct params *p)
{
	memset(m, 0, sizeof(*m));
	m->alg = a;
	m->L = p->limit;
	m->W = p->window_ms;
	m->Wu = p->window_ms * 1000;
	m->B = p->burst == EMPTY ? p->limit : p->burst;
	m->P = p->precision_ms == EMPTY ? p->window_ms / 10 : p->precision_ms;
	m->Pu = m->P * 1000;
	m->n = m->P ? m->W / m->P : 0;
}

void
model_free(struct model *m)
{
	free(m->ev);
	m->ev = NULL;
}

static void
model_push(struct model *m, long long t, long long cost)
{
	if (m->nev == m->cap) {
		m->cap = m->cap ? 2 * m->cap : 64;
		if ((m->ev = realloc(m->ev, m->cap * sizeof(*m->ev))) == NULL) {
			fprintf(stderr, "lua_check: out of memory\n");
			exit(1);
		}
	}
	m->ev[m->nev].t = t;
	m->ev[m->nev].cost = cost;
	m->nev++;
}

/* Drops events before keep_from (they can no longer matter). */
static void
model_prune(struct model *m, long long keep_from)
{
	size_t i = 0;

	while (i < m->nev && m->ev[i].t < keep_from)
		i++;
	if (i > 0 && i > m->nev / 2) {
		memmove(m->ev, m->ev + i, (m->nev - i) * sizeof(*m->ev));
		m->nev -= i;
	}
}

/* Expected reply for a request of cost at now; updates the state on admission. */
void
model_decide(struct model *m, long long now, long long cost, long long *v)
{
	const i128 L = m->L, Wu = m->Wu, B = m->B;
	i128 nowL = (i128)now * L;
	size_t i;

	memset(v, 0, NFIELDS * sizeof(*v));
	v[LIMIT] = m->L;
	v[NOW] = now;
	switch (m->alg) {
	case FIXED:
		if (!m->has || now >= m->start + m->Wu) {
			m->has = 1;
			m->start = now;
			m->count = 0;
		}
		v[RESET] = ceil_div(m->start + m->Wu - now, 1000);
		if (m->count + cost <= m->L) {
			m->count += cost;
			v[ALLOWED] = 1;
		} else
			v[RETRY] = v[RESET];
		v[REMAINING] = m->L - m->count;
		break;
	case TOKEN:
		if (!m->has) {
			m->has = 1;
			m->tokens = B * Wu;
			m->ts = now;
		}
		if (now > m->ts) {
			m->tokens += (i128)(now - m->ts) * L;
			if (m->tokens > B * Wu)
				m->tokens = B * Wu;
			m->ts = now;
		}
		if (m->tokens >= (i128)cost * Wu) {
			m->tokens -= (i128)cost * Wu;
			v[ALLOWED] = 1;
		} else
			v[RETRY] = ceil_div((i128)cost * Wu - m->tokens, L * 1000);
		v[REMAINING] = floor_div(m->tokens, Wu);
		v[RESET] = ceil_div(B * Wu - m->tokens, L * 1000);
		break;
	case GCRA: {
		i128 at, next;

		if (!m->has) {
			m->has = 1;
			m->tat = nowL;
		}
		at = m->tat > nowL ? m->tat : nowL;
		next = at + (i128)cost * Wu;
		if (next - nowL <= B * Wu) {
			m->tat = at = next;
			v[ALLOWED] = 1;
		} else
			v[RETRY] = ceil_div(next - nowL - B * Wu, L * 1000);
		v[REMAINING] = floor_div(B * Wu - (at - nowL), Wu);
		v[RESET] = ceil_div(at - nowL, L * 1000);
		break;
	}
	case LEAKY: {
		i128 wait;

		if (!m->has) {
			m->has = 1;
			m->tat = nowL;
		}
		wait = m->tat > nowL ? m->tat - nowL : 0;
		if (wait <= B * Wu) {
			m->tat = nowL + wait + (i128)cost * Wu;
			v[ALLOWED] = 1;
			v[DELAY] = ceil_div(wait, L * 1000);
			v[RESET] = ceil_div(m->tat - nowL, L * 1000);
			v[REMAINING] = floor_div(B * Wu - (m->tat - nowL), Wu) + 1;
			if (v[REMAINING] < 0)
				v[REMAINING] = 0;
		} else {
			v[RETRY] = ceil_div(wait - B * Wu, L * 1000);
			v[RESET] = ceil_div(wait, L * 1000);
		}
		break;
	}
	case SLOG: {
		long long used = 0, newest = 0, need, freed = 0;

		for (i = 0; i < m->nev; i++)
			if (m->ev[i].t > now - m->Wu) {
				used += m->ev[i].cost;
				newest = m->ev[i].t;
			}
		if (used + cost <= m->L) {
			model_push(m, now, cost);
			model_prune(m, now - m->Wu);
			v[ALLOWED] = 1;
			v[REMAINING] = m->L - used - cost;
			v[RESET] = m->W;
			break;
		}
		need = used + cost - m->L;
		for (i = 0; i < m->nev; i++) {
			if (m->ev[i].t <= now - m->Wu)
				continue;
			freed += m->ev[i].cost;
			if (freed >= need) {
				v[RETRY] = ceil_div(m->ev[i].t + m->Wu - now, 1000);
				break;
			}
		}
		v[REMAINING] = m->L - used;
		v[RESET] = ceil_div(newest + m->Wu - now, 1000);
		break;
	}
	case SWINDOW: {
		long long cur = floor_div(now, m->Pu), first = cur - m->n + 1;
		long long used = 0, newest = 0, need, freed = 0;

		for (i = 0; i < m->nev; i++)
			if (floor_div(m->ev[i].t, m->Pu) >= first) {
				used += m->ev[i].cost;
				newest = floor_div(m->ev[i].t, m->Pu);
			}
		if (used + cost <= m->L) {
			model_push(m, now, cost);
			model_prune(m, first * m->Pu);
			v[ALLOWED] = 1;
			v[REMAINING] = m->L - used - cost;
			v[RESET] = ceil_div((i128)(cur + m->n) * m->Pu - now, 1000);
			break;
		}
		need = used + cost - m->L;
		for (i = 0; i < m->nev; i++) {
			long long j = floor_div(m->ev[i].t, m->Pu);

			if (j < first)
				continue;
			freed += m->ev[i].cost;
			/* A block drops out as a whole: take all of it. */
			if (freed >= need && (i + 1 == m->nev ||
			    floor_div(m->ev[i + 1].t, m->Pu) != j)) {
				v[RETRY] = ceil_div((i128)(j + m->n) * m->Pu - now, 1000);
				break;
			}
		}
		v[REMAINING] = m->L - used;
		v[RESET] = ceil_div((i128)(newest + m->n) * m->Pu - now, 1000);
		break;
	}
	default:
		break;
	}
}
