-- decide: the functions Redis calls, on the algorithms of lua/<algorithm>.lua
-- and the prelude. Not the algorithms themselves.
--
-- FCALL rlgate_decide N K1..KN VERSION NOW_US, then per rule ALGORITHM FLAGS
--     COST LIMIT WINDOW_MS BURST PRECISION_MS
--   All the rules of one request on one node, all or nothing. FLAGS: "-", or
--   letters: d (dry run: decides, never blocks), o (the rule has an override
--   key, the key after its state key), u (give the undo token: for a cluster,
--   where a request's rules may be counted in several calls). Each rule takes
--   1 key, 2 with o.
--   VERSION: the library version the caller expects, "" for any; NOW_US: ""
--   for Redis TIME. Every rule decides on the current state without writing;
--   when every rule not in dry run admits, every rule that admits is counted
--   (state and TTL written), else nothing is written.
--   Reply {counted, R1..Rn}: counted 1 when the request is admitted (and so
--   counted), 0 when not; Ri = {allowed, remaining, limit, reset_ms,
--   retry_after_ms, now_us, delay_ms, window_ms, burst, precision_ms,
--   override, why, undo}: this rule's own decision (an admitting rule that
--   was not counted shows its state as it is), why "" unless override is 3,
--   undo "" unless the rule was counted and has flag u.
-- FCALL rlgate_undo N K1..KN NOW_US, then per rule ALGORITHM UNDO
--   Takes back what rlgate_decide counted (UNDO: its token; "" is skipped),
--   never more than is there. Reply: the number of rules whose state changed.
-- FCALL_RO rlgate_version 0: the library version.
-- FCALL rlgate_<algorithm> 1 KEY [OVERRIDE_KEY] NOW_US COST LIMIT WINDOW_MS
--     BURST PRECISION_MS: one rule on its own, the reply of 7 integers (11 or
--     12 fields with an override key).
-- Errors: one sentence starting "rlgate: "; a rule's names it:
-- "rlgate: rule I (ALGORITHM): ...". After an error nothing was written.

local ALGORITHM_NAMES = 'fixed_window, sliding_window, sliding_log, token_bucket, gcra or leaky_bucket'

-- FLAGS as {dry run, override key, undo token}: the usual ones (others are
-- parsed).
local FLAGS = {['-'] = {false, false, false}, d = {true, false, false},
    o = {false, true, false}, u = {false, false, true}, ['do'] = {true, true, false},
    du = {true, false, true}, ou = {false, true, true}, dou = {true, true, true}}

