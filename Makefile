# rlgate: a rate-limiting FastCGI gateway. Plain GNU make; pkg-config for
# every library. `make test` installs what it needs (as root) and runs the
# unit tests, then the integration tests against real servers.

PREFIX	?= /usr/local
SBINDIR	?= $(PREFIX)/sbin
BINDIR	?= $(PREFIX)/bin
MANDIR	?= $(PREFIX)/share/man
SYSCONFDIR ?= /etc
LIBEXECDIR ?= $(PREFIX)/lib/rlgate
SYSTEMDUNITDIR ?= $(PREFIX)/lib/systemd/system
UNITS	 = conf/rlgate.service conf/rlgate.socket conf/rlgate-tcp.socket

# The version has one source, the newest entry of debian/changelog (the
# package's); fcgi/version.h carries it to the programs.
VERSION	:= $(shell sed -n '1s/^rlgate (\([^-)]*\).*/\1/p' debian/changelog)

CC	?= cc
CFLAGS	?= -O2 -g
WARN	 = -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
	   -Wpointer-arith -Wwrite-strings -Wformat=2 -Werror
PKGS	 = hiredis inih sqlite3 openssl
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
# libfcgi: only tests/tools/allow_fcgi (the bench's floor) uses it; the
# gateway speaks FastCGI itself (fcgi/wire.c).
FCGI_CFLAGS := $(shell pkg-config --cflags fcgi 2>/dev/null)
FCGI_LIBS   := $(shell pkg-config --libs fcgi 2>/dev/null)
CPPFLAGS += -D_GNU_SOURCE -Ifcgi $(PKG_CFLAGS)
LDLIBS	 += $(PKG_LIBS) -lpthread -lm

ifeq ($(SANITIZE),1)
CFLAGS	+= -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDFLAGS	+= -fsanitize=address,undefined
endif

# The configuration, top down: reading the INI file (conf), the checks
# between keys (conf_finish), the table of typed keys and their setters
# (conf_keys), the messages all three collect (conf_errors); below them the
# parsers that are their own subject: key/cost templates, addresses and
# CIDRs, the path-regex size check; and at the bottom the values checked on
# their own (conf_values: the bounded number parser, durations, the
# algorithms' names and parameters), which netaddr uses too.
CONF_SRCS = fcgi/conf.c fcgi/conf_finish.c fcgi/conf_keys.c fcgi/conf_errors.c \
	    fcgi/tmpl.c fcgi/netaddr.c fcgi/recheck.c fcgi/conf_values.c
# The audit: the handle and its queue (audit), the writer thread with its
# retries (audit_writer) over the SQLite connection, schema use and
# statements (audit_db), the ids of the values rows repeat (audit_ids),
# the per-second summaries written with them (audit_counts), moving a
# first-layout file to the second (audit_migrate), the checkpoints
# (audit_ckpt), and the files of a dated name (audit_files).
AUDIT_SRCS = fcgi/audit.c fcgi/audit_writer.c fcgi/audit_db.c \
	     fcgi/audit_ids.c fcgi/audit_counts.c fcgi/audit_migrate.c \
	     fcgi/audit_ckpt.c fcgi/audit_files.c
# The gateway, one file per concern, in the order a request goes through them:
# the worker threads (events), each an event loop (loop: epoll, timers, the
# before-sleep hook where a turn's batch is decided; it knows nothing of
# FastCGI) with its FastCGI connections (conns); the jobs of a batch and the
# configuration generations (gateway); the request's view (request), its
# rules (rule); the verdict (limiter, which settles it with decision's
# policy) over the Redis layer: redis runs the calls, redis_conn holds the
# connections and each address's health, redis_io the bytes on their
# sockets (plain, or TLS with OpenSSL), redis_lib the function library on a
# server (loaded, never replaced), redis_deploy the deployment (slot
# map, master), with slot for Cluster routing, replicas for the rules of
# [redis] replicas (WAIT or not) and sentinel for finding the
# master; redis_admin above them asks the deployment as a whole: status,
# probe, rlgate-ctl's connections); the reply (respond, rendering only);
# beside the line: the deny cache (limiter's), the counters (metrics) and
# the status endpoint (status: /health and /metrics, their texts; it reads
# the counters, gateway's numbers and the Redis layer's health); below the
# counters' shared memory and the audit files, the check that a file
# another user could have made first is rlgate's own (trust); the local
# limiter (local) over the C twin of the Lua's algorithms (algo).
GATEWAY	 = fcgi/main.c fcgi/gateway.c fcgi/events.c fcgi/conns.c \
	   fcgi/status.c
