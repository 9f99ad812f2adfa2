-- decide: the functions Redis calls, on the algorithms of lua/<algorithm>.lua
-- and the prelude. Not the algorithms themselves.
--
-- LIB is the library's name, rlgate_<first 12 hex digits of VERSION>.
--
-- FCALL LIB_decide N K1..KN VERSION NOW_US SIG1..SIGn
--   SIGi, rule i's signature: one argument, its ALGORITHM FLAGS COST LIMIT
--   WINDOW_MS BURST PRECISION_MS joined by single spaces (7 fields, 6
--   spaces; empty fields as for LIB_<algorithm>: "fixed_window - 1 100
--   60000  "). One argument, not 7: Redis parses each argument and puts it
--   in ARGV on its own (tests/bench/README.md), and a signature seen before
--   is found whole, already checked (signature()).
--   The rules of one request on one node, all or nothing; or of several
--   requests (a batch), each all or nothing, decided one after the other.
--   FLAGS: "-", or letters: d (dry run: decides, never blocks), o (the rule
--   has an override key, the key after its state key), u (give the undo
--   token: for a cluster, where a request's rules may be counted in several
--   calls), n (the first rule of another request). Each rule takes 1 key, 2
--   with o.
--   VERSION: the library version the caller expects, "" for any; NOW_US: ""
--   for Redis TIME. Every rule decides on the current state without writing;
--   when every rule not in dry run admits, every rule that admits is counted
--   (state and TTL written), else nothing is written.
--   Reply {counted, R1..Rn}: counted 1 when the request is admitted (and so
--   counted), 0 when not; Ri one string, "ALLOWED REMAINING LIMIT RESET_MS
--   RETRY_AFTER_MS NOW_US DELAY_MS WINDOW_MS BURST PRECISION_MS OVERRIDE
--   UNDO WHY": 11 integers in decimal, the undo token and why, joined by
--   single spaces (13 fields, 12 spaces; why, the rest of the string, may
--   hold spaces, UNDO never does; both "" for none): this rule's own
--   decision (an admitting rule that was not counted shows its state as it
--   is), why "" unless override is 3, undo "" unless the rule was counted
--   and has flag u. A batch replies
--   {counted, R1..Rn} of each request, one after the other, in one array.
--   A request's bad argument is an error in the place of its counted, and
--   no rows, in a batch; the call's error for a request alone. A
--   signature not of 7 fields, or with bad flags, fails the call (they
--   decide how the keys fall).
-- FCALL LIB_undo N K1..KN NOW_US, then per rule ALGORITHM UNDO
--   Takes back what LIB_decide counted (UNDO: its token; "" is skipped),
--   never more than is there. Reply: the number of rules whose state changed.
-- FCALL_RO LIB_peek 1 KEY [OVERRIDE_KEY] ALGORITHM NOW_US COST LIMIT
--     WINDOW_MS BURST PRECISION_MS: what LIB_<algorithm> with these
--   arguments would decide now, from the algorithm's own check, writing
--   nothing (flag no-writes). Reply {allowed, remaining, limit, reset_ms,
--   retry_after_ms, now_us, delay_ms, window_ms, burst, precision_ms,
--   override, why, ttl_ms, state}: fields 1 and 3-11 as the decision's row,
--   and its why (without its "override ignored: "), but remaining and
--   reset_ms of the state as it is (the decision's, when it denies); ttl_ms the key's
--   TTL at NOW_US (-1: none, -2: no key); state the stored state in words.
-- FCALL_RO LIB_override 1 OVERRIDE_KEY ALGORITHM COST LIMIT WINDOW_MS BURST
--     PRECISION_MS, or
--   FCALL_RO LIB_override 0 ALGORITHM COST LIMIT WINDOW_MS BURST PRECISION_MS
--     LIMIT WINDOW_MS BURST PRECISION_MS UNLIMITED: what a decision with the
--   arguments makes of the override hash at OVERRIDE_KEY, or of one holding
--   the five fields given after them (empty: absent); writes nothing.
--   Reply {override, limit, window_ms, burst, precision_ms, why}: the code
--   (0 none, 1 applied, 2 unlimited, 3 ignored), the parameters a decision
--   would use (burst and precision_ms 0 where the algorithm has none), why
--   "" unless the code is 3.
-- FCALL_RO LIB_version 0: the library version.
-- FCALL_RO LIB_acl 0 KEY: the commands the library runs that the caller's
--   user may not run on KEY, space separated ("" when none).
-- FCALL LIB_<algorithm> 1 KEY [OVERRIDE_KEY] NOW_US COST LIMIT WINDOW_MS
--     BURST PRECISION_MS: one rule on its own, the reply of 7 integers (11 or
--     12 fields with an override key).
-- Errors: one sentence starting "rlgate: "; a rule's names it:
-- "rlgate: rule I (ALGORITHM): ...", I counting from 1 in its request.
-- After an error nothing of its request (of the call, for the call's) was
-- written.

local ALGORITHM_NAMES = 'fixed_window, sliding_window, sliding_log, token_bucket, gcra or leaky_bucket'

-- FLAGS as {dry run, override key, undo token, new request}, by the string
-- the gateway sends: its letters in the order d o u n, "-" for none
-- (others are parsed).
local FLAGS = {}
for m = 0, 15 do
	local f = {m % 2 == 1, m % 4 >= 2, m % 8 >= 4, m >= 8}
	local s = (f[1] and 'd' or '') .. (f[2] and 'o' or '') .. (f[3] and 'u' or '') ..
	    (f[4] and 'n' or '')
	FLAGS[s == '' and '-' or s] = f
end

-- Tables kept from call to call, by a rule's place in the call: its entry
-- and its decision (d, which the algorithm's check fills); and the reply
-- (its rows are strings, row_line). A call then makes no new table, and no
-- garbage, for them (a seventh of a one-rule call's Redis time,
-- tests/bench/README.md). Every use writes each field it reads; the reply
-- ends at the nil after its last row. (The library's state outlives a
-- call, and Redis converts the reply before the next call begins.)
local entries, verdicts, reply, requests = {}, {}, {}, {}
local function kept(pool, r)
	local t = pool[r]
	if t == nil then t = {}; pool[r] = t end
	return t
end

local function rule_error(r, name, err)
	return redis.error_reply('rlgate: rule ' .. r .. ' (' .. shown(name) .. '): ' .. err)
end

-- The signatures that passed every check, kept between calls like
-- params_of's sets (a gateway sends the same few over and over), at most
-- SIGS_KEPT of them (then the store starts afresh). Each maps to a table
-- s: s.name, s.alg, s.f (FLAGS' entry), s.a (params_of's, shared), and
-- s[2..6] the strings COST LIMIT WINDOW_MS BURST PRECISION_MS, laid out
-- as a standalone call's ARGV (apply_override reads them, base 0).
local SIGS_KEPT = 4096
local SIG = '^([^ ]*) ([^ ]*) ([^ ]*) ([^ ]*) ([^ ]*) ([^ ]*) ([^ ]*)$'
local sigs_kept, sigs_count = {}, 0

-- The rule of signature sig, the call's r-th (ARGV[r + 2]): s (above),
-- found whole when it was seen before; else split and checked as
-- arguments are, and kept when every check passed. Returns s; or nil and
-- the call's error (the fields or the flags: they decide how the keys
-- fall); or s with s.name and s.f, and the request's error sentence (the
-- algorithm or its parameters, found again each time).
local function signature(sig, r)
	local s = sigs_kept[sig]
	if s then return s end
	local name, flags, c, l, w, b, p = string.match(sig, SIG)
	if name == nil then
		local _, spaces = string.gsub(sig, ' ', ' ')
		return nil, rule_error(r, string.match(sig, '^[^ ]*'), 'its signature must be 7 ' ..
		    'fields joined by single spaces (ALGORITHM FLAGS COST LIMIT WINDOW_MS BURST ' ..
		    'PRECISION_MS), got ' .. (spaces + 1) .. ': "' .. shown(sig) .. '"')
	end
	local f = FLAGS[flags]
	if f == nil then
		if not string.find(flags, '^[doun]+$') then
			return nil, rule_error(r, name, 'flags must be letters among d (dry run), ' ..
			    'o (override key), u (undo token) and n (a new request), or - ' ..
			    'for none, got "' .. shown(flags) .. '"')
		end
		f = {string.find(flags, 'd', 1, true) ~= nil, string.find(flags, 'o', 1, true) ~= nil,
		    string.find(flags, 'u', 1, true) ~= nil, string.find(flags, 'n', 1, true) ~= nil}
	end
	s = {'', c, l, w, b, p, name = name, f = f}
	s.alg = algorithms[name]
	if s.alg == nil then return s, 'unknown algorithm: use ' .. ALGORITHM_NAMES end
	local a, err = params_of(s.alg.spec, c, l, w, b, p, 'ARGV[' .. (r + 2) .. ']')
	if a == nil then return s, err end
	s.a = a
	if sigs_count >= SIGS_KEPT then sigs_kept, sigs_count = {}, 0 end
	sigs_kept[sig] = s
	sigs_count = sigs_count + 1
	return s
end

-- Decides the request of rules first..last at now (in decimal: now_s), all
-- or nothing, and puts counted and its rows in out from out[o + 1] on.
-- Returns the next o.
local function decide_request(first, last, now, now_s, out, o)
	local admitted = true
	for r = first, last do
		local rule = entries[r]
		rule.a.now = now
		if rule.okey then
			rule.a, rule.code, rule.why = apply_override(rule.alg.spec, rule.a, rule.sig,
			    0, rule.okey)
		end
		if rule.code ~= 2 then
			local d = rule.alg.check(rule.a, rule.key, kept(verdicts, r))
			rule.d = d
			if not d.allowed and not rule.dry then admitted = false end
		end
	end
	-- All or nothing: count every rule that admits, or none.
	out[o + 1] = admitted and 1 or 0
	for r = first, last do
		local rule = entries[r]
		local a, d = rule.a, rule.d
		local counted = admitted and d ~= nil and d.allowed
		local undo = ''
		if counted then
			rule.alg.commit(a, rule.key, d)
			if rule.undo then undo = rule.alg.token(a, d) end
		end
		out[o + 2 + r - first] = row_line(a, d, counted, rule.code,
		    rule.why and 'override ignored: ' .. rule.why or '', undo, now_s)
	end
	return o + 2 + last - first
end

local function decide(keys, args)
	local nargs = #args
	if nargs >= 1 and args[1] ~= '' and args[1] ~= VERSION then
		return redis.error_reply('rlgate: library version ' .. VERSION ..
		    ' is loaded, the caller expects ' .. shown(args[1]))
	end
	if nargs < 2 then
		return redis.error_reply('rlgate: ' .. LIB .. '_decide takes VERSION, NOW_US and a ' ..
		    'signature per rule (ALGORITHM FLAGS COST LIMIT WINDOW_MS BURST ' ..
		    'PRECISION_MS joined by single spaces), got ' .. nargs .. ' arguments')
	end
	local now, err = clock(args[2], 1)
	if err then return redis.error_reply('rlgate: ' .. err) end

	-- Every argument is checked before anything is read or written. What
	-- decides how the keys fall (a signature's fields, its flags, the key
	-- count) fails the call; the rest fails the request it belongs to.
	local nrules, nreq, k, q = nargs - 2, 0, 1, nil
	for r = 1, nrules do
		local s, serr = signature(args[r + 2], r)
		if s == nil then return serr end
		local f = s.f
		if r == 1 or f[4] then
			nreq = nreq + 1
			q = requests[nreq]
			if q == nil then q = {}; requests[nreq] = q end
			q.first, q.err = r, nil
		end
		q.last = r
		local key, okey = keys[k], nil
		if f[2] then okey = keys[k + 1]; k = k + 1 end
		k = k + 1
		if key == nil or (f[2] and okey == nil) then
			return rule_error(r, s.name, 'no key left for it: each rule takes its state ' ..
			    'key, and its override key after it with flag o (' .. #keys .. ' keys given)')
		end
		local e = kept(entries, r)
		e.key, e.okey, e.sig, e.dry, e.undo = key, okey, s, f[1], f[3]
		e.code, e.why, e.d = 0, nil, nil
		e.alg, e.a = s.alg, s.a
		-- Its algorithm and arguments (signature), and no earlier rule of
		-- its request on its key; else the request's error.
		if q.err == nil then
			for p = q.first, r - 1 do
				if serr == nil and entries[p].key == key then
					serr = 'its state key is also rule ' .. (p - q.first + 1) ..
					    '\'s: each rule needs a key of its own'
				end
			end
			if serr then q.err = rule_error(r - q.first + 1, s.name, serr) end
		end
	end
	if k - 1 ~= #keys then
		return redis.error_reply('rlgate: the rules take ' .. (k - 1) .. ' keys, ' ..
		    #keys .. ' given')
	end
	if nreq == 1 and q.err then return q.err end

	-- The requests one after the other, each on the state the ones before
	-- it left.
	local out, o, now_s = reply, 0, num(now)
	for i = 1, nreq do
		q = requests[i]
		if q.err then
			out[o + 1], o = q.err, o + 1
		else
			o = decide_request(q.first, q.last, now, now_s, out, o)
		end
	end
	out[o + 1] = nil
	return out
end

local function undo(keys, args)
	local nargs = #args
	if nargs < 1 or (nargs - 1) % 2 ~= 0 or (nargs - 1) / 2 ~= #keys then
		return redis.error_reply('rlgate: ' .. LIB .. '_undo takes one key and 2 arguments ' ..
		    'per rule (ALGORITHM UNDO) after NOW_US: ' .. #keys .. ' keys and ' ..
		    nargs .. ' arguments given')
	end
	local now, err = clock(args[1], 0)
	if err then return redis.error_reply('rlgate: ' .. err) end
	local todo = {}
	for r = 1, #keys do
		local name, token = args[2 * r], args[2 * r + 1]
		local alg = algorithms[name]
		if alg == nil then
			return rule_error(r, name, 'unknown algorithm: use ' .. ALGORITHM_NAMES)
		end
		if token ~= '' then
			local u = alg.undo_parse(token)
			if u == nil then
				return rule_error(r, name, 'undo token "' .. shown(token) ..
				    '" is not one ' .. LIB .. '_decide gives for this algorithm')
			end
			todo[#todo + 1] = {alg = alg, key = keys[r], u = u}
		end
	end
	local n = 0
	for _, t in ipairs(todo) do
		if t.alg.undo(t.key, t.u, now) then n = n + 1 end
	end
	return n
end

-- What a request of the arguments would meet now (see LIB_peek above): the
-- algorithm's check on the state, the override applied as a decision
-- applies it; reads only. rlgate-ctl peek prints it.
local function peek(keys, args)
	if #keys < 1 or #keys > 2 then
		return redis.error_reply('rlgate: ' .. LIB .. '_peek takes 1 key (the state) or 2 ' ..
		    '(and its override), got ' .. #keys)
	end
	local name = args[1] or ''
	local alg = algorithms[name]
	if alg == nil then
		return redis.error_reply('rlgate: unknown algorithm "' .. shown(name) .. '": use ' ..
		    ALGORITHM_NAMES)
	end
	local a, err = params_of(alg.spec, args[3], args[4], args[5], args[6], args[7], 1)
	if not a then return redis.error_reply('rlgate: ' .. err) end
	local now
	now, err = clock(args[2], 1)
	if err then return redis.error_reply('rlgate: ' .. err) end
	a.now = now
	local code, why = 0, nil
	if keys[2] then a, code, why = apply_override(alg.spec, a, args, 1, keys[2]) end
	local key = keys[1]
	local d = alg.check(a, key, {})
	local t = redis.call('TYPE', key).ok
	local state
	if t == 'none' then
		state = 'none (nothing counted: the whole limit is free)'
	elseif t ~= alg.state then
		state = 'a ' .. t .. ', not ' .. name .. ' state: the next request replaces it'
	else
		state = alg.describe(a, key, d)
	end
	local allowed, remaining, reset_ms, retry_ms, delay_ms = 1, d.kept_remaining,
	    d.kept_reset_ms, 0, d.delay_ms
	if code == 2 then	-- unlimited: as the decision's row says it
		remaining, reset_ms, delay_ms = a.limit, 0, 0
	elseif not d.allowed then
		allowed, remaining, reset_ms, retry_ms, delay_ms = 0, d.remaining, d.reset_ms,
		    d.retry_ms, d.delay_ms
	end
	-- The TTL from PEXPIRETIME (-1 none, -2 no key), at the call's clock:
	-- PTTL would be one more command for the gateway's ACL user to allow.
	local ttl = redis.call('PEXPIRETIME', key)
	if ttl >= 0 then ttl = ttl - fdiv(now, 1000) end
	local P, r = PEEK, {}
	r[P.allowed], r[P.remaining], r[P.limit], r[P.reset_ms] = allowed, remaining, a.limit,
	    reset_ms
	r[P.retry_after_ms], r[P.now_us], r[P.delay_ms] = retry_ms, now, delay_ms
	r[P.window_ms], r[P.burst], r[P.precision_ms] = a.window_ms, a.burst or 0,
	    a.precision_ms or 0
	r[P.override], r[P.why], r[P.ttl_ms], r[P.state] = code, why or '', ttl, state
	return r
end

-- What a decision of the arguments makes of an override (see LIB_override
-- above): the hash at keys[1], or one holding args[7..11]; reads only.
-- rlgate-ctl shows and checks overrides with it.
local function override(keys, args)
	if #keys > 1 then
		return redis.error_reply('rlgate: ' .. LIB .. '_override takes 0 keys or 1 (the ' ..
		    'override), got ' .. #keys)
	end
	local name = args[1] or ''
	local alg = algorithms[name]
	if alg == nil then
		return redis.error_reply('rlgate: unknown algorithm "' .. shown(name) .. '": use ' ..
		    ALGORITHM_NAMES)
	end
	local a, err = params_of(alg.spec, args[2], args[3], args[4], args[5], args[6], 0)
	if not a then return redis.error_reply('rlgate: ' .. err) end
	local code, why
	if keys[1] then
		a, code, why = apply_override(alg.spec, a, args, 0, keys[1])
	else
		a, code, why = override_of(alg.spec, a, args, 0, {args[7] or false,
		    args[8] or false, args[9] or false, args[10] or false, args[11] or false})
	end
	local O, r = OVERRIDE_REPLY, {}
	r[O.override], r[O.limit], r[O.window_ms] = code, a.limit, a.window_ms
	r[O.burst], r[O.precision_ms], r[O.why] = a.burst or 0, a.precision_ms or 0, why or ''
	return r
end

-- Every command the library runs, with arguments of its shape (K: the
-- key): what LIB_acl asks Redis about. tests/it_lua.sh checks that it names
-- every redis.call and redis.pcall of lua/*.lua.
local CALLS = {{'TIME'}, {'GET', 'K'}, {'SET', 'K', '1'}, {'DEL', 'K'},
    {'TYPE', 'K'}, {'PEXPIRE', 'K', '1'}, {'PEXPIRETIME', 'K'},
    {'HGET', 'K', 'f'}, {'HMGET', 'K', 'f'}, {'HGETALL', 'K'},
    {'HSET', 'K', 'f', '1'}, {'HINCRBY', 'K', 'f', '1'}, {'HDEL', 'K', 'f'},
    {'ZADD', 'K', '1', 'm'}, {'ZCOUNT', 'K', '0', '1'},
    {'ZRANGE', 'K', '0', '1'}, {'ZRANGEBYSCORE', 'K', '0', '1'},
    {'ZREM', 'K', 'm'}, {'ZREMRANGEBYSCORE', 'K', '0', '1'}}

-- FCALL_RO LIB_acl 0 KEY: the commands of CALLS that the caller's ACL user
-- may not run on KEY (a key under key_prefix), space separated; "" when
-- none. Redis checks a script's commands against the caller's user, and
-- its error does not name the command: the gateway asks this at start-up.
local function acl(_, args)
	local no = {}
	for i = 1, #CALLS do
		local c = CALLS[i]
		local argv = {}
		for j = 2, #c do argv[j - 1] = c[j] == 'K' and (args[1] or '') or c[j] end
		if not redis.acl_check_cmd(c[1], unpack(argv)) then no[#no + 1] = c[1] end
	end
	return table.concat(no, ' ')
end

redis.register_function(LIB .. '_decide', decide)
redis.register_function(LIB .. '_undo', undo)
redis.register_function{function_name = LIB .. '_version', flags = {'no-writes'},
    callback = function() return VERSION end}
redis.register_function{function_name = LIB .. '_acl', flags = {'no-writes'},
    callback = acl}
redis.register_function{function_name = LIB .. '_peek', flags = {'no-writes'},
    callback = peek}
redis.register_function{function_name = LIB .. '_override', flags = {'no-writes'},
    callback = override}
-- (A numeric loop: pairs is not there while a library loads.)
for i = 1, #algorithm_names do
	local name = algorithm_names[i]
	local alg = algorithms[name]
	redis.register_function(LIB .. '_' .. name, function(keys, args)
		if #keys < 1 or #keys > 2 then
			return redis.error_reply('rlgate: ' .. LIB .. '_' .. name .. ' takes 1 key (the ' ..
			    'state) or 2 (and its override), got ' .. #keys)
		end
		return standalone(alg, keys, args)
	end)
end
