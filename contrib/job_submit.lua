--[[
job_submit.lua for Slurm's job_submit/lua plugin: plain GPU jobs sent to a
hops-managed partition become hops jobs, so users who never heard of hops are
scheduled by it.

Install: `JobSubmitPlugins=lua` in slurm.conf and this file as job_submit.lua
next to slurm.conf (Slurm 22.05 and 24.11 both ship job_submit_lua.so).

A job is taken over when it goes to one of HOPS_PARTITIONS (explicitly or as
the default partition), asks for GPUs (`--gres=gpu:N`, `--gpus-per-node=N`
or `--gpus=N`) and carries no hops tag yet (jobs from `hops submit` are
already tagged and pass through untouched). It is then:

* tagged with a hops tag in its comment: the demand set comes from the
  comment `hops:gpus=1,2,4` when the user wrote one (optionally followed by
  ` samples=N batch=B`), else it is the one GPU count asked for;
* held (priority 0) and requeueable, like a job from `hops submit`; its GPU
  request stays as given (per node or per job), since hopsd's placement
  replaces it anyway (partition, nodes, GPU count) before releasing the job.

A typed request (`--gres=gpu:a100:2`) is left alone: Slurm cannot change the
GPU type of a pending job, so hops could not move it.

Sizing a job whose samples are unknown: hops needs a job size in samples.
Without `samples=`, the size is the work the user asked Slurm for, at hops's
reference rate: time limit (seconds) x REFERENCE_THROUGHPUT (per-GPU samples/s
on a speed-1.0 GPU, as `[scheduler] reference_throughput` in hops.conf) x the
GPU count asked for. A job without a time limit is sized on
DEFAULT_TIME_LIMIT_MIN. The size stays that; what the job reports through the
hops probe (progress, rates per GPU type), when it uses one, drives hopsd's
remaining-time estimates as for any hops job. Without the probe, shorter limits
are simply scheduled as shorter jobs.
]]

-- Partitions whose plain GPU jobs hops takes over (the centre's choice).
local HOPS_PARTITIONS = { hops = true }
-- Per-GPU samples/s on a speed-1.0 GPU type: hops.conf [scheduler] reference_throughput.
local REFERENCE_THROUGHPUT = 100.0
-- Minutes assumed when a job gives no time limit.
local DEFAULT_TIME_LIMIT_MIN = 60
local MAX_DEMANDS = 32
local MAX_GPUS = 4096
local TAG_PREFIX = "hops1:"

local function default_partition(part_list)
	for name, part in pairs(part_list or {}) do
		if part.flag_default == 1 then
			return name
		end
	end
	return nil
end

-- Partitions named by the job (a comma-separated list), or the default one.
local function managed(job_desc, part_list)
	local names = job_desc.partition
	if names == nil or names == "" then
		names = default_partition(part_list)
	end
	if names == nil then
		return false
	end
	for name in string.gmatch(names, "[^,]+") do
		if not HOPS_PARTITIONS[name] then
			return false
		end
	end
	return true
end

-- GPUs in a TRES string such as "gres:gpu:2", "gres/gpu:a100:2", "gres/gpu=2".
local function gpus_in(tres)
	if tres == nil or tres == "" then
		return 0
	end
	local total = 0
	for item in string.gmatch(tres, "[^,]+") do
		local count = string.match(item, "^gres[:/]gpu[:=](%d+)$")
			or string.match(item, "^gres[:/]gpu:[^:=]+[:=](%d+)$")
		if count then
			total = total + tonumber(count)
		end
	end
	return total
end

-- "gres/gpu:a100:2": a typed request (Slurm refuses to change a pending job's type).
local function typed(tres)
	return tres ~= nil and string.match(tres, "gpu:[^:,=]*%a[^:,=]*:%d+") ~= nil
end

local function requested_gpus(job_desc)
	local per_node = gpus_in(job_desc.tres_per_node)
	if per_node > 0 then
		local nodes = tonumber(job_desc.min_nodes) or 1
		if nodes < 1 or nodes > MAX_GPUS then
			nodes = 1
		end
		return per_node * nodes
	end
	return gpus_in(job_desc.tres_per_job)
end

-- "hops:gpus=1,2,4 samples=5e6 batch=64" -> {1,2,4}, 5e6, 64 (nil for what is absent).
local function user_hints(comment)
	if comment == nil or string.sub(comment, 1, 5) ~= "hops:" then
		return nil, nil, nil
	end
	local demands = nil
	local list = string.match(comment, "gpus=([%d,]+)")
	if list then
		local seen, values = {}, {}
		for word in string.gmatch(list, "%d+") do
			local n = tonumber(word)
			if n >= 1 and n <= MAX_GPUS and not seen[n] then
				seen[n] = true
				table.insert(values, n)
			end
		end
		table.sort(values)
		if #values >= 1 and #values <= MAX_DEMANDS then
			demands = values
		end
	end
	local samples = tonumber(string.match(comment, "samples=([%d.eE+]+)") or "")
	local batch = tonumber(string.match(comment, "batch=(%d+)") or "")
	return demands, samples, batch
end

local function time_limit_minutes(job_desc)
	local limit = tonumber(job_desc.time_limit)
	-- Slurm marks "not given" with NO_VAL (and INFINITE): both mean "unknown" here.
	if limit == nil or limit <= 0 or limit >= 4294967294 then
		return DEFAULT_TIME_LIMIT_MIN
	end
	return limit
end

local function tag(demands, samples, batch)
	local parts = {}
	for _, d in ipairs(demands) do
		table.insert(parts, string.format("%d", d))
	end
	return string.format(
		'%s{"d":[%s],"n":%.0f,"b":%d,"m":"unknown","p":25000000}',
		TAG_PREFIX,
		table.concat(parts, ","),
		samples,
		batch
	)
end

function slurm_job_submit(job_desc, part_list, submit_uid)
	local comment = job_desc.comment
	if comment ~= nil and string.sub(comment, 1, #TAG_PREFIX) == TAG_PREFIX then
		return slurm.SUCCESS -- already a hops job (hops submit)
	end
	if not managed(job_desc, part_list) then
		return slurm.SUCCESS
	end
	if typed(job_desc.tres_per_node) or typed(job_desc.tres_per_job) then
		return slurm.SUCCESS -- the user pinned a GPU type: Slurm cannot re-type it
	end
	local gpus = requested_gpus(job_desc)
	if gpus < 1 then
		return slurm.SUCCESS -- not a GPU job: hops has nothing to place
	end
	local demands, samples, batch = user_hints(comment)
	demands = demands or { math.min(gpus, MAX_GPUS) }
	if samples == nil or samples <= 0 or samples > 1e15 then
		samples = time_limit_minutes(job_desc) * 60 * REFERENCE_THROUGHPUT * gpus
	end
	if batch == nil or batch < 1 or batch > 1000000 then
		batch = 32
	end
	job_desc.comment = tag(demands, samples, batch)
	job_desc.priority = 0
	job_desc.requeue = 1
	slurm.log_info(
		"hops: job from uid %u taken over (demands %s, %.0f samples)",
		submit_uid,
		table.concat(demands, ","),
		samples
	)
	return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
	return slurm.SUCCESS
end

slurm.log_info("hops: job_submit.lua loaded (partitions taken over: hops)")
return slurm.SUCCESS
