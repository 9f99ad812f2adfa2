-- gcra: the generic cell rate algorithm: a token bucket kept as one
-- timestamp, the theoretical arrival time (TAT) at which the bucket is full.
--
-- KEYS[1]  state key, a plain string: the TAT in microseconds, "A" or, when
--          window/limit is not a whole number of microseconds, "A+R/D"
--          (A + R/D us, D = limit / gcd(limit, window_us)), so nothing is rounded
-- ARGV[1]  now in microseconds; empty: Redis TIME
-- ARGV[2]  cost of this request (tokens), 1 <= cost <= burst
-- ARGV[3]  limit: tokens added per window, >= 1 (emission interval T = window / limit)
-- ARGV[4]  window in milliseconds, >= 1
-- ARGV[5]  burst: capacity in tokens, >= 1; empty: limit
-- ARGV[6]  precision: not used (ignored)
-- KEYS[2]  optional: the override hash, in KEYS[1]'s hash slot (rlgate uses
--          KEYS[1] .. ':override'). Its fields limit, window_ms, burst and
--          precision_ms stand in for ARGV[3..6] (absent or empty fields keep
--          them) and are checked like them with this request's cost; a set
--          that fails is ignored as a whole and ARGV is used (reply[11] = 3).
--          unlimited = 1 admits without counting: the state is not read or
--          written. Without KEYS[2] nothing is read and the reply has 7 fields.
--
-- Reply {allowed, remaining, limit, reset_ms, retry_after_ms, now_us, delay_ms}:
--   allowed         1 admitted, 0 denied
--   remaining       whole tokens left: floor(burst - max(0, TAT - now) / T) after this request
--   limit           the limit used: ARGV[3], or the override's
--   reset_ms        ms until TAT, when the bucket is full again (ceil); 0 when full
--   retry_after_ms  0 when admitted; else ms until a request of this cost fits
--                   (ceil): sent exactly then it is admitted, 1 ms earlier it is not
--   now_us          the time used for the decision
--   delay_ms        always 0
-- With KEYS[2] the reply goes on (the parameters the decision used):
--   window_ms       the window used: ARGV[4], or the override's
--   burst           the burst used (ARGV[5], the override's, or limit)
--   precision_ms    0 (this algorithm has no precision)
--   override        0 none, 1 applied, 2 unlimited (admitted, nothing counted:
--                   remaining = limit, reset_ms = retry_after_ms = 0), 3 ignored
--   why             only when override is 3: "override ignored: <sentence>"
--
-- Promise: admitted when max(TAT, now) + cost * T - now <= burst * T, then
-- TAT = max(TAT, now) + cost * T. These are exactly token_bucket.lua's
-- decisions and replies with the same arguments (tokens = burst - (TAT - now)
-- / T) while the clock does not run backwards, in one plain key: any
-- interval of length d admits at most burst + d * limit / window.
-- Arithmetic is exact in ticks of 1/D us; it needs burst * window_us /
-- gcd(limit, window_us) < 2^53, checked (an error otherwise).
-- redis-cell: CL.THROTTLE key max_burst count period cost is this script with
-- limit = count, window = period * 1000, burst = max_burst + 1 (its capacity).
-- Denied requests change nothing. Decisions come from the stored TAT and now,
-- never from the TTL.
--
-- TTL: SET ... PX reset_ms + 1 on every admission: the key vanishes at TAT
-- (1 ms margin for Redis's millisecond expiry clock), and a missing key is a
-- full bucket.
--
-- Errors: a Redis error reply "rlgate: <sentence>" for bad arguments.

local MAX = 4503599627370496	-- 2^52: integers below are exact in a Lua number
local EXACT = 9007199254740992	-- 2^53

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

-- argv[i] (ARGV, or ARGV with the override's fields) as an integer in
-- [lo, hi]; dflt when empty (an error when dflt is nil).
local function arg_int(argv, i, name, lo, hi, dflt)
	local s = argv[i]
	if s == nil or s == '' then
		if dflt ~= nil then return dflt end
		return nil, name .. ' is missing (ARGV[' .. i .. '])'
	end
	if #s > 16 or not string.find(s, '^%-?%d+$') then
		local shown = string.gsub(string.sub(s, 1, 40), '[^%w%.%-%+]', '_')
		return nil, name .. ' must be an integer, got "' .. shown .. '"'
	end
	local v = tonumber(s)
	if v < lo then return nil, name .. ' must be at least ' .. num(lo) .. ', got ' .. s end
	if v > hi then return nil, name .. ' must be at most ' .. num(hi) .. ', got ' .. s end
	return v
end

local function args(argv)
	local a, err = {}, nil
	a.cost, err = arg_int(argv, 2, 'cost', 1, 1e9)
	if err then return nil, err end
	a.limit, err = arg_int(argv, 3, 'limit', 1, 1e9)
	if err then return nil, err end
	a.window_ms, err = arg_int(argv, 4, 'window_ms', 1, 1e11)
	if err then return nil, err end
	a.burst, err = arg_int(argv, 5, 'burst', 1, 1e9, a.limit)
	if err then return nil, err end
	if a.cost > a.burst then
		return nil, 'cost ' .. num(a.cost) .. ' is above burst ' .. num(a.burst) ..
		    ': such a request could never be admitted'
	end
	local window_us = a.window_ms * 1000
	local g = gcd(window_us, a.limit)
	a.scale = window_us / g		-- units per token
	a.rate = a.limit / g		-- units per microsecond
	if a.burst * a.scale >= EXACT then
		return nil, 'burst ' .. num(a.burst) .. ' is too large for limit ' ..
		    num(a.limit) .. ' per ' .. num(a.window_ms) .. ' ms: burst * window_us / ' ..
		    'gcd(limit, window_us) must stay below 2^53 (use a shorter window or ' ..
		    'a limit sharing more factors with it)'
	end
	a.now, err = arg_int(argv, 1, 'now (microseconds)', 0, MAX, -1)
	if err then return nil, err end
	if a.now < 0 then
		local t = redis.call('TIME')
		a.now = tonumber(t[1]) * 1000000 + tonumber(t[2])
	end
	return a
end

local a, err = args(ARGV)
if not a then return redis.error_reply('rlgate: ' .. err) end

-- The override in KEYS[2]: the arguments to use, the override code (0 none,
-- 1 applied, 2 unlimited, 3 ignored) and, when ignored, why.
local function apply_override()
	local f = redis.pcall('HMGET', KEYS[2], 'limit', 'window_ms', 'burst',
	    'precision_ms', 'unlimited')
	if f.err then return a, 3, 'the override key (KEYS[2]) is not a hash' end
	for i = 1, 5 do
		if f[i] == '' then f[i] = false end
	end
	if f[5] and f[5] ~= '0' then
		if f[5] == '1' then return a, 2 end
		return a, 3, 'unlimited must be 1 or 0, got "' ..
		    string.gsub(string.sub(f[5], 1, 40), '[^%w%.%-%+]', '_') .. '"'
	end
	if not (f[1] or f[2] or f[3] or f[4]) then return a, 0 end
	local o, why = args({num(a.now), ARGV[2], f[1] or ARGV[3], f[2] or ARGV[4],
	    f[3] or ARGV[5], f[4] or ARGV[6]})
	if not o then return a, 3, why end
	return o, 1
end
local override, ignored = 0, nil
if KEYS[2] then a, override, ignored = apply_override() end

-- The seven fields; with KEYS[2], the parameters used and the override's code.
local function reply(t)
	if KEYS[2] then
		t[8], t[9], t[10], t[11] = a.window_ms, a.burst or 0, a.precision_ms or 0, override
		if ignored then t[12] = 'override ignored: ' .. ignored end
	end
	return t
end
if override == 2 then return reply({1, a.limit, a.limit, 0, 0, a.now, 0}) end
local key, now, cost, limit = KEYS[1], a.now, a.cost, a.limit
local interval, ticks_per_us = a.scale, a.rate	-- T in ticks; a tick is 1/D us
local tau = a.burst * interval			-- capacity, in ticks

-- Ticks from now until the stored TAT (0 when it is past), at most tau
-- (more only after a parameter change: tokens never go below zero).
local function wait_ticks(s)
	local at, r, d = string.match(s, '^(%d+)%+(%d+)/(%d+)$')
	if at then
		at, r, d = tonumber(at), tonumber(r), tonumber(d)
		if d ~= ticks_per_us then r = math.ceil(r / d * ticks_per_us) end
	else
		at, r = tonumber(s), 0
		if at == nil then return 0 end
	end
	if at < now or (at == now and r == 0) then return 0 end
	if at - now > cdiv(tau, ticks_per_us) then return tau end
	return math.min(tau, (at - now) * ticks_per_us + r)
end
local function format_time(ticks)	-- now + ticks, as "A" or "A+R/D"
	local us = fdiv(ticks, ticks_per_us)
	local r = ticks - us * ticks_per_us
	if r == 0 then return num(now + us) end
	return num(now + us) .. '+' .. num(r) .. '/' .. num(ticks_per_us)
end

-- A key of another type holds another algorithm's state (its rule changed
-- algorithm): it is replaced, as if it were missing.
local stored = redis.pcall('GET', key)
if type(stored) == 'table' then redis.call('DEL', key); stored = false end
local w = 0
if stored then w = wait_ticks(stored) end

local need = cost * interval
if w + need <= tau then
	w = w + need
	local reset_ms = cdiv(w, ticks_per_us * 1000)
	redis.call('SET', key, format_time(w), 'PX', reset_ms + 1)
	return reply({1, fdiv(tau - w, interval), limit, reset_ms, 0, now, 0})
end
local retry_ms = cdiv(w + need - tau, ticks_per_us * 1000)
return reply({0, fdiv(tau - w, interval), limit, cdiv(w, ticks_per_us * 1000), retry_ms, now, 0})
