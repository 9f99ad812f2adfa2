/*
 * escape: what a client sent (keys, rules, parameters read from the audit
 * database), written so that every output is valid whatever the bytes:
 * the JSON, CSV, HTML and terminal forms of a string. Below every format
 * (output.c, html.c, label.c); calls nothing of theirs.
 */
#ifndef RLG_REPORT_ESCAPE_H
#define RLG_REPORT_ESCAPE_H

#include <stddef.h>
#include <stdio.h>

/*
 * The escapers the formats share, so that every output is valid whatever
 * bytes a client sent: s may be NULL (JSON null, CSV and HTML empty). Each
 * byte that is not part of valid UTF-8 is written as U+FFFD (JSON:
 * \ufffd), and so is a NUL (db.h), which JSON writes as \u0000. JSON
 * escapes control characters as \u00XX; CSV quotes per RFC 4180 and keeps
 * control characters inside the field; HTML escapes & < > " ' as entities
 * and writes control characters other than tab, CR and LF as U+FFFD; text
 * writes every control character (C0, DEL, C1) as U+FFFD, so that no key
 * can drive a terminal.
 */
void	escape_json(FILE *fp, const char *s);
void	escape_csv(FILE *fp, const char *s);
void	escape_html(FILE *fp, const char *s);
void	escape_text(FILE *fp, const char *s);

/* s cleaned as escape_text() writes it, into buf (cut between characters). */
const char *escape_text_buf(const char *s, char *buf, size_t len);

#endif
