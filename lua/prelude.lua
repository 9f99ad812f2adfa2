#!lua name=@RLGATE_LIB@
-- prelude: what the six algorithms of the rlgate library share: exact integer
-- arithmetic, argument parsing and checks, the clock, overrides, replies, and
-- the runner of a standalone call (LIB_<algorithm>). Not the algorithms
-- (lua/<algorithm>.lua) nor the functions Redis calls (lua/decide.lua).
--
-- The library is this file, the six algorithms (sorted) and decide.lua, in
-- that order, as one chunk (fcgi/embed.sh; `make lua/rlgate.lua`). Everything
-- is local to the chunk: Redis forbids globals in a library.
--
-- An algorithm is a table:
--   spec                      {limit_max, burst = nil | 'bucket' | 'queue',
--                              precision = true | nil}: its arguments
--   check(a, key, d)       -> d: the decision on the current state, written
--                              into d (a table the caller keeps for it: see
--                              verdict) and into nothing else: d.allowed
--                              (boolean), and reply fields
--                              d.remaining, d.reset_ms, d.retry_ms, d.delay_ms
--                              (as today's scripts reply: after the write when
--                              allowed); d.kept_remaining, d.kept_reset_ms: the
--                              state as it is (for an allowed rule not counted);
--                              d.replace: the key holds another type
--   commit(a, key, d)         writes the state and its TTL
--   state                     the Redis type of its key ('hash', 'zset',
--                              'string'): a key of another type is another
--                              algorithm's, which commit replaces
--   describe(a, key, d)    -> the state check read, in words, for LIB_peek
--                              (d: what check filled; reads, never writes)
--   token(a, d)            -> the undo token of what commit counted
--   undo_parse(token)      -> u, or nil when the token is not this algorithm's
--   undo(key, u, now)      -> true when it took something back
-- a is the parsed arguments: cost (and cost_s, its decimal string), limit,
-- window_ms, burst, precision_ms, now (us), what the spec derives (scale,
-- rate) and the row's decimal strings (limit_s, row_params). It is shared
-- between calls (params_of): only now is set, per call; nothing else
-- writes it.

-- The facts the gateway's C shares with the library, written here once:
-- fcgi/embed.sh -f writes each line `local NAME = <integer>	-- fact: ...`
-- into fcgi/facts.h as RLG_NAME, each algorithm's spec as
-- RLG_<ALGORITHM>_LIMIT_MAX, _BURST and _PRECISION, and each reply layout
-- `local NAME = fields{...}` as an enum (lua/README.md, "Facts").
local EXACT_MAX = 4503599627370496	-- fact: 2^52: integers below are exact in a Lua number
local EXACT = 9007199254740992	-- fact: 2^53
local MAX_COUNT = 1000000000	-- fact: cost, limit and burst at most
local MAX_LOG_LIMIT = 100000	-- fact: sliding_log's limit at most (a member per unit)
local MAX_WINDOW_MS = 100000000000	-- fact: window_ms at most
local MAX_BLOCKS = 10000	-- fact: sliding_window's blocks per window at most
local DEFAULT_BLOCKS = 10	-- fact: an empty precision_ms is window_ms / DEFAULT_BLOCKS

-- A reply's layout: its fields' names in order, as name -> position (from
-- 1). fcgi/embed.sh -f writes `local NAME = fields{...}` into fcgi/facts.h
-- as enum rlg_<name>_field: RLG_NAME_<FIELD>, from 0, and RLG_NAME_FIELDS.
local function fields(names)
	local t = {}
	for i = 1, #names do t[names[i]] = i end
	return t
end
-- LIB_<algorithm>'s reply (7 fields without an override key, 11 with one,
-- 12 when the override was ignored).
local REPLY = fields{'allowed', 'remaining', 'limit', 'reset_ms', 'retry_after_ms',
    'now_us', 'delay_ms', 'window_ms', 'burst', 'precision_ms', 'override', 'why'}
-- LIB_decide's row of a rule: one string, these fields joined by spaces.
local DECIDE_ROW = fields{'allowed', 'remaining', 'limit', 'reset_ms', 'retry_after_ms',
    'now_us', 'delay_ms', 'window_ms', 'burst', 'precision_ms', 'override', 'undo', 'why'}
-- LIB_peek's reply.
local PEEK = fields{'allowed', 'remaining', 'limit', 'reset_ms', 'retry_after_ms',
    'now_us', 'delay_ms', 'window_ms', 'burst', 'precision_ms', 'override', 'why',
    'ttl_ms', 'state'}
-- LIB_override's reply.
local OVERRIDE_REPLY = fields{'override', 'limit', 'window_ms', 'burst', 'precision_ms', 'why'}

