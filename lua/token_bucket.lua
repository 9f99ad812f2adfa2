-- token_bucket: a bucket of burst tokens, full at the start, refilled
-- continuously at limit tokens per window; a request takes cost tokens.
--
-- State: a hash {tokens, ts}: the tokens in the bucket at time ts (us), "Q"
-- (whole tokens) or "Q+R/S" (Q + R/S tokens, S = window_us / g with
-- g = gcd(limit, window_us)): tokens are counted in units of 1/S token, so
-- no refill time is ever lost between calls.
-- Arguments: cost <= burst (tokens); limit: tokens added per window; window_ms;
-- burst: capacity in tokens, >= 1, empty: limit (precision_ms unused).
-- Reply fields:
--   remaining       whole tokens left in the bucket
--   reset_ms        ms until the bucket is full again (ceil); 0 when full
--   retry_after_ms  when denied: ms until cost tokens are there (ceil)
--   delay_ms        always 0
-- Promise: a request is admitted when the bucket holds at least cost tokens;
-- any interval of length d admits at most burst + d * limit / window cost.
-- Exactness needs burst * S < 2^53, checked. The same decisions as gcra with
-- the same arguments. Time running backwards counts as no time passing.
-- TTL: reset_ms + 1 on every admission: the key vanishes when the bucket would
-- be full, and a missing key is a full bucket.
-- Undo token "ts:units:deficit:S:rate" (the time of the admission, the units
-- it took, the units missing from a full bucket after it, the scale and
-- units per us): gives back what of the units taken has not refilled since
-- (never more, nothing once the bucket would be full again). Exact when no
-- other request came in between.
do
	local A = {spec = {limit_max = MAX_COUNT, burst = 'bucket'}, state = 'hash'}

	-- Stored tokens "Q" or "Q+R/S" as units of scale (rounded down if the
	-- parameters changed since it was written); nil when neither. (tonumber
	-- first: no number has a /.)
	local function parse_tokens(s, scale)
		local q = tonumber(s)
		if q then return q * scale end
		local r, d
		q, r, d = string.match(s, '^(%d+)%+(%d+)/(%d+)$')
		if q then
			q, r, d = tonumber(q), tonumber(r), tonumber(d)
			if d == scale then return q * scale + r end
			return q * scale + math.floor(r / d * scale)
		end
		return nil
	end
	local function format_tokens(units, scale)
		local q = fdiv(units, scale)
		local r = units - q * scale
		if r == 0 then return num(q) end
		return num(q) .. '+' .. num(r) .. '/' .. num(scale)
	end

	function A.check(a, key, d)
		local now, scale, rate = a.now, a.scale, a.rate
		local capacity = a.burst * scale	-- in units
		-- A key of another type holds another algorithm's state (its rule
		-- changed algorithm): it is replaced, as if it were missing.
		local h = redis.pcall('HMGET', key, 'tokens', 'ts')
		local replace = false
		if h.err then replace = true; h = {} end
		local units, ts = nil, tonumber(h[2])
		if h[1] then units = parse_tokens(h[1], scale) end
		if units == nil or ts == nil then
			units, ts = capacity, now	-- no state: a full bucket
		end
		if units > capacity then units = capacity elseif units < 0 then units = 0 end

		-- Refill from ts to now; time running backwards refills nothing.
		local t = ts
		if now > ts then
			local deficit = capacity - units
			if deficit > 0 then
				if now - ts >= cdiv(deficit, rate) then
					units = capacity
				else
					units = units + (now - ts) * rate
				end
			end
			t = now
		end
		local kept_remaining = fdiv(units, scale)
		local kept_reset_ms = cdiv((t - now) + cdiv(capacity - units, rate), 1000)
		local need = a.cost * scale
		if units >= need then
			local left = units - need
			d.replace, d.units, d.t = replace, left, t
			return verdict(d, true, fdiv(left, scale),
			    cdiv((t - now) + cdiv(capacity - left, rate), 1000), 0, 0,
			    kept_remaining, kept_reset_ms)
		end
		return verdict(d, false, kept_remaining, kept_reset_ms,
		    cdiv((t - now) + cdiv(need - units, rate), 1000), 0, kept_remaining,
		    kept_reset_ms)
	end

	function A.describe(a, key, d)
		local h = redis.call('HMGET', key, 'tokens', 'ts')
		local ts = tonumber(h[2])
		if not h[1] or parse_tokens(h[1], a.scale) == nil or ts == nil then
			return 'no bucket (full)'
		end
		return 'tokens=' .. h[1] .. ' ts=' .. h[2] .. ' (' .. num(ms_ago(a.now, ts)) .. ' ms ago)'
	end

	function A.commit(a, key, d)
		if d.replace then redis.call('DEL', key) end
		redis.call('HSET', key, 'tokens', format_tokens(d.units, a.scale), 'ts', num(d.t))
		redis.call('PEXPIRE', key, num(d.reset_ms + 1))
	end

	function A.token(a, d)
		return num(d.t) .. ':' .. num(a.cost * a.scale) .. ':' ..
		    num(a.burst * a.scale - d.units) .. ':' .. num(a.scale) .. ':' .. num(a.rate)
	end

	function A.undo_parse(s)
		local t, need, deficit, scale, rate = string.match(s, '^(%d+):(%d+):(%d+):(%d+):(%d+)$')
		if not t or tonumber(scale) == 0 or tonumber(rate) == 0 then return nil end
		return {t = tonumber(t), need = tonumber(need), deficit = tonumber(deficit),
		    scale = tonumber(scale), rate = tonumber(rate)}
	end

	function A.undo(key, u, now)
		-- The units taken that have not refilled by now.
		local mine = u.need
		if now > u.t then
			if now - u.t >= cdiv(u.deficit, u.rate) then return false end
			mine = math.min(mine, u.deficit - (now - u.t) * u.rate)
		end
		if mine <= 0 then return false end
		local h = redis.pcall('HMGET', key, 'tokens', 'ts')
		if h.err or not h[1] or not h[2] then return false end
		-- Another denominator: the parameters changed since.
		local d = string.match(h[1], '/(%d+)$')
		if d and tonumber(d) ~= u.scale then return false end
		local units = parse_tokens(h[1], u.scale)
		if units == nil then return false end
		redis.call('HSET', key, 'tokens', format_tokens(units + mine, u.scale))
		return true
	end

	algorithm('token_bucket', A)
end
