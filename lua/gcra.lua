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
--
-- Reply {allowed, remaining, limit, reset_ms, retry_after_ms, now_us, delay_ms}:
--   allowed         1 admitted, 0 denied
--   remaining       whole tokens left: floor(burst - max(0, TAT - now) / T) after this request
--   limit           ARGV[3]
--   reset_ms        ms until TAT, when the bucket is full again (ceil); 0 when full
--   retry_after_ms  0 when admitted; else ms until a request of this cost fits
--                   (ceil): sent exactly then it is admitted, 1 ms earlier it is not
--   now_us          the time used for the decision
--   delay_ms        always 0
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

-- ARGV[i] as an integer in [lo, hi]; dflt when empty (an error when dflt is nil).
local function arg_int(i, name, lo, hi, dflt)
	local s = ARGV[i]
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

local function args()
	local a, err = {}, nil
	a.cost, err = arg_int(2, 'cost', 1, 1e9)
	if err then return nil, err end
	a.limit, err = arg_int(3, 'limit', 1, 1e9)
	if err then return nil, err end
	a.window_ms, err = arg_int(4, 'window_ms', 1, 1e11)
	if err then return nil, err end
	a.burst, err = arg_int(5, 'burst', 1, 1e9, a.limit)
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
	a.now, err = arg_int(1, 'now (microseconds)', 0, MAX, -1)
	if err then return nil, err end
	if a.now < 0 then
		local t = redis.call('TIME')
		a.now = tonumber(t[1]) * 1000000 + tonumber(t[2])
	end
	return a
end

local a, err = args()
local a, err = args()
if not a then return redis.error_reply('rlgate: ' .. err) end
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
	return {1, fdiv(tau - w, interval), limit, reset_ms, 0, now, 0}
end
local retry_ms = cdiv(w + need - tau, ticks_per_us * 1000)
return {0, fdiv(tau - w, interval), limit, cdiv(w, ticks_per_us * 1000), retry_ms, now, 0}