-- The library's version, the sha1 of its source, and its name, rlgate_ and
-- the version's first 12 hex digits (fcgi/embed.sh puts them here). Every
-- function's name starts with LIB and '_': two versions are two libraries,
-- which share one Redis and never replace each other (lua/README.md).
local VERSION = '@RLGATE_VERSION@'
local LIB = '@RLGATE_LIB@'

-- An integer as a decimal string. Arguments of redis.call go through it:
-- Redis 7.0 prints a Lua number with snprintf("%.17g"), which costs more
-- than this integer formatting does.
local function num(s) return string.format('%d', s) end

-- floor(a / b) for integers, b > 0, exact (corrects the rounded quotient).
local function fdiv(a, b)
	local q = math.floor(a / b)
	if q * b > a then q = q - 1 elseif (q + 1) * b <= a then q = q + 1 end
	return q
end
local function cdiv(a, b) return -fdiv(-a, b) end
local function gcd(x, y)
	while y > 0 do x, y = y, x - fdiv(x, y) * y end
	return x
end

-- A string shown in an error: at most 40 characters, nothing that could
-- break a reply or a log line.
local function shown(s)
	return (string.gsub(string.sub(s, 1, 40), '[^%w%.%-%+]', '_'))
end

-- argv[i] as an integer in [lo, hi]; dflt when empty (an error when dflt is
-- nil). off: argv[i] is the call's ARGV[i + off], named in "is missing";
-- or, a string, the argument whose field i + 1 it is (a signature of
-- LIB_decide, whose fields 3-7 are argv[2..6]).
local function arg_int(argv, i, name, lo, hi, dflt, off)
	local s = argv[i]
	if s == nil or s == '' then
		if dflt ~= nil then return dflt end
		if type(off) == 'string' then
			return nil, name .. ' is missing (field ' .. (i + 1) .. ' of ' .. off .. ')'
		end
		return nil, name .. ' is missing (ARGV[' .. (i + (off or 0)) .. '])'
	end
	if #s > 16 or not string.find(s, '^%-?%d+$') then
		return nil, name .. ' must be an integer, got "' .. shown(s) .. '"'
	end
	local v = tonumber(s)
	if v < lo then return nil, name .. ' must be at least ' .. num(lo) .. ', got ' .. s end
	if v > hi then return nil, name .. ' must be at most ' .. num(hi) .. ', got ' .. s end
	return v
end

