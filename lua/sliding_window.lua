-- sliding_window: per-block counters in one hash; the window is the current
-- block and the window/precision - 1 blocks before it.
--
-- KEYS[1]  state key, a hash {block index = admitted cost}; block j covers the
--          times [j * precision, (j + 1) * precision) (us since the epoch,
--          aligned to multiples of precision)
-- ARGV[1]  now in microseconds; empty: Redis TIME
-- ARGV[2]  cost of this request, 1 <= cost <= limit
-- ARGV[3]  limit: cost admitted in any n = window / precision consecutive blocks, >= 1
-- ARGV[4]  window in milliseconds, >= 1
-- ARGV[5]  burst: not used (ignored)
-- ARGV[6]  precision: block width in ms, >= 1, dividing window, at most 10000
--          blocks per window; empty: window / 10 (window must then be a
--          multiple of 10 ms)
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
--   remaining       limit - cost counted in the current n blocks (after this request)
--   limit           the limit used: ARGV[3], or the override's
--   reset_ms        ms until the newest counted block drops out (ceil): then the
--                   whole limit is free again; 0 when nothing is counted
--   retry_after_ms  0 when admitted; else ms until enough of the oldest blocks have
--                   dropped out for this cost (a block boundary, so exact in ms): a
--                   request sent exactly then is admitted, 1 ms earlier it is not
--   now_us          the time used for the decision
--   delay_ms        always 0
-- With KEYS[2] the reply goes on (the parameters the decision used):
--   window_ms       the window used: ARGV[4], or the override's
--   burst           0 (this algorithm has no burst)
--   precision_ms    the precision used (ARGV[6], the override's, or window / 10)
--   override        0 none, 1 applied, 2 unlimited (admitted, nothing counted:
--                   remaining = limit, reset_ms = retry_after_ms = 0), 3 ignored
--   why             only when override is 3: "override ignored: <sentence>"
--
-- Promise: any n consecutive blocks admit at most limit cost. So any interval
-- of length window - precision admits at most limit, and any interval of
-- length d at most limit * ceil((ceil(d / precision) + 1) / n): 2 x limit for
-- a whole window in the worst case, but never within less than
-- window - precision (fixed_window: 2 x limit within microseconds).
-- Blocks that have dropped out are deleted on admission, never counted (so
-- are blocks more than a window ahead of now, written with another precision).
-- Denied requests change nothing. Decisions come from the block indexes and
-- now, never from the TTL.
--
-- TTL: PEXPIRE reset_ms + 1 on every admission: the key vanishes when its
-- newest block has dropped out (1 ms margin for Redis's millisecond expiry
-- clock).
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
	if a.window_ms % 10 == 0 then
		a.precision_ms, err = arg_int(argv, 6, 'precision_ms', 1, a.window_ms, a.window_ms / 10)
	else
		a.precision_ms, err = arg_int(argv, 6, 'precision_ms', 1, a.window_ms)
		if err and (argv[6] == nil or argv[6] == '') then
			err = 'precision_ms is empty and window_ms ' .. num(a.window_ms) ..
			    ' is not a multiple of 10: give a precision that divides the window'
		end
	end
	if err then return nil, err end
	if a.window_ms % a.precision_ms ~= 0 then
		return nil, 'precision_ms ' .. num(a.precision_ms) .. ' does not divide window_ms ' ..
		    num(a.window_ms) .. ': blocks must tile the window'
	end
	if a.window_ms / a.precision_ms > 10000 then
		return nil, 'window_ms ' .. num(a.window_ms) .. ' / precision_ms ' ..
		    num(a.precision_ms) .. ' is more than 10000 blocks: use a coarser precision'
	end
	if a.cost > a.limit then
		return nil, 'cost ' .. num(a.cost) .. ' is above limit ' .. num(a.limit) ..
		    ': such a request could never be admitted'
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
local block_us = a.precision_ms * 1000
local nblocks = a.window_ms / a.precision_ms
local current = fdiv(now, block_us)
local first = current - nblocks + 1	-- oldest block still counted

-- Block j drops out at the start of block j + nblocks; ms from now until then.
local function ms_until_out(j) return cdiv((j + nblocks) * block_us - now, 1000) end

-- A key of another type holds another algorithm's state (its rule changed
-- algorithm): it is replaced, as if it were missing.
local all = redis.pcall('HGETALL', key)
if all.err then redis.call('DEL', key); all = {} end
local used, newest, old, live = 0, nil, {}, {}
for i = 1, #all, 2 do
	local j, n = tonumber(all[i]), tonumber(all[i + 1])
	-- Blocks more than a window ahead were written with another precision.
	if j == nil or n == nil or j < first or j > current + nblocks then
		old[#old + 1] = all[i]
	else	-- blocks after current exist only when the clock ran backwards
		used = used + n
		live[#live + 1] = {j, n}
		if newest == nil or j > newest then newest = j end
	end
end

if used + cost <= limit then
	for i = 1, #old, 1000 do
		redis.call('HDEL', key, unpack(old, i, math.min(i + 999, #old)))
	end
	redis.call('HINCRBY', key, num(current), cost)
	if newest == nil or current > newest then newest = current end
	local reset_ms = ms_until_out(newest)
	redis.call('PEXPIRE', key, reset_ms + 1)
	return reply({1, limit - used - cost, limit, reset_ms, 0, now, 0})
end

-- Denied: the oldest blocks must drop out until cost fits.
table.sort(live, function(x, y) return x[1] < y[1] end)
local need, freed, retry_ms = used + cost - limit, 0, 0
for _, b in ipairs(live) do
	freed = freed + b[2]
	if freed >= need then retry_ms = ms_until_out(b[1]); break end
end
return reply({0, math.max(0, limit - used), limit, ms_until_out(newest), retry_ms, now, 0})
