-- sliding_log: every admitted cost unit is a member of a sorted set scored
-- with its time: exact, at the price of one member per unit.
--
-- State: a sorted set of members "<now_us>:<seq>" scored <now_us>; seq counts
-- from 0 among the members of one microsecond.
-- Arguments: cost <= limit; limit <= MAX_LOG_LIMIT (use sliding_window above);
-- window_ms (burst, precision_ms unused).
-- Reply fields:
--   remaining       limit - cost logged in (now - window, now]
--   reset_ms        ms until the newest admission leaves the window (ceil);
--                   0 when nothing is counted
--   retry_after_ms  when denied: ms until enough of the oldest admissions have
--                   left the window for this cost (ceil)
--   delay_ms        always 0
-- Promise: any interval (t - window, t] admits at most limit cost (exact).
-- Admissions that left the window are deleted on admission.
-- TTL: reset_ms + 1 on every admission.
-- Undo token "<now_us>:<first seq>:<cost>": the members this admission added
-- are removed (those that already left the window are gone). Exact.
do
	local A = {spec = {limit_max = MAX_LOG_LIMIT}, state = 'zset'}

	-- The newest logged time (nil when the log is empty).
	local function newest(key)
		local last = redis.call('ZRANGE', key, '-1', '-1', 'WITHSCORES')
		return tonumber(last[2])
	end

	function A.check(a, key, d)
		local now, cost, limit = a.now, a.cost, a.limit
		local window_us = a.window_ms * 1000
		local gone = num(now - window_us)	-- admissions at or before this have left
		-- A key of another type holds another algorithm's state (its rule
		-- changed algorithm): it is replaced, as if it were missing.
		local used = redis.pcall('ZCOUNT', key, '(' .. gone, '+inf')
		local last, replace = nil, false
		if type(used) == 'table' then
			replace, used = true, 0
		elseif used > 0 then
			last = newest(key)	-- later than now only when the clock ran backwards
		end
		local kept_reset_ms = last and cdiv(last + window_us - now, 1000) or 0
		if used + cost <= limit then
			-- Members at now exist only when the newest is at or after it.
			d.replace, d.gone, d.first, d.stamped = replace, gone, 0, last ~= nil and last >= now
			if last == nil or last < now then last = now end
			return verdict(d, true, limit - used - cost, cdiv(last + window_us - now, 1000),
			    0, 0, limit - used, kept_reset_ms)
		end
		-- Denied: the need-th oldest admission in the window must leave first.
		local need = used + cost - limit
		local r = redis.call('ZRANGEBYSCORE', key, '(' .. gone, '+inf', 'WITHSCORES', 'LIMIT', need - 1, 1)
		return verdict(d, false, math.max(0, limit - used), kept_reset_ms,
		    cdiv(tonumber(r[2]) + window_us - now, 1000), 0, limit - used, kept_reset_ms)
	end

	function A.describe(a, key, d)
		return num(a.limit - d.kept_remaining) .. ' admissions in the last ' .. num(a.window_ms) ..
		    ' ms (' .. num(redis.call('ZCOUNT', key, '-inf', '+inf')) .. ' logged)'
	end

	function A.commit(a, key, d)
		if d.replace then redis.call('DEL', key) end
		redis.call('ZREMRANGEBYSCORE', key, '-inf', d.gone)
		-- seq continues after the members already logged at this microsecond,
		-- so that the new ones are stamp:seq..stamp:seq+cost-1, all new. The
		-- check's newest member says whether there may be any (rarely, with
		-- Redis's clock): then they are read.
		local stamp, seq = num(a.now), 0
		if d.stamped and redis.call('ZCOUNT', key, stamp, stamp) > 0 then
			for _, m in ipairs(redis.call('ZRANGEBYSCORE', key, stamp, stamp)) do
				local s = tonumber(string.match(m, ':(%d+)$'))
				if s and s >= seq then seq = s + 1 end
			end
		end
		local first, left = seq, a.cost
		while left > 0 do
			local z = {}
			for i = 1, math.min(left, 1000) do
				z[2 * i - 1] = stamp
				z[2 * i] = stamp .. ':' .. num(seq)
				seq = seq + 1
			end
			redis.call('ZADD', key, unpack(z))
			left = left - #z / 2
		end
		redis.call('PEXPIRE', key, num(d.reset_ms + 1))
		d.first = first
	end

	function A.token(a, d)
		return num(a.now) .. ':' .. num(d.first) .. ':' .. num(a.cost)
	end

	function A.undo_parse(s)
		local stamp, first, cost = string.match(s, '^(%d+):(%d+):(%d+)$')
		if not stamp then return nil end
		return {stamp = stamp, first = tonumber(first), cost = tonumber(cost)}
	end

	function A.undo(key, u, now)
		if redis.pcall('TYPE', key).ok ~= 'zset' then return false end
		local removed, seq, last = 0, u.first, u.first + u.cost - 1
		while seq <= last do
			local m = {}
			for i = 1, math.min(last - seq + 1, 1000) do
				m[i] = u.stamp .. ':' .. num(seq)
				seq = seq + 1
			end
			removed = removed + redis.call('ZREM', key, unpack(m))
		end
		return removed > 0
	end

	algorithm('sliding_log', A)
end