-- The arguments of one decision, argv laid out as a standalone call's ARGV:
-- [2] cost, [3] limit, [4] window_ms, [5] burst, [6] precision_ms ([1], now,
-- is the clock's). Checked in this order, per the algorithm's spec; the
-- result a, or nil and a sentence.
local function params(spec, argv, off)
	local a, err = {}, nil
	a.cost, err = arg_int(argv, 2, 'cost', 1, MAX_COUNT, nil, off)
	if err then return nil, err end
	a.cost_s = num(a.cost)	-- as commands take it: a Lua number costs Redis a %.17g
	a.limit, err = arg_int(argv, 3, 'limit', 1, spec.limit_max, nil, off)
	if err then return nil, err end
	a.window_ms, err = arg_int(argv, 4, 'window_ms', 1, MAX_WINDOW_MS, nil, off)
	if err then return nil, err end
	if spec.precision then
		local p = argv[6]
		if a.window_ms % DEFAULT_BLOCKS == 0 then
			a.precision_ms, err = arg_int(argv, 6, 'precision_ms', 1, a.window_ms,
			    a.window_ms / DEFAULT_BLOCKS, off)
		else
			a.precision_ms, err = arg_int(argv, 6, 'precision_ms', 1, a.window_ms, nil, off)
			if err and (p == nil or p == '') then
				err = 'precision_ms is empty and window_ms ' .. num(a.window_ms) ..
				    ' is not a multiple of ' .. num(DEFAULT_BLOCKS) ..
				    ': give a precision that divides the window'
			end
		end
		if err then return nil, err end
		if a.window_ms % a.precision_ms ~= 0 then
			return nil, 'precision_ms ' .. num(a.precision_ms) .. ' does not divide window_ms ' ..
			    num(a.window_ms) .. ': blocks must tile the window'
		end
		if a.window_ms / a.precision_ms > MAX_BLOCKS then
			return nil, 'window_ms ' .. num(a.window_ms) .. ' / precision_ms ' ..
			    num(a.precision_ms) .. ' is more than ' .. num(MAX_BLOCKS) ..
			    ' blocks: use a coarser precision'
		end
	end
	if spec.burst == nil then
		if a.cost > a.limit then
			return nil, 'cost ' .. num(a.cost) .. ' is above limit ' .. num(a.limit) ..
			    ': such a request could never be admitted'
		end
		return a
	end
	a.burst, err = arg_int(argv, 5, 'burst', spec.burst == 'queue' and 0 or 1, MAX_COUNT,
	    a.limit, off)
	if err then return nil, err end
	if spec.burst == 'bucket' and a.cost > a.burst then
		return nil, 'cost ' .. num(a.cost) .. ' is above burst ' .. num(a.burst) ..
		    ': such a request could never be admitted'
	end
	-- Rates as exact fractions: a token is scale units, rate units come per us.
	local window_us = a.window_ms * 1000
	local g = gcd(window_us, a.limit)
	a.scale = window_us / g
	a.rate = a.limit / g
	if spec.burst == 'bucket' and a.burst * a.scale >= EXACT then
		return nil, 'burst ' .. num(a.burst) .. ' is too large for limit ' ..
		    num(a.limit) .. ' per ' .. num(a.window_ms) .. ' ms: burst * window_us / ' ..
		    'gcd(limit, window_us) must stay below 2^53 (use a shorter window or ' ..
		    'a limit sharing more factors with it)'
	end
	if spec.burst == 'queue' and (a.burst + a.cost) * a.scale >= EXACT_MAX then
		return nil, 'burst ' .. num(a.burst) .. ' and cost ' .. num(a.cost) ..
		    ' are too large for limit ' .. num(a.limit) .. ' per ' .. num(a.window_ms) ..
		    ' ms: (burst + cost) * window_us / gcd(limit, window_us) must stay below ' ..
		    '2^52 (use a shorter window or a limit sharing more factors with it)'
	end
	return a
end

-- params of the argument strings COST LIMIT WINDOW_MS BURST PRECISION_MS
-- (nil counts as empty), kept: a gateway sends the same few rules' arguments
-- over and over, and checking them is much of a call's work. The sets that
-- passed are kept between calls (the library's state lives until it is
-- loaded again), at most PARAMS_KEPT of them (then the store starts
-- afresh); an error is found again each time, with its sentence. The
-- result is shared: callers set its now, and change nothing else in it.
local PARAMS_KEPT = 4096
local params_kept, params_count = {}, 0
local function params_of(spec, c, l, w, b, p, off)
	c, l, w, b, p = c or '', l or '', w or '', b or '', p or ''
	local t = params_kept[spec]
	if t then t = t[c] end
	if t then t = t[l] end
	if t then t = t[w] end
	if t then t = t[b] end
	if t then t = t[p] end
	if t then return t end
	local a, err = params(spec, {nil, c, l, w, b, p}, off)
	if not a then return nil, err end
	-- What LIB_decide's row says of the parameters, formatted once (row_line).
	a.limit_s = num(a.limit)
	a.row_params = num(a.window_ms) .. ' ' .. num(a.burst or 0) .. ' ' ..
	    num(a.precision_ms or 0)
	if params_count >= PARAMS_KEPT then params_kept, params_count = {}, 0 end
	t = params_kept
	local path = {spec, c, l, w, b}
	for i = 1, 5 do
		local n = t[path[i]]
		if n == nil then n = {}; t[path[i]] = n end
		t = n
	end
	t[p] = a
	params_count = params_count + 1
	return a
end

-- Now in us: s, or Redis TIME when s is empty. Read once per call, so that
-- every rule of a call decides at the same instant; Redis TIME, not the
-- gateway's clock, so that several gateways agree.
local function clock(s, off)
	if s ~= nil and s ~= '' then return arg_int({s}, 1, 'now (microseconds)', 0, EXACT_MAX, nil, off) end
	local t = redis.call('TIME')
	return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- A time kept exactly, as "A" us or "A+R/D" (A + R/D us): at, r, d (d nil
-- for "A"), or nil when s is neither. (tonumber first: no number has a /.)
local function parse_at(s)
	local at = tonumber(s)
	if at ~= nil then return at, 0, nil end
	local r, d
	at, r, d = string.match(s, '^(%d+)%+(%d+)/(%d+)$')
	if at then return tonumber(at), tonumber(r), tonumber(d) end
	return nil
end

-- Ticks (1/ticks_per_us us each) from now until the time stored at key ("A"
-- or "A+R/D" us, as format_at writes it): 0 when it is past or the key holds
-- none (missing, or another algorithm's state, which SET replaces), and never
-- more than cap (a time written with other parameters may lie further ahead).
local function ticks_ahead(key, now, ticks_per_us, cap)
	local s = redis.pcall('GET', key)
	if type(s) ~= 'string' then return 0 end
	local at, r, den = parse_at(s)
	if at == nil then return 0 end
	if den ~= nil and den ~= ticks_per_us then r = math.ceil(r / den * ticks_per_us) end
	if at < now or (at == now and r == 0) then return 0 end
	if at - now > cdiv(cap, ticks_per_us) then return cap end
	return math.min(cap, (at - now) * ticks_per_us + r)
end

-- Whole ms from then to now (us), rounded towards 0: how long ago a stored
-- time was, in LIB_peek's words.
local function ms_ago(now, t)
	local x = (now - t) / 1000
	if x >= 0 then return math.floor(x) end
	return math.ceil(x)
end

-- now + ticks (a tick is 1/per_us us) as "A" or "A+R/D".
local function format_at(now, ticks, per_us)
	local us = fdiv(ticks, per_us)
	local r = ticks - us * per_us
	if r == 0 then return num(now + us) end
	return num(now + us) .. '+' .. num(r) .. '/' .. num(per_us)
end

-- Undo for a state that is one time, pushed need ticks later by each
-- admission (gcra's TAT, leaky_bucket's Q): the token "A:R:D:need" says the
-- time the admission left (A + R/D us) and what it added. Takes back what of
-- it still lies ahead of now: never more than need, and nothing once that time
-- has passed (the state may have been full, idle or rewritten since). Exact
-- when no other request came in between.
local function undo_at_parse(s)
	local at, r, d, need = string.match(s, '^(%d+):(%d+):(%d+):(%d+)$')
	if not at or tonumber(d) == 0 then return nil end
	return {at = tonumber(at), r = tonumber(r), d = tonumber(d), need = tonumber(need)}
end
local function undo_at_token(now, ticks, per_us, need)
	local us = fdiv(ticks, per_us)
	return num(now + us) .. ':' .. num(ticks - us * per_us) .. ':' .. num(per_us) .. ':' .. num(need)
end
local function undo_at(key, u, now)
	if u.at < now or (u.at == now and u.r == 0) then return false end
	local s = redis.pcall('GET', key)
	if type(s) ~= 'string' then return false end
	local at, r, d = parse_at(s)
	-- Another denominator: the parameters changed since; far ahead: not ours.
	if at == nil or (d ~= nil and d ~= u.d) or at < now or at - now > fdiv(EXACT_MAX, u.d) then
		return false
	end
	local mine = u.need
	if u.at - now <= fdiv(u.need, u.d) then mine = math.min(mine, (u.at - now) * u.d + u.r) end
	local left = (at - now) * u.d + r - mine	-- ticks ahead once mine is taken off
	if left <= 0 then
		redis.call('DEL', key)
	else
		redis.call('SET', key, format_at(now, left, u.d), 'PX', num(cdiv(left, u.d * 1000) + 1))
	end
	return true
end

-- The fields of an override (limit, window_ms, burst, precision_ms,
-- unlimited: f[1..5], false or '' when absent) applied to a (the arguments
-- COST LIMIT WINDOW_MS BURST PRECISION_MS = argv[base + 2 .. base + 6],
-- parsed): the arguments to use, the code (0 none, 1 applied, 2 unlimited,
-- 3 ignored) and, when ignored, why. The fields stand in for argv's and go
-- through the same checks with this request's cost; a set that fails is
-- ignored as a whole. (LIB_override asks this for rlgate-ctl.)
local function override_of(spec, a, argv, base, f)
	for i = 1, 5 do
		if f[i] == '' then f[i] = false end
	end
	if f[5] and f[5] ~= '0' then
		if f[5] == '1' then return a, 2 end
		return a, 3, 'unlimited must be 1 or 0, got "' .. shown(f[5]) .. '"'
	end
	if not (f[1] or f[2] or f[3] or f[4]) then return a, 0 end
	local o, why = params_of(spec, argv[base + 2], f[1] or argv[base + 3],
	    f[2] or argv[base + 4], f[3] or argv[base + 5], f[4] or argv[base + 6])
	if not o then return a, 3, why end
	o.now = a.now
	return o, 1
end

-- override_of the hash okey, as every decision with an override key reads
-- it (a key of another type is an ignored override).
local function apply_override(spec, a, argv, base, okey)
	local f = redis.pcall('HMGET', okey, 'limit', 'window_ms', 'burst',
	    'precision_ms', 'unlimited')
	if f.err then return a, 3, 'the override key (KEYS[2]) is not a hash' end
	return override_of(spec, a, argv, base, f)
end

-- d, a table kept from call to call, as a decision: whether it admits, its
-- reply fields, and the state as it is. An algorithm's check sets the other
-- fields its commit reads on every admission.
local function verdict(d, allowed, remaining, reset_ms, retry_ms, delay_ms,
    kept_remaining, kept_reset_ms)
	d.allowed, d.remaining, d.reset_ms, d.retry_ms, d.delay_ms = allowed, remaining,
	    reset_ms, retry_ms, delay_ms
	d.kept_remaining, d.kept_reset_ms = kept_remaining, kept_reset_ms
	return d
end

-- The fields of a decision d under a, counted or not, that vary: allowed,
-- remaining, reset_ms, retry_ms, delay_ms. An allowed rule that was not
-- counted shows the state as it is, and no delay (the request is not let
-- through); d nil is unlimited: admitted, nothing read or counted.
local function shown_fields(a, d, counted)
	if d == nil then return 1, a.limit, 0, 0, 0 end
	if not d.allowed then return 0, d.remaining, d.reset_ms, d.retry_ms, d.delay_ms end
	if not counted then return 1, d.kept_remaining, d.kept_reset_ms, 0, 0 end
	return 1, d.remaining, d.reset_ms, d.retry_ms, d.delay_ms
end

-- A standalone call's reply (REPLY): the fields of a decision d under a
-- (shown_fields) and the parameters used; code and why (why nil: the
-- reply ends at override).
local function row(a, d, counted, code, why)
	local allowed, remaining, reset_ms, retry_ms, delay_ms = shown_fields(a, d, counted)
	local R, t = REPLY, {}
	t[R.allowed], t[R.remaining], t[R.limit], t[R.reset_ms] = allowed, remaining, a.limit,
	    reset_ms
	t[R.retry_after_ms], t[R.now_us], t[R.delay_ms] = retry_ms, a.now, delay_ms
	t[R.window_ms], t[R.burst], t[R.precision_ms] = a.window_ms, a.burst or 0,
	    a.precision_ms or 0
	t[R.override], t[R.why] = code, why
	return t
end

-- The same decision as LIB_decide's row, DECIDE_ROW: one string, the 11
-- integers of row() in decimal, then the undo token and why ("" for none), joined by
-- single spaces; why, last, is the rest of the string (it may hold
-- spaces, a token never does). One string, not 13 fields: Redis converts
-- each field of a reply on its own (tests/bench/README.md). now_s is
-- a.now in decimal (once per call). Formatting a number costs a sprintf:
-- the parameters' part of the row is formatted once per parameter set
-- (a.limit_s, a.row_params: params_of), 0 and the codes not at all.
local CODES = {[0] = '0', '1', '2', '3'}
local function row_line(a, d, counted, code, why, undo, now_s)
	local allowed, remaining, reset_ms, retry_ms, delay_ms = shown_fields(a, d, counted)
	return (allowed == 1 and '1 ' or '0 ') .. num(remaining) .. ' ' .. a.limit_s .. ' ' ..
	    num(reset_ms) .. ' ' .. (retry_ms == 0 and '0' or num(retry_ms)) .. ' ' .. now_s ..
	    ' ' .. (delay_ms == 0 and '0' or num(delay_ms)) .. ' ' .. a.row_params .. ' ' ..
	    CODES[code] .. ' ' .. undo .. ' ' .. why
end

-- A standalone call: FCALL LIB_<algorithm> 1 KEY [OVERRIDE_KEY] NOW_US
-- COST LIMIT WINDOW_MS BURST PRECISION_MS, today's per-script contract.
local function standalone(alg, keys, argv)
	local a, err = params_of(alg.spec, argv[2], argv[3], argv[4], argv[5], argv[6])
	if not a then return redis.error_reply('rlgate: ' .. err) end
	local now
	now, err = clock(argv[1])
	if err then return redis.error_reply('rlgate: ' .. err) end
	a.now = now
	local code, why = 0, nil
	if keys[2] then a, code, why = apply_override(alg.spec, a, argv, 0, keys[2]) end
	local d = nil
	if code ~= 2 then
		d = alg.check(a, keys[1], {})
		if d.allowed then alg.commit(a, keys[1], d) end
	end
	local t = row(a, d, true, code, why and 'override ignored: ' .. why)
	if not keys[2] then	-- up to delay_ms
		for i = REPLY.delay_ms + 1, REPLY.override do t[i] = nil end
	end
	return t
end

-- The algorithms by name, and their names in order; each
-- lua/<algorithm>.lua adds itself.
local algorithms, algorithm_names = {}, {}
local function algorithm(name, A)
	algorithms[name] = A
	algorithm_names[#algorithm_names + 1] = name
end