LIB_SRCS = fcgi/wire.c fcgi/request.c fcgi/rule.c fcgi/limiter.c \
	   fcgi/redis_admin.c fcgi/redis.c fcgi/redis_conn.c fcgi/redis_io.c \
	   fcgi/redis_lib.c fcgi/redis_deploy.c fcgi/slot.c fcgi/replicas.c \
	   fcgi/sentinel.c fcgi/decision.c fcgi/respond.c fcgi/loop.c \
	   $(AUDIT_SRCS) $(CONF_SRCS) fcgi/log.c fcgi/scripts.c \
	   fcgi/denycache.c fcgi/metrics.c fcgi/local.c fcgi/algo.c fcgi/trust.c
# Every object and test program is built under build/ (B), which mirrors the
# source tree: X.c -> build/X.o (and X.d), tests/KIND/NAME.c ->
# build/tests/KIND/NAME; the programs stay where they are installed from
# (fcgi/rlgate, fcgi/rlgate-ctl, cgi-bin/rlgate.cgi, reports/rlgate-report).
B	 = build
obj	 = $(patsubst %.c,$(B)/%.o,$(1))
LIB_OBJS = $(call obj,$(LIB_SRCS))
# The admin command: the same configuration and Redis connection, its own
# main: the limit state's commands (ctl), the libraries' (ctl_versions), over
# their complaint and Redis plumbing (ctl_redis).
CTL	 = fcgi/ctl.c fcgi/ctl_versions.c fcgi/ctl_redis.c
# The Lua library: the prelude, the algorithms (sorted), the functions.
LUA_ALGS = $(sort $(filter-out lua/prelude.lua lua/decide.lua lua/rlgate.lua, \
	   $(wildcard lua/*.lua)))
LUA_LIB	 = lua/prelude.lua $(LUA_ALGS) lua/decide.lua

# The report tool: its own sources plus conf and the audit schema. main
# over the results (agg with window, top, verify over its loader
# verify_load, whatif over its reader whatif_read and NEW.ini's checks
# whatif_conf) read from the audit (db, intern), written by output (text, CSV, JSON; html for the page;
# whatif_out, whatif_html), over the
# names of a series (label), over the escapers (escape). --what-if also
# links the gateway's rule matching (rule, request) and the C twin (algo).
REPORT_SRCS = $(sort $(wildcard reports/*.c))
REPORT_GW   = fcgi/rule.c fcgi/request.c fcgi/algo.c
REPORT_OBJS = $(call obj,$(REPORT_SRCS) $(CONF_SRCS) $(REPORT_GW))

# The tests by kind (tests/README.md); each directory is globbed, so a new
# file there is built without editing this list.
# Unit tests (cmocka): tests/unit/test_NAME.c links the gateway's modules.
UNIT_SRCS = $(sort $(wildcard tests/unit/test_*.c))
UNIT_BINS = $(UNIT_SRCS:%.c=$(B)/%)
# Helper programs for integration tests and benchmarks: tests/tools/NAME.c,
# each with a main. Their programs are the one exception to build/:
# tests/tools/NAME, where the device bench kit (../shared/device-bench)
# carries them from.
TOOL_SRCS = $(sort $(wildcard tests/tools/*.c))
TOOL_BINS = $(TOOL_SRCS:.c=)

# Man pages live beside what they describe.
MANPAGES = $(wildcard fcgi/*.8 conf/*.5 reports/*.1)

PROGS	= fcgi/rlgate fcgi/rlgate-ctl cgi-bin/rlgate.cgi \
	  $(if $(REPORT_SRCS),reports/rlgate-report)

.PHONY: all deps test unit integration run bench install clean fuzz deb cycles
all: $(PROGS)

# fcgi/facts.h, generated, is included through conf_values.h: before the
# first build -MMD has not yet said by whom, so every object waits for it.
$(B)/%.o: %.c | fcgi/facts.h
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(WARN) -MMD -MP -c -o $@ $<

fcgi/version.h: debian/changelog
	@test -n "$(VERSION)" || { echo "no version in debian/changelog" >&2; exit 1; }
	printf '/* Made by make from debian/changelog: do not edit. */\n#define RLG_VERSION\t"%s"\n' \
		'$(VERSION)' > $@.tmp && mv $@.tmp $@
# Before the first build, -MMD has not yet said who includes it.
$(call obj,fcgi/main.c fcgi/gateway.c fcgi/events.c fcgi/status.c fcgi/ctl.c): fcgi/version.h

fcgi/scripts.c: $(LUA_LIB) fcgi/embed.sh
	sh fcgi/embed.sh $(LUA_LIB) > $@.tmp && mv $@.tmp $@

# The facts the C shares with the library, written once in lua/ (limits,
# each algorithm's spec, the reply layouts): lua/README.md, "Facts".
fcgi/facts.h: $(LUA_LIB) fcgi/embed.sh fcgi/facts.awk
	sh fcgi/embed.sh -f $(LUA_LIB) > $@.tmp && mv $@.tmp $@

# The library as one file: redis-cli -x FUNCTION LOAD < lua/rlgate.lua (its name,
# rlgate_ and 12 hex digits of the version, is on its first line)
lua/rlgate.lua: $(LUA_LIB) fcgi/embed.sh
	sh fcgi/embed.sh -l $(LUA_LIB) > $@.tmp && mv $@.tmp $@

fcgi/rlgate: $(call obj,$(GATEWAY)) $(LIB_OBJS)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

fcgi/rlgate-ctl: $(call obj,$(CTL)) $(LIB_OBJS)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# The CGI entry point is the same program; it notices CGI by itself.
cgi-bin/rlgate.cgi: fcgi/rlgate
	@mkdir -p $(@D)	# git keeps no empty directory: a fresh clone has none
	cp fcgi/rlgate $@

reports/rlgate-report: $(REPORT_OBJS)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(B)/tests/unit/test_%: $(B)/tests/unit/test_%.o $(LIB_OBJS)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) $(shell pkg-config --libs cmocka)
# The report's unit test links its modules too (all but its main).
$(B)/tests/unit/test_report: $(call obj,$(filter-out reports/main.c,$(REPORT_SRCS)) $(REPORT_GW))

tests/tools/%: $(B)/tests/tools/%.o $(LIB_OBJS)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
# Their objects are kept (make deletes an implicit chain's intermediates):
# else a later make, and tests/it/it_make.sh, finds every test out of date.
.SECONDARY: $(UNIT_SRCS:%.c=$(B)/%.o) $(TOOL_SRCS:%.c=$(B)/%.o)
# lua_check checks the Lua's admissions with the report's promise checker.
tests/tools/lua_check: $(call obj,$(filter-out reports/main.c,$(REPORT_SRCS)))
$(B)/tests/tools/allow_fcgi.o: CPPFLAGS += $(FCGI_CFLAGS)
tests/tools/allow_fcgi: LDLIBS += $(FCGI_LIBS)

deps:
	@sh tests/deps.sh

# The tests know a sanitizer build (RLGATE_SANITIZE): only where its speed
# would change what a test can show (tests/it/it_deploy_cgi.sh).
test: deps
	@$(MAKE) --no-print-directory all $(UNIT_BINS) $(TOOL_BINS) $(FUZZ_BINS)
	@$(MAKE) --no-print-directory cycles
	@RLGATE_SANITIZE=$(SANITIZE) bash tests/run

unit: all $(UNIT_BINS) cycles
	@bash tests/run unit

# Files call downward only: fails, naming the files, when the objects of
# fcgi/ and reports/ depend on each other in a circle.
cycles: all
	@bash tests/tools/callgraph.sh $(call obj,$(GATEWAY)) $(LIB_OBJS) \
		$(call obj,$(CTL)) $(call obj,$(REPORT_SRCS))

integration: all $(TOOL_BINS)
	@bash tests/run integration

run: deps
	@$(MAKE) --no-print-directory all
	@bash tests/demo.sh

bench: deps
	@$(MAKE) --no-print-directory all $(TOOL_BINS)
	@bash tests/bench/bench.sh

# ---- Fuzzing (libFuzzer) ------------------------------------------------
# tests/fuzz/fuzz_NAME.c are libFuzzer targets for what users and clients send:
# the configuration loader (fuzz_conf), key and cost templates
# (fuzz_template), the request path request -> rule -> respond
# (fuzz_request), the FastCGI records of the events engine
# (fuzz_wire) and the shared /metrics table filled with random bytes
# (fuzz_metrics, which links fcgi/metrics.c built with a smaller table and
# status.c for the texts). They are built with clang and
# -fsanitize=fuzzer,address,undefined from objects of their own (build/fz/),
# whatever SANITIZE says, so they never mix with the gateway's build.
# `make fuzz` runs each for FUZZ_SECONDS from its seed corpus tests/fuzz/corpus/NAME/
# (left as it is); new inputs and crash files go to FUZZ_OUT/NAME/. A crash
# fails the target and names the file that reproduces it:
#   build/tests/fuzz/fuzz_NAME FILE
# `make test` runs each for a few seconds (tests/it/it_fuzz.sh).
FUZZ_CC		?= clang
FUZZ_SECONDS	?= 60
FUZZ_OUT	?= /tmp/rlgate-fuzz
FUZZ_FLAGS	 = -O1 -g -fno-omit-frame-pointer -fno-sanitize-recover=undefined
FUZZ_SRCS	 = $(sort $(wildcard tests/fuzz/fuzz_*.c))
FUZZ_BINS	 = $(FUZZ_SRCS:%.c=$(B)/%)
fzobj		 = $(patsubst %.c,$(B)/fz/%.o,$(1))
FUZZ_LIB_OBJS	 = $(call fzobj,$(CONF_SRCS) fcgi/request.c fcgi/rule.c fcgi/decision.c \
		   fcgi/respond.c fcgi/log.c fcgi/wire.c)
.SECONDARY: $(FUZZ_LIB_OBJS) $(call fzobj,$(FUZZ_SRCS))

$(B)/fz/%.o: %.c | fcgi/facts.h
	@mkdir -p $(@D)
	$(FUZZ_CC) $(CPPFLAGS) $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link,address,undefined \
		$(WARN) -MMD -MP -c -o $@ $<

$(B)/tests/fuzz/fuzz_%: $(B)/fz/tests/fuzz/fuzz_%.o $(FUZZ_LIB_OBJS)
	@mkdir -p $(@D)
	$(FUZZ_CC) -fsanitize=fuzzer,address,undefined -o $@ $^ $(LDLIBS)

# fuzz_metrics links metrics.c built with a smaller table (so that every
# input fills all of it), the same sizes for the target itself; status.c,
# which writes the texts it checks, links the rest of the gateway.
FUZZ_METRICS_SIZES = -DMAX_WORKERS=4 -DMAX_PROCS=8 -DRLG_METRICS_RULES=16
FUZZ_METRICS_OBJS = $(B)/fz/small/fcgi/metrics.o $(call fzobj,fcgi/status.c \
		    fcgi/gateway.c $(filter-out fcgi/metrics.c,$(LIB_SRCS)))
.SECONDARY: $(FUZZ_METRICS_OBJS)
$(B)/fz/small/%.o: %.c | fcgi/facts.h
	@mkdir -p $(@D)
	$(FUZZ_CC) $(CPPFLAGS) $(FUZZ_METRICS_SIZES) $(FUZZ_FLAGS) \
		-fsanitize=fuzzer-no-link,address,undefined $(WARN) -MMD -MP -c -o $@ $<
$(B)/fz/tests/fuzz/fuzz_metrics.o: CPPFLAGS += $(FUZZ_METRICS_SIZES)
$(B)/tests/fuzz/fuzz_metrics: $(B)/fz/tests/fuzz/fuzz_metrics.o $(FUZZ_METRICS_OBJS)
	@mkdir -p $(@D)
	$(FUZZ_CC) -fsanitize=fuzzer,address,undefined -o $@ $^ $(LDLIBS)

fuzz: deps
	@$(MAKE) --no-print-directory $(FUZZ_BINS)
	@fail=0; for f in $(FUZZ_BINS); do \
		n=$${f#$(B)/tests/fuzz/fuzz_}; mkdir -p $(FUZZ_OUT)/$$n; \
		echo "fuzz_$$n: $(FUZZ_SECONDS) s, new inputs and crashes in $(FUZZ_OUT)/$$n"; \
		$$f -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=1024 \
			-artifact_prefix=$(FUZZ_OUT)/$$n/ -print_final_stats=1 \
			$(FUZZ_OUT)/$$n tests/fuzz/corpus/$$n > $(FUZZ_OUT)/$$n.log 2>&1 \
		&& tail -n 12 $(FUZZ_OUT)/$$n.log | grep -E '^(stat::number_of_executed_units|Done)' \
		|| { fail=1; echo "fuzz_$$n FAILED:"; grep -A30 -E '^==[0-9]+==|ERROR|fuzz_[a-z]+:' $(FUZZ_OUT)/$$n.log | head -60; }; \
	done; exit $$fail

install: all
	install -d $(DESTDIR)$(SBINDIR) $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBEXECDIR) \
		$(DESTDIR)$(SYSCONFDIR)/rlgate $(DESTDIR)$(MANDIR)/man1 \
		$(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(MANDIR)/man8 \
		$(DESTDIR)$(SYSTEMDUNITDIR)
	install -m 755 fcgi/rlgate $(DESTDIR)$(SBINDIR)/rlgate
	install -m 755 fcgi/rlgate-ctl $(DESTDIR)$(SBINDIR)/rlgate-ctl
	install -m 755 cgi-bin/rlgate.cgi $(DESTDIR)$(LIBEXECDIR)/rlgate.cgi
	$(if $(REPORT_SRCS),install -m 755 reports/rlgate-report $(DESTDIR)$(BINDIR)/rlgate-report)
	install -m 640 conf/rlgate.ini $(DESTDIR)$(SYSCONFDIR)/rlgate/rlgate.ini.sample
	for m in $(MANPAGES); do \
		install -m 644 $$m $(DESTDIR)$(MANDIR)/man$${m##*.}/; done
	for u in $(UNITS); do \
		sed 's|@SBINDIR@|$(SBINDIR)|g' $$u > $(DESTDIR)$(SYSTEMDUNITDIR)/$${u##*/} && \
		chmod 644 $(DESTDIR)$(SYSTEMDUNITDIR)/$${u##*/}; done

# ---- The Debian package -------------------------------------------------
# debian/ builds it with debhelper (make install into the package). It is
# built in a copy of the tree (git's files, or all but build/ outside git)
# under DEB_BUILD, so that the package's `make clean` leaves this tree's
# build alone: DEB_BUILD/rlgate_VERSION-REV_ARCH.deb. The packages of
# earlier versions stay there: the one a rollback installs.
DEB_BUILD ?= build/deb
deb:
	rm -rf $(DEB_BUILD)/src && mkdir -p $(DEB_BUILD)/src
	if git rev-parse --is-inside-work-tree > /dev/null 2>&1; then \
		git ls-files -z --cached --others --exclude-standard | \
		tar --null -T - --ignore-failed-read -cf - ; \
	else tar --exclude=./build -cf - . ; fi | tar -xf - -C $(DEB_BUILD)/src
	cd $(DEB_BUILD)/src && dpkg-buildpackage -b -us -uc -j2 > ../build.log 2>&1 || \
		{ tail -40 ../build.log; exit 1; }
	@ls -t $(DEB_BUILD)/rlgate_*.deb | head -1

clean:
	rm -f fcgi/scripts.c fcgi/facts.h fcgi/version.h lua/rlgate.lua $(PROGS) $(TOOL_BINS)
	rm -rf $(B)

-include $(shell find $(B) -name '*.d' -not -path '$(B)/deb/*' 2>/dev/null)