-- Tables kept from call to call, by a rule's place in the call: its entry,
-- its decision (d, which the algorithm's check fills) and its reply row; and
-- the reply. A call then makes no new table, and no garbage, for them. Every
-- use writes each field it reads; the reply ends at the nil after its last
-- row. (The library's state outlives a call, and Redis converts the reply
-- before the next call begins.)
local entries, verdicts, rows, reply = {}, {}, {}, {}
local function kept(pool, r)
	local t = pool[r]
	if t == nil then t = {}; pool[r] = t end
	return t
end

local function rule_error(r, name, err)
	return redis.error_reply('rlgate: rule ' .. r .. ' (' .. shown(name) .. '): ' .. err)
end

local function decide(keys, args)
	local nargs = #args
	if nargs >= 1 and args[1] ~= '' and args[1] ~= VERSION then
		return redis.error_reply('rlgate: library version ' .. VERSION ..
		    ' is loaded, the caller expects ' .. shown(args[1]))
	end
	if nargs < 2 or (nargs - 2) % 7 ~= 0 then
		return redis.error_reply('rlgate: rlgate_decide takes VERSION, NOW_US and 7 ' ..
		    'arguments per rule (ALGORITHM FLAGS COST LIMIT WINDOW_MS BURST ' ..
		    'PRECISION_MS), got ' .. nargs .. ' arguments')
	end
	local now, err = clock(args[2], 1)
	if err then return redis.error_reply('rlgate: ' .. err) end

	-- Every argument is checked before anything is read or written.
	local nrules = (nargs - 2) / 7
	local rules, k = entries, 1
	for r = 1, nrules do
		local b = 3 + 7 * (r - 1)
		local name, flags = args[b], args[b + 1]
		local alg = algorithms[name]
		if alg == nil then
			return rule_error(r, name, 'unknown algorithm: use ' .. ALGORITHM_NAMES)
		end
		local f = FLAGS[flags]
		if f == nil then
			if not string.find(flags, '^[dou]+$') then
				return rule_error(r, name, 'flags must be letters among d (dry run), o ' ..
				    '(override key) and u (undo token), or - for none, got "' ..
				    shown(flags) .. '"')
			end
			f = {string.find(flags, 'd', 1, true) ~= nil, string.find(flags, 'o', 1, true) ~= nil,
			    string.find(flags, 'u', 1, true) ~= nil}
		end
		local a
		a, err = params_of(alg.spec, args[b + 2], args[b + 3], args[b + 4], args[b + 5],
		    args[b + 6], b)
		if not a then return rule_error(r, name, err) end
		local key, okey = keys[k], nil
		if f[2] then okey = keys[k + 1]; k = k + 1 end
		k = k + 1
		if key == nil or (f[2] and okey == nil) then
			return rule_error(r, name, 'no key left for it: each rule takes its state key, ' ..
			    'and its override key after it with flag o (' .. #keys .. ' keys given)')
		end
		for q = 1, r - 1 do
			if rules[q].key == key then
				return rule_error(r, name, 'its state key is also rule ' .. q ..
				    '\'s: each rule needs a key of its own')
			end
		end
		local e = kept(rules, r)
		e.alg, e.a, e.b, e.key, e.okey, e.dry, e.undo = alg, a, b, key, okey, f[1], f[3]
		e.code, e.why, e.d = 0, nil, nil
	end
	if k - 1 ~= #keys then
		return redis.error_reply('rlgate: the rules take ' .. (k - 1) .. ' keys, ' ..
		    #keys .. ' given')
	end

	-- Decide every rule on the state as it is.
	local admitted = true
	for r = 1, nrules do
		local rule = rules[r]
		rule.a.now = now
		if rule.okey then
			rule.a, rule.code, rule.why = apply_override(rule.alg.spec, rule.a, args,
			    rule.b, rule.okey)
		end
		if rule.code ~= 2 then
			local d = rule.alg.check(rule.a, rule.key, kept(verdicts, r))
			rule.d = d
			if not d.allowed and not rule.dry then admitted = false end
		end
	end

	-- All or nothing: count every rule that admits, or none.
	local out = reply
	out[1], out[nrules + 2] = admitted and 1 or 0, nil
	for r = 1, nrules do
		local rule = rules[r]
		local a, d = rule.a, rule.d
		local counted = admitted and d ~= nil and d.allowed
		local undo = ''
		if counted then
			rule.alg.commit(a, rule.key, d)
			if rule.undo then undo = rule.alg.token(a, d) end
		end
		out[r + 1] = row(kept(rows, r), a, d, counted, rule.code,
		    rule.why and 'override ignored: ' .. rule.why or '', undo)
	end
	return out
end

local function undo(keys, args)
	local nargs = #args
	if nargs < 1 or (nargs - 1) % 2 ~= 0 or (nargs - 1) / 2 ~= #keys then
		return redis.error_reply('rlgate: rlgate_undo takes one key and 2 arguments ' ..
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
				    '" is not one rlgate_decide gives for this algorithm')
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

redis.register_function('rlgate_decide', decide)
redis.register_function('rlgate_undo', undo)
redis.register_function{function_name = 'rlgate_version', flags = {'no-writes'},
    callback = function() return VERSION end}
-- (A numeric loop: pairs is not there while a library loads.)
for i = 1, #algorithm_names do
	local name = algorithm_names[i]
	local alg = algorithms[name]
	redis.register_function('rlgate_' .. name, function(keys, args)
		if #keys < 1 or #keys > 2 then
			return redis.error_reply('rlgate: rlgate_' .. name .. ' takes 1 key (the ' ..
			    'state) or 2 (and its override), got ' .. #keys)
		end
		return standalone(alg, keys, args)
	end)
end
