/*
 * ascii: the character classes the configuration's parsers use. ASCII
 * only and independent of the locale (ctype.h's follow LC_CTYPE, and a
 * configuration must mean the same under every locale). Not for text
 * that is not configuration: requests are taken as bytes.
 */
#ifndef RLG_ASCII_H
#define RLG_ASCII_H

#include <string.h>

static inline int
ascii_is_digit(int ch)
{
	return ch >= '0' && ch <= '9';
}

static inline int
ascii_is_alnum(int ch)
{
	return ascii_is_digit(ch) || (ch >= 'a' && ch <= 'z') ||
	    (ch >= 'A' && ch <= 'Z');
}

/* The blanks of a configuration line: space and tab. */
static inline int
ascii_is_blank(int ch)
{
	return ch == ' ' || ch == '\t';
}

/* RFC 9110 token characters: method and header names. */
static inline int
ascii_is_tchar(int ch)
{
	return ascii_is_alnum(ch) ||
	    (ch != '\0' && strchr("!#$%&'*+-.^_`|~", ch) != NULL);
}

#endif
