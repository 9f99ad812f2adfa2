/*
 * escape: the strings a client sent, written safely in each format (see
 * escape.h). Bytes only: it knows no report, no series and no database.
 */
#include <stdio.h>
#include <string.h>

#include "escape.h"

/*
 * The length of the character at p: 1 to 4 for valid UTF-8 (no overlong
 * form, no surrogate, at most U+10FFFF), 0 for a byte that does not start
 * one (C0 80, db.h's NUL, included). p is NUL-terminated.
 */
static size_t
utf8_len(const unsigned char *p)
{
	size_t n;
	unsigned lo = 0x80, hi = 0xbf;

	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		n = 2;
	else if (p[0] >= 0xe0 && p[0] <= 0xef) {
		n = 3;
		if (p[0] == 0xe0)
			lo = 0xa0;
		else if (p[0] == 0xed)
			hi = 0x9f;
	} else if (p[0] >= 0xf0 && p[0] <= 0xf4) {
		n = 4;
		if (p[0] == 0xf0)
			lo = 0x90;
		else if (p[0] == 0xf4)
			hi = 0x8f;
	} else
		return 0;
	if (p[1] < lo || p[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if (p[i] < 0x80 || p[i] > 0xbf)
			return 0;
	return n;
}

static int
is_nul(const unsigned char *p)
{
	return p[0] == 0xc0 && p[1] == 0x80;
}

#define REPLACEMENT	"\xef\xbf\xbd"	/* U+FFFD in UTF-8 */

/*
 * JSON escapes control characters as \u00XX and invalid bytes as \ufffd;
 * CSV quotes per RFC 4180 and keeps control characters inside the field;
 * HTML escapes & < > " ' as entities and writes control characters other
 * than tab, CR and LF as U+FFFD; text writes every control character (C0,
 * DEL, C1) as U+FFFD, so that no key can drive a terminal.
 */
void
escape_json(FILE *fp, const char *s)
{
	if (s == NULL) {
		fputs("null", fp);
		return;
	}
	fputc('"', fp);
	for (const unsigned char *p = (const unsigned char *)s; *p; ) {
		size_t n = utf8_len(p);

		switch (*p) {
		case '"':  fputs("\\\"", fp); break;
		case '\\': fputs("\\\\", fp); break;
		case '\n': fputs("\\n", fp); break;
		case '\r': fputs("\\r", fp); break;
		case '\t': fputs("\\t", fp); break;
		default:
			if (is_nul(p)) {
				fputs("\\u0000", fp);
				n = 2;
			} else if (n == 0) {
				fputs("\\ufffd", fp);
				n = 1;
			} else if (*p < 0x20 || *p == 0x7f)
				fprintf(fp, "\\u%04x", *p);
			else
				fwrite(p, 1, n, fp);
		}
		p += n;
	}
	fputc('"', fp);
}

enum { CLEAN_KEEP_CTL = 1, CLEAN_CSV = 2 };

/*
 * The bytes to write for the character at p, into out (at most 6), and how
 * many bytes of p it takes (*adv): each byte that is not valid UTF-8, and
 * db.h's NUL, as U+FFFD; control characters (C0, DEL, C1) as U+FFFD unless
 * CLEAN_KEEP_CTL; '"' doubled with CLEAN_CSV.
 */
static size_t
clean_char(const unsigned char *p, int flags, char *out, size_t *adv)
{
	size_t n = utf8_len(p);

	if (is_nul(p) || n == 0) {
		*adv = is_nul(p) ? 2 : 1;
		memcpy(out, REPLACEMENT, 3);
		return 3;
	}
	*adv = n;
	if (!(flags & CLEAN_KEEP_CTL) && (*p < 0x20 || *p == 0x7f ||
	    (p[0] == 0xc2 && p[1] < 0xa0))) {
		memcpy(out, REPLACEMENT, 3);
		return 3;
	}
	if ((flags & CLEAN_CSV) && *p == '"') {
		memcpy(out, "\"\"", 2);
		return 2;
	}
	memcpy(out, p, n);
	return n;
}

static void
put_clean(FILE *fp, const char *s, int flags)
{
	const unsigned char *p = (const unsigned char *)s;
	char c[8];

	while (*p) {
		size_t adv, n = clean_char(p, flags, c, &adv);

		fwrite(c, 1, n, fp);
		p += adv;
	}
}

void
escape_csv(FILE *fp, const char *s)
{
	int quote;

	if (s == NULL)
		return;
	quote = strpbrk(s, ",\"\r\n") != NULL;
	if (quote)
		fputc('"', fp);
	put_clean(fp, s, CLEAN_KEEP_CTL | (quote ? CLEAN_CSV : 0));
	if (quote)
		fputc('"', fp);
}

void
escape_html(FILE *fp, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	char c[8];

	while (p != NULL && *p) {
		size_t adv, n;

		switch (*p) {
		case '&': fputs("&amp;", fp); p++; continue;
		case '<': fputs("&lt;", fp); p++; continue;
		case '>': fputs("&gt;", fp); p++; continue;
		case '"': fputs("&quot;", fp); p++; continue;
		case '\'': fputs("&#39;", fp); p++; continue;
		case '\t': case '\n': case '\r': fputc(*p++, fp); continue;
		}
		n = clean_char(p, 0, c, &adv);
		fwrite(c, 1, n, fp);
		p += adv;
	}
}

void
escape_text(FILE *fp, const char *s)
{
	if (s != NULL)
		put_clean(fp, s, 0);
}

const char *
escape_text_buf(const char *s, char *buf, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t o = 0;
	char c[8];

	if (len == 0)
		return "";
	while (p != NULL && *p) {
		size_t adv, n = clean_char(p, 0, c, &adv);

		if (o + n >= len)
			break;		/* cut between characters, never inside one */
		memcpy(buf + o, c, n);
		o += n;
		p += adv;
	}
	buf[o] = '\0';
	return buf;
}
