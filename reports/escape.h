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
 * bytes a client sent: s may be NULL (JSON null, CSV and HTML empty);
 * invalid UTF-8 and NUL (db.h's C0 80) are written as U+FFFD (JSON:
 * \u0000 for NUL); no control character reaches a terminal. Thread safe.
 */
void	escape_json(FILE *fp, const char *s);
void	escape_csv(FILE *fp, const char *s);
void	escape_html(FILE *fp, const char *s);
void	escape_text(FILE *fp, const char *s);

/* s cleaned as escape_text() writes it, into buf (cut between characters). */
const char *escape_text_buf(const char *s, char *buf, size_t len);

#endif
