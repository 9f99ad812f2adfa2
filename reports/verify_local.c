/*
 * verify_local: the names under which verify.c replays the rows that
 * on_error = local decided, one timeline per (rule, key, process): see
 * verify_local.h. The replay itself is verify.c's, unchanged.
 */
#include <stdio.h>

#include "verify_local.h"

int
verify_local_names(const char *rule, const char *key, const char *proc,
    char *rbuf, size_t rlen, char *kbuf, size_t klen)
{
	snprintf(rbuf, rlen, "%s (local)", rule);
	snprintf(kbuf, klen, "%s (process %s)", key != NULL ? key : "", proc);
	return 0;
}
