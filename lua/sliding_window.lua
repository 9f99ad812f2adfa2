-- sliding_window: per-block counters in one hash; the window is the current
-- block and the window/precision - 1 blocks before it.
--
-- State: a hash {block index = admitted cost}; block j covers the times
-- [j * precision, (j + 1) * precision) (us since the epoch).
-- Arguments: cost <= limit; limit: cost admitted in any n = window / precision
-- consecutive blocks; window_ms; precision_ms: block width, dividing the
-- window, at most MAX_BLOCKS blocks; empty: window / DEFAULT_BLOCKS (burst
-- unused).
-- Reply fields:
--   remaining       limit - cost counted in the current n blocks
--   reset_ms        ms until the newest counted block drops out (ceil): then the
--                   whole limit is free again; 0 when nothing is counted
--   retry_after_ms  when denied: ms until enough of the oldest blocks have dropped
--                   out for this cost (a block boundary, so exact in ms)
--   delay_ms        always 0
-- Promise: any n consecutive blocks admit at most limit cost. So any interval
-- of length window - precision admits at most limit, and any interval of
-- length d at most limit * ceil((ceil(d / precision) + 1) / n): 2 x limit for
-- a whole window in the worst case, but never within less than
-- window - precision. Blocks that have dropped out are deleted on admission,
-- never counted (so are blocks more than a window ahead of now, written with
-- another precision).
-- TTL: reset_ms + 1 on every admission.
-- Undo token "block:cost": that block's counter goes down by cost (never below
-- 0, deleted at 0). Exact: a block is counted or not whoever came first.
do
	local A = {spec = {limit_max = MAX_COUNT, precision = true}, state = 'hash'}

	function A.check(a, key, d)
		local now, cost, limit = a.now, a.cost, a.limit
		local block_us = a.precision_ms * 1000
		local nblocks = a.window_ms / a.precision_ms
		local current = fdiv(now, block_us)
		local first = current - nblocks + 1	-- oldest block still counted
		-- Block j drops out at the start of block j + nblocks; ms from now until then.
		local function ms_until_out(j) return cdiv((j + nblocks) * block_us - now, 1000) end

		-- A key of another type holds another algorithm's state (its rule
		-- changed algorithm): it is replaced, as if it were missing.
		local all = redis.pcall('HGETALL', key)
		local replace = false
		if all.err then replace = true; all = {} end
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
		local kept_reset_ms = newest and ms_until_out(newest) or 0
		d.used, d.nlive = used, #live
		if used + cost <= limit then
			if newest == nil or current > newest then newest = current end
			d.replace, d.old, d.current = replace, old, current
			return verdict(d, true, limit - used - cost, ms_until_out(newest), 0, 0,
			    limit - used, kept_reset_ms)
		end
		-- Denied: the oldest blocks must drop out until cost fits.
		table.sort(live, function(x, y) return x[1] < y[1] end)
		local need, freed, retry_ms = used + cost - limit, 0, 0
		for _, b in ipairs(live) do
			freed = freed + b[2]
			if freed >= need then retry_ms = ms_until_out(b[1]); break end
		end
		return verdict(d, false, math.max(0, limit - used), kept_reset_ms, retry_ms, 0,
		    limit - used, kept_reset_ms)
	end

	function A.describe(a, key, d)
		return num(d.nlive) .. ' of ' .. num(a.window_ms / a.precision_ms) .. ' blocks of ' ..
		    num(a.precision_ms) .. ' ms counted, ' .. num(d.used) .. ' admitted in the window'
	end

	function A.commit(a, key, d)
		if d.replace then redis.call('DEL', key) end
		local old = d.old
		for i = 1, #old, 1000 do
			redis.call('HDEL', key, unpack(old, i, math.min(i + 999, #old)))
		end
		redis.call('HINCRBY', key, num(d.current), a.cost_s)
		redis.call('PEXPIRE', key, num(d.reset_ms + 1))
	end

	function A.token(a, d)
		return num(d.current) .. ':' .. num(a.cost)
	end

	function A.undo_parse(s)
		local block, cost = string.match(s, '^(%-?%d+):(%d+)$')
		if not block then return nil end
		return {block = block, cost = tonumber(cost)}
	end

	function A.undo(key, u, now)
		local n = redis.pcall('HGET', key, u.block)
		n = type(n) == 'string' and tonumber(n) or nil
		if n == nil or n <= 0 then return false end
		if n <= u.cost then
			redis.call('HDEL', key, u.block)
		else
			redis.call('HINCRBY', key, u.block, num(-u.cost))
		end
		return true
	end

	algorithm('sliding_window', A)
end
