-- leaky_bucket: a queue that lets requests out at a constant rate, one per
-- window/limit (scaled by cost); the gateway holds each admitted request for
-- delay_ms before answering, so a busy client waits instead of failing.
--
-- KEYS[1]  state key, a plain string: the time Q (us) at which the queue is
--          empty again, "A" or, when window/limit is not a whole number of
--          microseconds, "A+R/D" (A + R/D us, D = limit / gcd(limit, window_us))
-- ARGV[1]  now in microseconds; empty: Redis TIME
-- ARGV[2]  cost of this request, >= 1: it holds the outlet for cost * T
-- ARGV[3]  limit: requests (cost units) let out per window, >= 1; T = window / limit
-- ARGV[4]  window in milliseconds, >= 1
-- ARGV[5]  burst: cost units that may wait ahead of an admitted request, >= 0
--          (0: no queue, admitted only when the outlet is free); empty: limit
-- ARGV[6]  precision: not used (ignored)
--
-- A request arriving at now waits w = max(0, Q - now) (the work queued ahead
-- of it). It is admitted when w <= burst * T, leaves after delay_ms = ceil(w),
-- and then holds the outlet for cost * T: Q = now + w + cost * T. With cost 1:
-- an idle bucket lets a request out at once, and of n simultaneous requests
-- 1 + burst are admitted (one leaves at once, burst wait, the k-th for k * T),
-- the rest denied: nginx limit_req's burst, without nodelay.
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
--   remaining       cost-1 requests that could still be admitted now, after this one:
--                   floor((burst * T - w') / T) + 1 with w' = Q - now, at least 0
--   limit           the limit used: ARGV[3], or the override's
--   reset_ms        ms until the queue is empty, Q - now (ceil); 0 when idle
--   retry_after_ms  0 when admitted; else ms until w <= burst * T (ceil): a
--                   request sent exactly then is admitted, 1 ms earlier it is not
--   now_us          the time used for the decision
--   delay_ms        ms the gateway holds an admitted request: ceil(w / 1 ms),
--                   0 at an idle bucket; 0 when denied
-- With KEYS[2] the reply goes on (the parameters the decision used):
--   window_ms       the window used: ARGV[4], or the override's
--   burst           the burst used (ARGV[5], the override's, or limit)
--   precision_ms    0 (this algorithm has no precision)
--   override        0 none, 1 applied, 2 unlimited (admitted, nothing counted:
--                   remaining = limit, reset_ms = retry_after_ms = 0), 3 ignored
--   why             only when override is 3: "override ignored: <sentence>"
--
-- Promise: admitted requests leave (at now + their exact wait) in arrival
-- order, each at least (the previous one's cost) * T after the previous one,
-- and none waits more than burst * T. Hence any interval of length d admits
-- at most burst + d * limit / window + the cost of its last request (with
-- cost 1: burst + 1 + d * limit / window). Arithmetic is exact in ticks of
-- 1/D us; it needs (burst + cost) * window_us / gcd(limit, window_us) < 2^52,
-- checked.
-- Denied requests change nothing. Decisions come from the stored Q and now,
-- never from the TTL.
--
-- TTL: SET ... PX reset_ms + 1 on every admission: the key vanishes when the
-- queue is empty (1 ms margin for Redis's millisecond expiry clock), and a
-- missing key is an idle bucket.
--
-- Errors: a Redis error reply "rlgate: <sentence>" for bad arguments.

local MAX = 4503599627370496	-- 2^52: integers below are exact in a Lua number

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
	a.burst, err = arg_int(argv, 5, 'burst', 0, 1e9, a.limit)
	if err then return nil, err end
	local window_us = a.window_ms * 1000
	local g = gcd(window_us, a.limit)
	a.scale = window_us / g		-- units per token
	a.rate = a.limit / g		-- units per microsecond
	if (a.burst + a.cost) * a.scale >= MAX then
		return nil, 'burst ' .. num(a.burst) .. ' and cost ' .. num(a.cost) ..
		    ' are too large for limit ' .. num(a.limit) .. ' per ' .. num(a.window_ms) ..
		    ' ms: (burst + cost) * window_us / gcd(limit, window_us) must stay below ' ..
		    '2^52 (use a shorter window or a limit sharing more factors with it)'
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
local max_wait = a.burst * interval		-- in ticks

-- Ticks from now until the stored Q (0 when it is past). A Q written with
-- these parameters is at most (burst + its cost) * T ahead, below 2^52
-- ticks; the cap at 2^52 only guards against a Q written with others.
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
	if at - now >= fdiv(MAX, ticks_per_us) then return MAX end
	return (at - now) * ticks_per_us + r
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
local per_ms = ticks_per_us * 1000

if w <= max_wait then
	local q = w + cost * interval
	local reset_ms = cdiv(q, per_ms)
	redis.call('SET', key, format_time(q), 'PX', reset_ms + 1)
	local remaining = math.max(0, fdiv(max_wait - q, interval) + 1)
	return reply({1, remaining, limit, reset_ms, 0, now, cdiv(w, per_ms)})
end
return reply({0, 0, limit, cdiv(w, per_ms), cdiv(w - max_wait, per_ms), now, 0})
