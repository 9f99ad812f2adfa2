/*
 * conf_load.h: what the unit tests of the configuration share
 * (test_conf.c, test_tmpl.c, test_netaddr.c): a file written in a private
 * directory (the group's setup and teardown make and remove it), loaded with
 * conf_load, and assertions on the errors it reports ("FILE:LINE: [section]
 * key: ..."). Header only, included after cmocka.h and conf.h.
 */
#ifndef RLG_TEST_CONF_LOAD_H
#define RLG_TEST_CONF_LOAD_H

static char dir[] = "/tmp/test_conf.XXXXXX";
static char file[PATH_MAX];

/* A rule that loads: appended where a test needs a valid file around. */
#define RULE_OK	"[rule:r]\nlimit = 10\nwindow = 1s\n"

static inline int
group_setup(void **state)
{
	(void)state;
	if (mkdtemp(dir) == NULL)
		return -1;
	snprintf(file, sizeof(file), "%s/rlgate.ini", dir);
	return 0;
}

static inline int
group_teardown(void **state)
{
	(void)state;
	unlink(file);
	return rmdir(dir);
}

static inline const char *
write_file(const char *text, mode_t mode)
{
	FILE *f = fopen(file, "w");

	assert_non_null(f);
	assert_int_equal(fwrite(text, 1, strlen(text), f), strlen(text));
	assert_int_equal(fclose(f), 0);
	assert_int_equal(chmod(file, mode), 0);
	return file;
}

static inline struct conf *
load_ok(const char *text)
{
	char *errors = (char *)"unset";
	struct conf *c = conf_load(write_file(text, 0600), &errors);

	if (c == NULL)
		print_message("unexpected errors:\n%s", errors);
	assert_non_null(c);
	assert_null(errors);
	return c;
}

static inline char *
load_fail_mode(const char *text, mode_t mode)
{
	char *errors = NULL;
	struct conf *c = conf_load(write_file(text, mode), &errors);

	assert_null(c);
	assert_non_null(errors);
	return errors;
}

static inline char *
load_fail(const char *text)
{
	return load_fail_mode(text, 0600);
}

static inline size_t
count_lines(const char *s)
{
	size_t n = 0;

	for (; *s != '\0'; s++)
		n += *s == '\n';
	return n;
}

/*
 * Asserts that errors has a line starting with "FILE:" prefix (the line
 * number, section and key) that also contains needle.
 */
static inline void
assert_error(const char *errors, const char *prefix, const char *needle)
{
	char want[PATH_MAX + 256];
	const char *line, *end;
	size_t n;

	n = (size_t)snprintf(want, sizeof(want), "%s:%s", file, prefix);
	for (line = errors; *line != '\0'; line = end + 1) {
		end = strchr(line, '\n');
		assert_non_null(end);
		if (strncmp(line, want, n) != 0)
			continue;
		if (needle == NULL || (memmem(line, (size_t)(end - line),
		    needle, strlen(needle)) != NULL))
			return;
	}
	print_message("no \"%s\" ... \"%s\" in:\n%s", want,
	    needle ? needle : "", errors);
	fail();
}

/* The error of a file with no [rule:NAME] section, after "FILE:". */
#define NO_RULE	" no [rule:NAME] section: rlgate would limit nothing; add a " \
		"rule (dry_run = yes records without limiting)"

/*
 * The file fails with exactly one error, the one described; plus, when the
 * text has no rule section, the one that says so.
 */
static inline void
expect_one(const char *text, const char *prefix, const char *needle)
{
	char *errors = load_fail(text);
	size_t want = 1;

	if (strstr(text, "[rule:") == NULL) {
		assert_error(errors, NO_RULE, NULL);
		want++;
	}
	if (count_lines(errors) != want)
		print_message("expected %zu errors, got:\n%s", want, errors);
	assert_int_equal(count_lines(errors), want);
	assert_error(errors, prefix, needle);
	free(errors);
}

#endif
