/*
 * fuzz_conf: libFuzzer target for the configuration loader. Each input is
 * a whole rlgate.ini, handed to conf_load() through a memfd (a real file
 * descriptor, no disk). Whatever the bytes, conf_load must return either a
 * configuration or an error text, never both, never neither, and never
 * crash, leak or read out of bounds (ASan, UBSan, LeakSanitizer). An
 * accepted configuration must keep the promises conf.h makes.
 *
 * Build and run: make fuzz (tests/fuzz/corpus/conf/ is the seed corpus).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "conf.h"

static int	 memfd = -1;
static char	 path[64];

static void
die(const char *what)
{
	perror(what);
	abort();
}

/*
 * Every error line is "FILE:LINE: ..." ("FILE: too many errors" may end
 * it), and the text ends in a newline.
 */
static void
check_errors(const char *errors)
{
	const char *line = errors, *nl;
	size_t plen = strlen(path);

	if (*errors == '\0')
		die("conf_load failed with an empty error text");
	while (*line != '\0') {
		if ((nl = strchr(line, '\n')) == NULL)
			die("error text does not end in a newline");
		if (strncmp(line, path, plen) != 0 || line[plen] != ':' ||
		    ((line[plen + 1] < '0' || line[plen + 1] > '9') &&
		    line[plen + 1] != ' '))
			die("error line does not start with FILE:LINE:");
		line = nl + 1;
	}
}

static void
check_conf(const struct conf *c)
{
	size_t i;

	/* 0: not set, one loop per CPU. */
	if (c->workers < 0 || c->workers > 1024)
		die("workers out of range");
	if (c->redis_address == NULL || c->key_prefix == NULL)
		die("no redis address or key prefix");
	if (c->on_error != RLG_ON_ERROR_ALLOW && c->on_error != RLG_ON_ERROR_DENY)
		die("[redis] on_error is neither allow nor deny");
	if (c->nrules > RLG_MAX_RULES)
		die("too many rules");
	for (i = 0; i < c->nrules; i++) {
		const struct rule *ru = &c->rules[i];

		if (ru->name == NULL || ru->limit < 1 || ru->window_ms < 1)
			die("rule without name, limit or window");
		if ((unsigned)ru->algorithm >= RLG_ALGORITHM_COUNT)
			die("rule with an unknown algorithm");
		if (ru->key.nparts == 0)
			die("rule without a key template");
		if (ru->cost_tmpl.nparts == 0 &&
		    (ru->cost < 1 || ru->cost > (ru->burst > 0 ? ru->burst :
		    ru->limit)))
			die("cost outside 1 .. capacity");
		if (ru->algorithm == RLG_SLIDING_WINDOW &&
		    (ru->precision_ms < 1 || ru->window_ms % ru->precision_ms))
			die("sliding_window precision does not divide window");
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct conf *c;
	char *errors = NULL;

	if (size > 64 * 1024)
		return -1;	/* not a configuration; keeps runs fast */
	if (memfd == -1) {
		if ((memfd = memfd_create("rlgate.ini", 0)) == -1)
			die("memfd_create");
		/* A password in a world-readable file is refused: 0600. */
		if (fchmod(memfd, 0600) == -1)
			die("fchmod");
		snprintf(path, sizeof(path), "/proc/self/fd/%d", memfd);
	}
	if (ftruncate(memfd, 0) == -1 ||
	    pwrite(memfd, data, size, 0) != (ssize_t)size)
		die("writing the memfd");

	c = conf_load(path, &errors);
	if (c != NULL && errors != NULL)
		die("conf_load returned a conf and errors");
	if (c == NULL && errors == NULL)
		die("conf_load returned neither a conf nor errors");
	if (c != NULL)
		check_conf(c);
	else
		check_errors(errors);
	conf_free(c);
	free(errors);
	return 0;
}
